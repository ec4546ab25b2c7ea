"""`binlake status`: the ledger's state per table and the stream's lag behind the source.

It answers in about a second because it starts no JVM: the ledger and path silver tables are
read with delta-rs (`deltalake`, which honours deletion vectors), the stream's checkpoint with
`pyarrow.fs` (`ArrowFiles`). Only silver tables of a catalog (`lake.catalog`) need the Spark
session, which is created on first use (on Databricks it is the notebook's or job's own).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyspark.sql import SparkSession

from binlake.config.secrets import with_resolved_password
from binlake.config.settings import Config
from binlake.lake.files import ArrowFiles, LakeFiles, batch_ids, join
from binlake.lake.paths import (
    DELETED_COLUMN,
    IS_CURRENT,
    ROUTE_COLUMNS,
    SOURCE_DB,
    SOURCE_TABLE,
    checkpoint_path,
    ledger_path,
    tables_path,
)
from binlake.lake.stream_tables import StreamTables
from binlake.lake.tables import PathTable, lake_table
from binlake.model.offsets import bytes_behind
from binlake.mysql.binlog_archive import BinlogArchive
from binlake.mysql.connection import connection
from binlake.mysql.lineage import current_lineage
from binlake.mysql.retention import duration, expiry_seconds
from binlake.mysql.server import binlog_sizes, current_offset
from binlake.silver.merge import keeps_history, live_rows
from binlake.silver.routes import member_of, silver_name
from binlake.snapshot.chunk_states import ChunkState, read_chunks
from binlake.snapshot.ledger_pace import WINDOW, SnapshotPace, snapshot_pace
from binlake.stream.task import checkpoint_offset

log = logging.getLogger(__name__)


def table_progress(chunks: list[ChunkState]) -> dict[str, tuple[int, int, int]]:
    """Per table: (finished chunks, total chunks, rows in finished chunks)."""
    progress: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for chunk in chunks:
        entry = progress[chunk.table]
        entry[1] += 1
        if chunk.finished:
            entry[0] += 1
            entry[2] += chunk.rows or 0
    return {t: (v[0], v[1], v[2]) for t, v in sorted(progress.items())}


@dataclass(frozen=True)
class StreamLag:
    """Where the stream stands against the source's binlog."""

    job: str
    offset: str  # the end of its newest committed batch
    head: str  # the source's binlog head
    lag_bytes: int
    lag_seconds: float  # since it last caught up (0 while it is caught up)
    binlog_expiry_seconds: float | None  # None: the source never purges binlogs on its own


def stream_lag(files: LakeFiles, config: Config) -> StreamLag | None:
    """Bytes of binlog the stream has not applied yet, and seconds since it last caught up;
    None before its first batch. A binlog archive's stream (`source.binlog_archive`) is
    measured against the end of the archive's newest file."""
    offset = checkpoint_offset(files, config)
    if offset is None:
        return None
    if config.source.binlog_archive is not None:  # the end of its newest file; never purged
        archive = BinlogArchive(config.source.binlog_archive)
        head, sizes, expiry = archive.head(), archive.sizes(), None
    else:
        with connection(with_resolved_password(config.source)) as conn:
            head = current_offset(conn).on(current_lineage(files, config).number)
            sizes = binlog_sizes(conn)
            expiry = expiry_seconds(conn)
    behind = bytes_behind(offset, head, sizes)
    commits = join(checkpoint_path(config), "commits")
    newest = max(batch_ids(files, commits), default=None)
    last = files.modified(join(commits, str(newest))) if newest is not None else None
    seconds = 0.0 if behind == 0 or last is None else time.time() - last
    return StreamLag(config.stream.job_name, str(offset), str(head), behind, seconds, expiry)


def wait_for_stream(files: LakeFiles, config: Config, seconds: float, poll_s: float = 2.0) -> bool:
    """Wait up to `seconds` for the stream (run by another process: a job, a terminal) to apply
    the source's binlog up to its head as of now, saying every `poll_s` how far it is; whether
    it did. Writes after now need not be applied: a verify compares what was there before it."""
    with connection(with_resolved_password(config.source)) as conn:
        head = current_offset(conn).on(current_lineage(files, config).number)
        sizes = binlog_sizes(conn)
    deadline = time.monotonic() + seconds
    while True:
        offset = checkpoint_offset(files, config)
        behind = None if offset is None else bytes_behind(offset, head, sizes)
        if behind == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        log.info(
            "waiting for the stream %s to reach %s: %s",
            config.stream.job_name, head,
            "no batch applied yet" if behind is None else f"{behind:,} binlog bytes to go",
        )  # fmt: skip
        time.sleep(poll_s)


def _silver_rows(
    config: Config, table: str, spark: Callable[[], SparkSession]
) -> tuple[int | None, int | None]:
    """Silver's exact count of live rows (soft-deleted rows and ended versions left out), and of
    an scd2 silver's versions (None for a silver of latest rows); None before silver exists.
    A path table is read by delta-rs, unless it has a table feature delta-rs lacks (type
    widening, taken when a column widened): then by Spark."""
    silver = lake_table(config.lake, "silver", *silver_name(config, table))
    history = keeps_history(config, table)
    if isinstance(silver, PathTable):
        try:
            return _count_with_delta_rs(config, table, silver.path, history)
        except TableNotFoundError:
            return None, None
        except DeltaError as exc:
            if "Unsupported table features" not in str(exc):
                raise
    session = spark()
    if not silver.exists(session):
        return None, None
    frame = silver.read(session)
    return live_rows(frame, config, table).count(), frame.count() if history else None


