"""Tables that join the stream: a table whose snapshot has finished (added to `source.tables`, or
re-snapshotted with `--reset`) has its own changes from its chunks' high watermarks up to the
stream's position read and applied first (Flink CDC's newly-added-table protocol, without pausing
the other tables); then the job's table list records it from that offset on, so each change is
applied once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession

from binlake.config.settings import Config
from binlake.errors import BinlogResetError
from binlake.lake.event_log import event
from binlake.lake.files import LakeFiles, driver_files
from binlake.lake.paths import ledger_path
from binlake.lake.stream_tables import StreamTables
from binlake.lake.tables import local_frame
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.mysql.lost_binlog import resnapshot_remedy
from binlake.mysql.schema_history import SchemaHistory, entry_at
from binlake.silver.change_record import CHANGE_SCHEMA
from binlake.silver.merge import (
    ChangelogEnds,
    ensure_silver,
)
from binlake.snapshot.chunk_states import by_table
from binlake.snapshot.ledger import ChunkState, Ledger, snapshot_rows
from binlake.snapshot.resets import PendingResets
from binlake.stream.batch_summary import BatchSummary, batch_summary, collectable
from binlake.stream.binlog_source import BinlogRange, ChunkMarks, StreamSpec, binlog_source
from binlake.stream.side_by_side import side_by_side
from binlake.stream.table_changes import StreamWrites, apply_table_changes

log = logging.getLogger(__name__)


def join_ready_tables(
    spark: SparkSession,
    config: Config,
    spec: StreamSpec,
    tables: dict[str, TableSchema],
    position: BinlogOffset,
    ends: ChangelogEnds | None = None,
) -> list[str]:
    """Join every configured table whose snapshot finished but that the stream does not apply
    yet: their changes from their chunks' high watermarks up to `position` (or their last high
    watermark, if later) are read in one pass over the binlog and applied side by side, then
    the job's table list records them from that offset on. A crash before that record repeats
    the join, which is idempotent: silver is rebuilt from bronze, and the changelog appends only
    the changes it does not hold."""
    files = driver_files(spark)
    registry = StreamTables(spec.tables_path, files)
    pending = [t for t in tables if t not in registry.read()]
    if not pending:
        return []
    chunks = Ledger(spark, ledger_path(config)).chunks()
    resets = PendingResets(files, config)
    grouped = by_table(chunks)
    ready = [t for t in pending if _finished(grouped.get(t, [])) and not resets.pending(t)]
    if not ready:
        return []
    marks = {
        name: ChunkMarks.of(
            [c.range for c in grouped[name]],
            [c.hw for c in grouped[name] if c.hw is not None],
        )
        for name in ready
    }
    _require_same_lineage(marks, position)
    until = max(position, *(m.max_hw for m in marks.values()))
    caught_up = _catch_up(spark, files, spec, marks, until)
    history = SchemaHistory(spec.history_root, files)
    writes = StreamWrites(spark, config, history, registry, ends)

    bronze_rows = snapshot_rows(c for name in ready for c in grouped[name])

    def join(name: str) -> None:
        rows = bronze_rows.get(name)
        schema = _bronze_schema(history, name, marks[name], tables[name])
        ensure_silver(spark, config, schema, from_bronze=True, replace=True, bronze_rows=rows)
        apply_table_changes(writes.table(caught_up.frame, caught_up.summary, name))

    try:
        side_by_side(join, ready, config)
    finally:
        caught_up.frame.unpersist()
    ready = [t for t in ready if not resets.pending(t)]  # else sent back during its catch-up
    registry.update(lambda joined: {**joined, **dict.fromkeys(ready, until)})
    log.info(
        "%d table(s) joined the stream at %s, caught up from %s: %s",
        len(ready), until, min(m.min_hw for m in marks.values()), ", ".join(ready),
        extra=event("table_joined", ready, until),
    )  # fmt: skip
    return ready


def left_to_snapshot(spark: SparkSession, config: Config, tables: set[str]) -> set[str]:
    """Of `tables` (created in a batch, not applied by the stream yet), those a snapshot holds:
    planned in the ledger or awaiting a reset. They join through that snapshot's catch-up,
    which reads the DDL itself, never by a CREATE the stream meets: MySQL logs every
    `CREATE TABLE IF NOT EXISTS`, also of a table that exists, which would otherwise empty
    silver and skip the snapshot's join."""
    if not tables:
        return set()
    resets = PendingResets(driver_files(spark), config)
    planned = {c.table for c in Ledger(spark, ledger_path(config)).chunks()}
    return {t for t in tables if t in planned or resets.pending(t)}


def _require_same_lineage(marks: dict[str, ChunkMarks], position: BinlogOffset) -> None:
    """A table joins by reading the binlog from its chunks' high watermarks: coordinates in
    the binlog its snapshot read, which a replaced source (`lineage`) does not have."""
    read_before = sorted(t for t, m in marks.items() if m.min_hw.lineage < position.lineage)
    if read_before:
        raise BinlogResetError(
            f"the snapshot of {', '.join(read_before)} was read from the source the stream "
            f"has since moved away from (a failover), and had not joined the stream: its "
            f"catch-up cannot be read on this source. {resnapshot_remedy(read_before)}"
        )


def _bronze_schema(
    history: SchemaHistory, name: str, marks: ChunkMarks, configured: TableSchema
) -> TableSchema:
    """The layout bronze holds a joining table in: the one in force at its chunks' first high
    watermark (the snapshot records each DDL it follows), not the server's at the stream's
    start. DDL after it is in the catch-up, which silver then follows in order."""
    entry = entry_at(history.entries(name), marks.min_hw)
    return entry.schema if entry is not None and entry.schema is not None else configured


def _finished(own: list[ChunkState]) -> bool:
    """Whether a table's chunks (`own`) are a finished snapshot."""
    return bool(own) and all(c.finished for c in own)


@dataclass(frozen=True)
class _CaughtUp:
    frame: DataFrame
    summary: BatchSummary  # of `frame`: its counts spread a large catch-up over tasks


def _catch_up(
    spark: SparkSession,
    files: LakeFiles,
    spec: StreamSpec,
    marks: dict[str, ChunkMarks],
    until: BinlogOffset,
) -> _CaughtUp:
    """The joining tables' own changes, each in (its first high watermark, `until`] and past
    the high-watermark filter, from one pass over the binlog: read by Spark tasks like a
    micro-batch (several, if large: `StreamSpec.reads`), kept by Spark (spilled to disk if
    large) while the joins read it, never on the driver."""
    history = SchemaHistory(spec.history_root, files)
    start = min(m.min_hw for m in marks.values())
    if start >= until:
        frame = local_frame(spark, [], CHANGE_SCHEMA)
        return _CaughtUp(frame, BatchSummary({}, {}, None, []))
    entries = {name: tuple(history.entries(name)) for name in marks}
    floors = {name: m.min_hw for name, m in marks.items()}
    partition = BinlogRange(start.file, start.pos, until.file, until.pos, entries, floors)
    bounded = replace(spec, name=f"{spec.name}_join", marks=marks)
    spark.dataSource.register(binlog_source(bounded, partition))
    frame = spark.read.format(bounded.name).load().persist()
    return _CaughtUp(frame, batch_summary(frame, collectable(start, until)))
