"""A DDL met while a table's snapshot runs: bronze follows it at its offset, and the snapshot
goes on where it was.

A snapshot holds each chunk as of its high watermark (HW). A DDL at offset D splits a table's
chunks into those read before it, in the old layout, and those read after it, in the new one.
Bronze follows the DDL as the source did, at D:

1. The finished chunks are caught up to D. The binlog from their smallest HW up to D (all of it
   in the old layout: an earlier DDL was followed the same way) is replayed onto them, each
   change only where it is after its chunk's HW: the stream's high-watermark filter. Every
   finished chunk then holds its rows as of D.
2. Those rows change as the DDL changed the source's rows (`schema_changes.rows_after`: added
   columns take the source's default, renamed ones keep their values, ...), and bronze is
   rewritten with them, in the new layout, in one commit.
3. The ledger records D as each finished chunk's HW, then the schema history records the new
   layout at D. The stream starts at the smallest HW, at or after D: silver is built from bronze
   already in the new layout, and the DDL is never applied to it a second time.

A batch whose read crossed the DDL (its job failed on the new layout, or its HW is after D) is
not marked finished: it is read again once the DDL is followed. No other chunk is read twice.

A run cut short between the steps converges: the history still holds the old layout, so the
rerun meets D again; replaying the window again leaves each key at its last image, and bronze
rows already in the new layout are taken as they are.

A DDL bronze cannot follow exactly (the row key or the split column changed, a narrowing, rows
removed without row events, the table truncated or replaced) sends that table's snapshot back
to the start, by itself, in the new layout; the other tables go on. A table dropped or renamed
away stops its snapshot with an error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config.settings import Config, SourceConfig
from binlake.errors import SchemaChangeError
from binlake.lake.table_layout import before_schema_overwrite
from binlake.lake.tables import BRONZE_COLUMNS, LakeTable, column_name, local_frame
from binlake.model.changes import Row, RowChange, RowKey, apply_changes, split_key_change
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.model.typemap import map_table, spark_schema
from binlake.mysql.binlog import read_changes
from binlake.mysql.connection import connection
from binlake.mysql.schema_changes import column_changes, rows_after, unapplicable
from binlake.mysql.schema_history import SchemaChange, SchemaEntry, SchemaHistory, SchemaTracker
from binlake.mysql.schema_source import ServerSchemas
from binlake.snapshot.chunks import chunk_of
from binlake.snapshot.ledger import ChunkResult, ChunkState, replanned
from binlake.snapshot.planner import key_order
from binlake.snapshot.row_filters import holds

log = logging.getLogger(__name__)

#: Reads and commits a batch of chunks in the given layout (`snapshot.read_and_commit`).
ReadBatch = Callable[[TableSchema, list[ChunkState]], list[ChunkResult]]


class DdlWatch:
    """The DDL after each table's schema entry, for the tables one snapshot reads: one scan of
    the binlog (`ServerSchemas`, on a connection of its own) shared by the table threads."""

    def __init__(self, config: Config, source: SourceConfig, history: SchemaHistory) -> None:
        self._stack = ExitStack()
        conn = self._stack.enter_context(connection(source))
        self._server = ServerSchemas(conn, dict(config.snapshot.split_keys))
        self._capture = config.source.capture.under(self._server.names)
        self._history = history
        self._lock = threading.Lock()

    def close(self) -> None:
        self._stack.close()

    def next_change(
        self, table: str, entry: SchemaEntry, upto: BinlogOffset | None = None
    ) -> SchemaChange | None:
        """The first change a DDL after `entry` (up to `upto`, else the binlog head) makes to
        `table` ("db.name")."""
        database, name = table.split(".", 1)
        with self._lock:
            offset = entry.offset
            while (
                statement := self._server.later_change(database, name, offset, True)
            ) is not None:
                if upto is not None and statement.offset > upto:
                    return None
                tracker = SchemaTracker(self._capture, {table: entry}, self._recorded, self._server)
                at = statement.offset
                for change in tracker.on_statement(statement.statement, statement.database, at):
                    if change.table == table:
                        return change
                offset = at
        return None

    def _recorded(self, table: str, offset: BinlogOffset) -> SchemaEntry | None:
        return next((e for e in self._history.entries(table) if e.offset == offset), None)


class FollowedTable:
    """One table's chunk batches, read in the layout in force, following each DDL met."""

    def __init__(
        self,
        spark: SparkSession,
        source: SourceConfig,
        server_id: int,
        bronze: LakeTable,
        plan: list[ChunkState],
        entry: SchemaEntry,
        watch: DdlWatch,
        history: SchemaHistory,
        row_filter: str | None = None,
        ruled: bool = False,
    ) -> None:
        self.spark, self.source, self.server_id, self.bronze = spark, source, server_id, bronze
        self.row_filter = row_filter  # source.row_filters: the rows bronze keeps
        #: source.column_rules name its columns: bronze holds what they made of the rows, which
        #: the catch-up (raw binlog images) cannot rewrite, so a DDL re-reads the table instead.
        self.ruled = ruled
        self.plan = sorted(plan, key=lambda c: c.chunk_id)
        self.entry, self.watch, self.history = entry, watch, history
        self.name = self.plan[0].table
        self.finished = {
            c.chunk_id: ChunkResult(c.table, c.chunk_id, c.lw, c.hw, c.rows or 0)
            for c in self.plan
            if c.finished and c.lw is not None and c.hw is not None
        }

    @property
    def schema(self) -> TableSchema:
        assert self.entry.schema is not None
        return self.entry.schema

    def read(
        self,
        batch: list[ChunkState],
        read_batch: ReadBatch,
        mark_now: Callable[[list[ChunkResult]], None],
    ) -> list[ChunkResult]:
        """The batch read and committed in the layout in force over its reads; `mark_now`
        marks caught-up chunks in the ledger before the schema history moves on."""
        while True:
            self.follow(mark_now)
            try:
                results = read_batch(self.schema, batch)
            except Exception:
                if self.watch.next_change(self.name, self.entry) is None:
                    raise
                continue  # failed on a layout the DDL changed: read again after following it
            crossed = self.watch.next_change(self.name, self.entry, max(r.hw for r in results))
            if crossed is None:
                self.finished.update((r.chunk_id, r) for r in results)
                return results
            log.info(
                "snapshot: %s changed at %s while chunks %s were read; they are read again "
                "in the new layout",
                self.name, crossed.offset, [c.chunk_id for c in batch],
            )  # fmt: skip

    def replan(self, results: list[ChunkResult]) -> list[ChunkState]:
        """The plan rows a committed batch's reads add (`ledger.replanned`), taken into this
        table's plan: a catch-up places each key in the chunk that read it."""
        states = replanned(self.plan[0].split_column, results)
        by_id = {c.chunk_id: c for c in self.plan} | {c.chunk_id: c for c in states}
        self.plan = sorted(by_id.values(), key=lambda c: c.chunk_id)
        return states

    def follow(self, mark_now: Callable[[list[ChunkResult]], None]) -> None:
        """Every DDL on the table up to the binlog head, followed in order."""
        while (change := self.watch.next_change(self.name, self.entry)) is not None:
            if change.kind == "shadow":  # the table is as it was; its cut-over comes later
                self.entry = change.entry()
                self.history.record(self.name, self.entry)
                continue
            why = refusal(change) or (
                "its columns have rules (source.column_rules), so it is read again"
                if self.ruled
                else ""
            )
            if why:
                what = (
                    f"{self.name} changed at {change.offset} during its snapshot ({_short(change)})"
                )
                if change.after is None:
                    raise SchemaChangeError(f"{what}: {why}; nothing is left to snapshot")
                raise Resnapshot(f"{what}: {why}")
            caught_up = catch_up(self.spark, self.source, self.server_id, self.bronze, change,
                                 self.plan, self.finished, self.row_filter)  # fmt: skip
            mark_now(caught_up)
            self.finished.update((r.chunk_id, r) for r in caught_up)
            self.entry = change.entry()
            self.history.record(self.name, self.entry)
            log.info(
                "snapshot: %s followed its DDL at %s (%s): %d finished chunks caught up to it; "
                "the rest are read in the new layout",
                self.name, change.offset, _short(change),
                len(caught_up),
            )  # fmt: skip


