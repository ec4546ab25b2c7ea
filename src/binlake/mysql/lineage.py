"""The lake's binlog lineage: which server's binlog its offsets are coordinates in.

Binlog coordinates mean something on one server's binlog only. The lake records which server
its current lineage is (`_system/lineage.json`: number, `server_id`, where the stream entered
it); lineage 0 is the server the lake was built from. When the stream starts and finds that its
position no longer holds its history there — another server answers at the source's address
(a replica promoted after a failover), or the server's binlog was reset — it finds the same
GTID position (MariaDB's `domain-server-sequence` list, or MySQL's GTID set with gtid_mode=ON)
in the new binlog (`gtids.offset_of_gtid`) and goes on from there, on the next
lineage: every offset read from then on sorts after every offset before (`offsets`), so the
ledger's watermarks, the schema history and silver's `_binlake_offset` keep their order and
nothing is applied twice or skipped.

A position the new server does not hold (its binlog was reset without its GTID state, or the
promoted replica had not received every transaction the stream read: a history that diverged;
on MySQL, a `gtid_executed` that is no superset of the stream's GTID set) cannot be resumed:
the stream stops with the reset error and its remedy, as does a position never recorded (a
MySQL source with GTIDs off). A snapshot reads the server of the lake's current lineage only;
on another it refuses until the stream has moved the lake.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from binlake.config.settings import Config, SourceConfig
from binlake.errors import BinlogResetError, SourceError
from binlake.lake.event_log import event
from binlake.lake.files import LakeFiles
from binlake.lake.paths import system_path
from binlake.model.offsets import BinlogOffset
from binlake.mysql.connection import connection
from binlake.mysql.gtids import gtid_at, holds, offset_of_gtid, same_position, server_identity
from binlake.mysql.lost_binlog import lost_remedy, resnapshot_remedy
from binlake.mysql.server import binlog_files

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lineage:
    number: int
    server_id: int | None  # None: not seen yet (a lake from before lineages were recorded)
    since: BinlogOffset | None = None  # where the stream entered it (None: lineage 0)

    def to_json(self) -> str:
        since = self.since.to_dict() if self.since else None
        return json.dumps({"number": self.number, "server_id": self.server_id, "since": since})

    @classmethod
    def from_json(cls, text: str) -> Lineage:
        data = json.loads(text)
        since = BinlogOffset.from_dict(data["since"]) if data.get("since") else None
        return cls(int(data["number"]), data.get("server_id"), since)


def lineage_path(config: Config) -> str:
    return system_path(config, "lineage.json")


def current_lineage(files: LakeFiles, config: Config) -> Lineage:
    text = files.read_text(lineage_path(config))
    return Lineage.from_json(text) if text is not None else Lineage(0, None)


def _record(files: LakeFiles, config: Config, lineage: Lineage) -> Lineage:
    files.write_text(lineage_path(config), lineage.to_json())
    return lineage


def source_lineage(files: LakeFiles, config: Config, source: SourceConfig) -> int:
    """The lineage whose coordinates the source's binlog is, for a snapshot about to read it:
    recorded on first sight; another server than the lineage's is refused (the stream moves
    the lake onto it, by GTID, at its next start)."""
    lineage = current_lineage(files, config)
    with connection(source) as conn:
        server = server_identity(conn)
    if lineage.server_id is None:
        return _record(files, config, Lineage(lineage.number, server, lineage.since)).number
    if lineage.server_id != server:
        raise SourceError(
            f"the source at {source.host}:{source.port} is server_id {server}, and the lake's "
            f"binlog positions are server_id {lineage.server_id}'s: the source was replaced (a "
            "failover). Run `binlake stream` first: it finds its position on the new server by "
            "GTID and moves the lake onto it; snapshots can run after that"
        )
    return lineage.number


@dataclass(frozen=True)
class SnapshotReads:
    """What snapshots read past a stream position, on its lineage's server: the newest chunk
    high watermark there (with its GTID position, where it was recorded) and the tables whose
    chunks read past the position. Their rows are in bronze, and reach silver from it."""

    newest: BinlogOffset
    tables: tuple[str, ...]


def snapshot_reads(
    high_watermarks: Iterable[tuple[str, BinlogOffset]], start: BinlogOffset
) -> SnapshotReads | None:
    """The reads past `start` among `high_watermarks` (a table's chunk HW each); None if none
    read past it on its lineage."""
    past = [(t, hw) for t, hw in high_watermarks if hw.lineage == start.lineage and hw > start]
    if not past:
        return None
    _, newest = max(past, key=lambda read: (read[1], bool(read[1].gtid)))
    return SnapshotReads(newest, tuple(sorted({t for t, _ in past})))


def locate(
    files: LakeFiles,
    config: Config,
    source: SourceConfig,
    start: BinlogOffset,
    tables: list[str],
    reads: SnapshotReads | None = None,
) -> BinlogOffset:
    """The stream's `start` on the source as it is now: `start` itself (with its GTID position
    learnt, if it had none) while the source is the lineage's server and still holds it there;
    else the same GTID position in the source's binlog, on the lake's next lineage, provided
    the source also holds what snapshots read past `start` (`reads`)."""
    lineage = current_lineage(files, config)
    with connection(source) as conn:
        server = server_identity(conn)
        held = start.binlog_file in binlog_files(conn)
        at = gtid_at(conn, start) if held else None
    if lineage.server_id is None:
        lineage = _record(files, config, Lineage(lineage.number, server, lineage.since))
    on_its_server = lineage.server_id == server
    current = on_its_server and start.lineage == lineage.number
    if current and held:
        if not start.gtid:
            return start.with_gtid(at) if at else start
        if at is not None and same_position(at, start.gtid):
            return start
    if not start.gtid:
        return start  # nothing to find it by: `check_available` stops the stream
    found = offset_of_gtid(source, config.stream_server_id, start.gtid)
    if found is None:
        if current and not held:  # purged: `check_available` says so, and what follows
            return start
        raise _lost(source, start, server, tables, config.stream.job_name)
    if current and (found.binlog_file, found.pos) == (start.binlog_file, start.pos):
        return start  # the same place after all (its GTID position could not be read there)
    if on_its_server and start.lineage < lineage.number:
        _require_held(source, config, server, reads)
        return found.on(lineage.number)  # another job moved the lake onto this server already
    entered = found.on(lineage.number + 1)
    _record(files, config, Lineage(entered.lineage, server, entered))
    log.warning(
        "stream %s: the source at %s:%s is another binlog than the stream's position %s was "
        "read from (server_id %s, lineage %d); its GTID position %s is at %s there: the stream "
        "goes on from it (lineage %d)",
        config.stream.job_name, source.host, source.port, start, server, lineage.number,
        start.gtid, found, entered.lineage,
        extra=event("source_replaced", [], entered),
    )  # fmt: skip
    # Checked once the lake is on this server: the remedy, a re-snapshot, reads this server.
    _require_held(source, config, server, reads)
    return entered


def _require_held(
    source: SourceConfig, config: Config, server: int, reads: SnapshotReads | None
) -> None:
    """Refuse a new server that lacks what snapshots read on the old one past the stream's
    position: bronze holds rows of transactions the new source never had (a replica promoted
    before it received them), which silver would take from bronze and never lose again. On
    MySQL the new source's `gtid_executed` must hold the read's GTID set (`gtids.holds`). A read
    whose GTID position was not recorded cannot be checked, and is refused alike."""
    if reads is None:
        return
    gtid = reads.newest.gtid
    if gtid and holds(source, config.stream_server_id, gtid):
        return
    what = (
        f"does not hold its GTID position {gtid} (a replica promoted before it received every "
        "transaction the snapshot read)"
        if gtid
        else "may not hold it (its GTID position was not recorded)"
    )
    raise BinlogResetError(
        f"the snapshot of {', '.join(reads.tables)} read the replaced source up to "
        f"{reads.newest}, past the stream's position, and the source at {source.host}:"
        f"{source.port} (server_id {server}) {what}: bronze holds rows this source may never "
        f"have had. {resnapshot_remedy(list(reads.tables))}"
    )


def _lost(
    source: SourceConfig, start: BinlogOffset, server: int, tables: list[str], job: str
) -> BinlogResetError:
    return BinlogResetError(
        f"the source at {source.host}:{source.port} (server_id {server}) does not hold the "
        f"stream's position {start} (GTID position {start.gtid}) in its binlog: its binlog was "
        "reset (RESET MASTER) without its GTID state, or it is a replica promoted before it "
        "had every transaction the stream read (the lake holds changes the source does not), "
        "or one whose binlog holds transactions the stream never read before ones it read. "
        f"The changes since to {', '.join(sorted(tables))} are lost to binlake: "
        f"{lost_remedy(tables, job)}"
    )