def _count_with_delta_rs(
    config: Config, table: str, path: str, history: bool
) -> tuple[int | None, int | None]:
    delta = DeltaTable(path)
    # An exact count: `DeltaTable.count()` sums file statistics, blind to deletion vectors.
    live = "true"
    if history:
        live = IS_CURRENT
    elif config.silver.deletes == "soft" and DELETED_COLUMN in delta.schema().to_arrow().names:
        live = f"{DELETED_COLUMN} IS NULL"
    member = member_of(config, table)
    if member is None:
        sql = f"SELECT count(*) FILTER (WHERE {live}), count(*) FROM silver"
    else:  # a route's silver, counted per member (grouped: no name is written into SQL)
        routes = ", ".join(ROUTE_COLUMNS)
        sql = (
            f"SELECT count(*) FILTER (WHERE {live}), count(*), {routes} FROM silver "
            f"GROUP BY {routes}"
        )
    counted = pa.table(QueryBuilder().register("silver", delta).execute(sql).read_all())
    own = [
        r for r in counted.to_pylist()
        if member is None or (r[SOURCE_DB], r[SOURCE_TABLE]) == (member.database, member.table)
    ]  # fmt: skip
    rows, versions = list(own[0].values())[:2] if own else (0, 0)
    return int(rows), int(versions) if history else None


@dataclass(frozen=True)
class TableStatus:
    table: str
    chunks_done: int
    chunks_total: int
    bronze_rows: int  # rows of its finished chunks
    silver_rows: int | None  # None before silver exists
    silver_versions: int | None = None  # an scd2 silver's versions (every row of it)

    @property
    def snapshot(self) -> str:
        if self.chunks_total == 0:
            return "none: captured from its CREATE"
        return "finished" if self.chunks_done == self.chunks_total else "in progress"


@dataclass(frozen=True)
class Status:
    tables: list[TableStatus]
    stream: StreamLag | None  # None before the stream's first batch
    ledger: str  # where the ledger was looked for: a mistyped lake.root shows here
    pace: SnapshotPace | None = None  # None unless a table's snapshot is in progress

    def to_json(self) -> dict[str, Any]:
        """For scripts and alerts (`binlake status --json`)."""
        tables = [{**asdict(t), "snapshot": t.snapshot} for t in self.tables]
        stream = asdict(self.stream) if self.stream else None
        pace = None
        if self.pace is not None:
            last = self.pace.last_mark
            pace = {**asdict(self.pace), "last_mark": last.isoformat() if last else None}
        return {"tables": tables, "stream": stream, "ledger": self.ledger, "snapshot": pace}


def gather_status(config: Config, spark: Callable[[], SparkSession]) -> Status:
    """The ledger's state and silver's rows per table, and the stream's lag; `spark` gives the
    session, asked for only by catalog silver tables."""
    files = ArrowFiles()
    ledger = ledger_path(config)
    chunks = read_chunks(ledger)
    progress = table_progress(chunks)
    # A table the stream took in at its CREATE has no snapshot: no chunks in the ledger.
    for table in StreamTables(tables_path(config), files).read():
        progress.setdefault(table, (0, 0, 0))
    tables = [
        TableStatus(table, done, total, rows, *_silver_rows(config, table, spark))
        for table, (done, total, rows) in sorted(progress.items())
    ]
    pace = snapshot_pace(chunks, config.snapshot.max_rows_per_second)
    return Status(tables, stream_lag(files, config), ledger, pace)


def render_status(status: Status) -> str:
    """The status as a table for a terminal."""
    lines = []
    if not status.tables:
        lines.append(
            f"no snapshot yet: no chunk in the ledger at {status.ledger} (run `binlake "
            "snapshot`, or check lake.root if a snapshot ran)"
        )
    else:
        lines.append(
            f"{'table':<32} {'chunks':>13} {'bronze rows':>12} {'silver rows':>12}  snapshot"
        )
    for t in status.tables:
        chunks = f"{t.chunks_done}/{t.chunks_total}"
        silver = "-" if t.silver_rows is None else f"{t.silver_rows:,}"
        history = "" if t.silver_versions is None else f"; {t.silver_versions:,} versions (scd2)"
        lines.append(
            f"{t.table:<32} {chunks:>13} {t.bronze_rows:>12,} {silver:>12}  {t.snapshot}{history}"
        )
    if status.pace is not None:
        lines.append(_render_pace(status.pace))
    lines.append(_render_lag(status.stream))
    return "\n".join(lines)


def _render_pace(pace: SnapshotPace) -> str:
    """A snapshot in progress: its rate between recent ledger marks, its cap, its last mark."""
    cap = (
        f"capped at {pace.cap:,} rows/s (snapshot.max_rows_per_second)"
        if pace.cap
        else "no rate cap"
    )
    if pace.last_mark is None:
        return f"snapshot in progress: no chunk marked yet; {cap}"
    rate = (
        "one batch marked lately"
        if pace.rows_per_second is None
        else f"{pace.rows_per_second:,.0f} rows/s between its marks of the last "
        f"{WINDOW.seconds // 60} min"
    )
    return (
        f"snapshot in progress: {rate}; {cap}; last chunk marked "
        f"{pace.last_mark:%Y-%m-%d %H:%M:%S} UTC"
    )


def _render_lag(lag: StreamLag | None) -> str:
    if lag is None:
        return "stream: not started"
    expiry = lag.binlog_expiry_seconds
    kept = "never purges them" if expiry is None else f"purges them after {duration(expiry)}"
    return (
        f"stream {lag.job}: at {lag.offset}, source head {lag.head}, "
        f"lag {lag.lag_bytes:,} binlog bytes, {lag.lag_seconds:.0f} s (the source {kept})"
    )