class Resnapshot(Exception):
    """The table changed during its snapshot in a way bronze cannot follow: it is snapshotted
    again from the start, by itself."""


def _short(change: SchemaChange) -> str:
    return " ".join(change.statement.split())[:160]


def refusal(change: SchemaChange) -> str:
    """Why bronze cannot follow the change exactly ("" if it can)."""
    before, after = change.before, change.after
    if after is None:
        return "the table was dropped or renamed away"
    if change.kind not in ("alter", "swap") or before is None:
        return "rows the snapshot had read were removed or replaced without row events"
    if before.split_column.lower() != after.split_column.lower():
        return "its split column changed, which the snapshot's chunks are ranges of"
    changes = column_changes(before, after, change.statement, *change.shadow)
    return unapplicable(before, after, changes)


def catch_up(
    spark: SparkSession,
    source: SourceConfig,
    server_id: int,
    bronze: LakeTable,
    change: SchemaChange,
    plan: list[ChunkState],
    finished: dict[int, ChunkResult],
    row_filter: str | None = None,
) -> list[ChunkResult]:
    """Bronze's finished chunks brought to the DDL's offset and changed by it, in one commit;
    their ledger entries with that offset as HW (rows counted again). With a `row_filter`, the
    rows the window changed keep only those inside it."""
    before, after = change.before, change.after
    assert before is not None and after is not None
    if not bronze.exists(spark):
        return []  # nothing committed yet: the first batch creates bronze in the new layout
    at = change.offset
    statements = (change.statement, *change.shadow)
    window = _window(source, server_id, before, at, plan, finished)
    rows = (
        bronze.read(spark)
        .where(F.col("_chunk_id").isin(sorted(finished)))
        .drop("_hw_file", "_hw_pos")  # all of them are at the DDL's offset now
    )
    if window.keys:
        keys = _frame(spark, before, before.key_indexes, window.keys)
        rows = rows.join(keys, on=list(before.key), how="left_anti")
    if not _in_layout(rows, after):
        rows = rows_after(rows, before, after, *statements)
    every_column = tuple(range(len(before.columns)))
    chunk_ids = {"_chunk_id": pa.array(window.chunk_ids, pa.int32())}
    changed = _frame(spark, before, every_column, window.rows, chunk_ids)
    landed = rows.unionByName(rows_after(changed, before, after, *statements)).select(
        *[F.col(column_name(n)) for n in after.column_names],
        "_chunk_id",
        F.lit(at.file).alias("_hw_file"),
        F.lit(at.pos).cast("long").alias("_hw_pos"),
    )
    if row_filter is not None:
        landed = landed.where(holds(row_filter))
    before_schema_overwrite(spark, bronze)
    bronze.save(landed.write.format("delta").mode("overwrite").option("overwriteSchema", "true"))
    counts = {r[0]: r[1] for r in bronze.read(spark).groupBy("_chunk_id").count().collect()}
    return [
        ChunkResult(r.table, r.chunk_id, r.lw, at, counts.get(r.chunk_id, 0))
        for r in finished.values()
    ]


