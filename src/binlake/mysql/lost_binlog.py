"""A lost binlog: the stream's position is gone from the source (purged, reset, or on a server
that never held it), with what makes silver whole again in each case."""

from __future__ import annotations

from binlake.config.settings import SourceConfig
from binlake.errors import BinlogPurgedError, BinlogResetError
from binlake.model.offsets import BinlogOffset
from binlake.mysql.connection import connection
from binlake.mysql.server import binlog_files, current_offset


def check_available(source: SourceConfig, start: BinlogOffset, tables: list[str], job: str) -> None:
    """Fail loudly if the source no longer has the binlog file `start` points into: the changes
    of `tables` after it are lost, so only a new snapshot of them, streamed by a new job from
    its high watermarks (the old `job`'s checkpoint points into the lost binlog), makes silver
    whole again."""
    with connection(source) as conn:
        head = current_offset(conn).on(start.lineage)
        files = binlog_files(conn)
    if head < start:
        raise binlog_behind(source, start, head, tables, job)
    if start.binlog_file not in files:
        raise BinlogPurgedError(
            f"the source has purged binlog file {start.binlog_file} (oldest kept: "
            f"{files[0] if files else 'none'}), so the changes after {start} to "
            f"{', '.join(sorted(tables))} are lost to binlake: {lost_remedy(tables, job)}; "
            "and keep binlogs longer on the source (binlog_expire_logs_seconds)"
        )


def binlog_behind(
    source: SourceConfig, start: BinlogOffset, head: BinlogOffset, tables: list[str], job: str
) -> BinlogResetError:
    """The source's binlog ends before the stream's position: read as it is, the stream would
    wait there forever, showing no lag, while the source's changes go by."""
    return BinlogResetError(
        f"the source at {source.host}:{source.port} ends its binlog at {head}, before the "
        f"stream's position {start}: its binlog was reset (RESET MASTER), its log_bin basename "
        "changed, or another server (a promoted replica) answers at that address. binlake's "
        f"positions of {', '.join(sorted(tables))} mean nothing there, and the changes since "
        f"are lost to binlake: {lost_remedy(tables, job)}"
    )


def lost_remedy(tables: list[str], job: str) -> str:
    """What makes silver whole again after the changes of `tables` were lost to stream `job`."""
    names = ",".join(sorted(t.split(".", 1)[1] for t in tables))
    return (
        f"re-snapshot them with `binlake snapshot --tables {names} --reset`, then stream them "
        f"under a new stream.job_name (the checkpoint of {job!r} points into the lost binlog), "
        f"e.g. `binlake stream --set stream.job_name={job}-2`"
    )


def resnapshot_remedy(tables: list[str]) -> str:
    """What makes silver whole again when `tables`' snapshots cannot be trusted on the source the
    stream now reads (a failover): a re-snapshot from it, after which the stream goes on."""
    names = ",".join(sorted(t.split(".", 1)[1] for t in tables))
    return (
        f"Re-snapshot from this source, `binlake snapshot --tables {names} --reset`; the stream "
        "then goes on"
    )