@dataclass(frozen=True)
class Window:
    """What the binlog changed in the finished chunks after their HWs, up to the DDL."""

    keys: list[RowKey]  # every key it touched: bronze's rows of these are replaced
    rows: list[Row]  # the rows of those keys at the DDL that a finished chunk holds
    chunk_ids: list[int]  # the chunk each of `rows` belongs to


def _window(
    source: SourceConfig,
    server_id: int,
    table: TableSchema,
    at: BinlogOffset,
    plan: list[ChunkState],
    finished: dict[int, ChunkResult],
) -> Window:
    start = min((r.hw for r in finished.values()), default=at)
    if start >= at:
        return Window([], [], [])
    changes = list(read_changes(source, server_id, [table], start, at))
    split = table.split_index
    with connection(source) as conn:
        order = key_order(conn, table)
    if order is not None:
        order.prime(i[split] for c in changes for i in (c.before, c.after) if i is not None)
    ranges = [c.range for c in plan]

    def chunk(image: Row) -> ChunkResult | None:
        index = chunk_of(ranges, image[split], order)
        return None if index is None else finished.get(plan[index].chunk_id)

    def after_its_hw(part: RowChange) -> bool:
        return any(
            (read := chunk(image)) is not None and part.position.is_after(read.hw)
            for image in (part.before, part.after)
            if image is not None
        )

    parts = [p for c in changes for p in split_key_change(c, table.key_of) if after_its_hw(p)]
    keys = list({table.key_of(i): None for p in parts for i in (p.before, p.after) if i})
    rows = list(apply_changes({}, parts, table.key_of, lambda r: chunk(r) is not None).values())
    chunk_ids = []
    for row in rows:
        read = chunk(row)
        assert read is not None, "apply_changes kept only rows of finished chunks"
        chunk_ids.append(read.chunk_id)
    return Window(keys, rows, chunk_ids)


def _in_layout(rows: DataFrame, table: TableSchema) -> bool:
    """Whether bronze rows already have `table`'s columns (a rerun after the rewrite)."""
    own = set(BRONZE_COLUMNS.fieldNames())
    data = [(f.name, f.dataType) for f in rows.schema.fields if f.name not in own]
    return data == [(f.name, f.dataType) for f in spark_schema(table).fields]


def _frame(
    spark: SparkSession,
    table: TableSchema,
    indexes: tuple[int, ...],
    rows: list[tuple[object, ...]],
    extra: dict[str, pa.Array] | None = None,
) -> DataFrame:
    """A frame of `table`'s columns `indexes`, holding `rows` (tuples of those columns' values,
    as the binlog decodes them), and the `extra` columns."""
    mappings = map_table(table)
    fields = spark_schema(table).fields
    if not rows:
        empty = [fields[i] for i in indexes]
        schema = T.StructType(empty + [T.StructField(n, T.IntegerType()) for n in extra or {}])
        return local_frame(spark, [], schema)
    arrays = [
        mappings[i].to_arrow([row[n] for row in rows], normalized=True)
        for n, i in enumerate(indexes)
    ]
    names = [table.column_names[i] for i in indexes]
    arrays += list((extra or {}).values())
    names += list(extra or {})
    return spark.createDataFrame(pa.Table.from_arrays(arrays, names=names))
