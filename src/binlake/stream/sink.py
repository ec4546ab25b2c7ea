"""The stream's `foreachBatch` sink: each table's rows and DDL in binlog order, then the tables
that are ready to join.

Per table, the batch's DDL split its rows into segments: the rows before a DDL are applied
(changelog + MERGE, `silver.TableApply`), then silver follows the DDL (`silver_schema`) and the
schema history records it, then the rows after it. Tables are applied side by side. A table joins
the stream when its snapshot has finished (added to `source.tables`, or re-snapshotted with
`--reset`): its own changes from its chunks' high watermarks up to the stream's position are read
and applied first (Flink CDC's newly-added-table protocol, without pausing the other tables),
then the job's table list records it from that offset on, so each change is applied once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TypeVar

import pymysql
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from binlake.config.settings import Config
from binlake.errors import BinlakeError, BinlogResetError, UnfollowableChange
from binlake.lake.event_log import attach, event
from binlake.lake.files import LakeFiles, driver_files, join
from binlake.lake.paths import ledger_path
from binlake.lake.tables import TableSize, local_frame
from binlake.model.offsets import MAX_ROW, BinlogOffset, bytes_behind, position_token
from binlake.model.schema import TableSchema
from binlake.mysql.binlog import resnapshot_remedy
from binlake.mysql.retention import warn_if_purge_near
from binlake.mysql.schema_history import SchemaChange, SchemaHistory, StreamTables
from binlake.mysql.server import binlog_sizes, connection, current_offset
from binlake.runtime.spark import (
    COPY_ON_WRITE_MERGES,
    INTERPRETED_QUERIES,
    is_connect,
    session_settings,
)
from binlake.silver.change_record import CHANGE_SCHEMA, DDL, META_FIELDS
from binlake.silver.merge import (
    ChangelogEnds,
    Spread,
    TableApply,
    data_columns,
    ensure_silver,
    require_silver,
    silver_file_settings,
    silver_table,
    timed,
)
from binlake.silver.routes import group_by_silver
from binlake.silver.schema_follow import apply_schema_change
from binlake.snapshot.ledger import ChunkState, Ledger, snapshot_rows
from binlake.snapshot.task import PendingResets, send_back
from binlake.stream.binlog_source import BinlogRange, ChunkMarks, StreamSpec, binlog_source

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: How often a stream that is behind compares its oldest unapplied change with the source's
#: binlog expiry (it always does at its start).
RETENTION_CHECK_S = 300.0


class BatchSink:
    """The `foreachBatch` function of the stream query `spec.name`."""

    def __init__(
        self,
        config: Config,
        spec: StreamSpec,
        tables: list[TableSchema],
        checkpoint: str,
        files: LakeFiles,
    ) -> None:
        self.config = config
        self.spec = spec
        self.tables = {t.qualified: t for t in tables}  # the config's tables
        self.checkpoint = checkpoint
        self.files = files
        self.history = SchemaHistory(spec.history_root, files)
        self.joined = StreamTables(spec.tables_path, files)
        self.failure: BinlakeError | None = None  # what stopped the query, for a clean message
        self.ends = ChangelogEnds()  # this run's appends, the joins' included
        self.sizes = SilverSizes()  # for the choice of settings, see `settings_for`
        self._query_id: str | None = None
        self._last: tuple[int, BinlogOffset | None] | None = None  # the last batch's id and end
        self._retention_due = time.monotonic() + RETENTION_CHECK_S  # the start checked already

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if is_connect(batch.sparkSession):  # a Spark Connect server's worker, not the job's process
            attach(batch.sparkSession, self.config, self.spec.job, in_batch_worker=True)
        try:
            self._apply(batch, batch_id)
        except BinlakeError as exc:
            self.failure = exc
            raise

    def _apply(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        logged = batch_end(self.files, self.checkpoint, batch_id)
        batch = batch.persist()
        try:
            summary = batch_summary(batch, collectable(self._start_of(batch_id), logged))
            counts, ddl = summary.counts, summary.ddl
            # Skipped: a table taken out of the job (`snapshot --reset`) after this batch was
            # planned. A table the batch creates joins by its CREATE.
            joined = self.joined.read()
            created = {d.table for d in ddl if d.before is None and d.after is not None}
            names = sorted(
                t for t in {*counts, *(d.table for d in ddl)}
                if t in joined or t in created or t not in self.tables
            )  # fmt: skip
            changed = {name: counts.get(name, 0) for name in names}
            with settings_for(batch.sparkSession, self.config, self.tables, changed, self.sizes):
                steps = self._apply_tables(batch, names, summary, self._applied_before(logged))
            for name in names:
                if name in self.tables:
                    own_ddl = any(d.table == name for d in ddl)
                    self.sizes.applied(self.config, self.tables[name], counts.get(name, 0), own_ddl)
        finally:
            batch.unpersist()
        self._last = (batch_id, logged)
        end = None if logged is None else self.spec.on_source(logged)
        if end is not None:
            join_ready_tables(
                batch.sparkSession, self.config, self.spec, self.tables, end, self.ends
            )
        lag_bytes, lag_seconds = self._lag(end, summary.newest)
        if end is not None and lag_bytes and time.monotonic() >= self._retention_due:
            # The stream's binlog reader is idle while its batch is applied: its server id is
            # free for the scan.
            warn_if_purge_near(self.config, self.spec.source, end)
            self._retention_due = time.monotonic() + RETENTION_CHECK_S
        log.info(
            "batch %d applied in %.1f s: %s",
            batch_id, time.monotonic() - started,
            ", ".join(f"{t} {counts.get(t, 0)} changes {s:.1f} s" for t, s in steps) or "nothing",
            extra=event(
                "stream_batch", names, end, sum(counts.values()), time.monotonic() - started,
                lag_bytes, lag_seconds, (self._events_id(), batch_id),
            ),
        )  # fmt: skip

    def _start_of(self, batch_id: int) -> BinlogOffset | None:
        """Where micro-batch `batch_id` starts: the end of the batch before it (this run's last,
        or read from the offset log); None for the query's first."""
        if self._last is not None and self._last[0] == batch_id - 1:
            return self._last[1]
        return batch_end(self.files, self.checkpoint, batch_id - 1) if batch_id > 0 else None

    def _lag(self, end: BinlogOffset | None, newest: int | None) -> tuple[int | None, float | None]:
        """How far the source's binlog head is past the batch's end, in bytes, and in seconds
        since the batch's newest change was committed (0 once caught up); None if unknown."""
        if end is None:
            return None, None
        try:
            with connection(self.spec.source) as conn:
                head = current_offset(conn).on(end.lineage)
                behind = bytes_behind(end, head, binlog_sizes(conn))
        except (BinlakeError, pymysql.MySQLError) as exc:
            log.debug("batch lag unknown: %s", exc)
            return None, None
        if behind == 0 or newest is None:
            return behind, 0.0
        return behind, max(time.time() - newest, 0.0)

    def _events_id(self) -> str:
        """The id of this query's event appends: its checkpoint's own id, so a job started anew
        under the same name (batch ids from 0 again) is not taken for a replay."""
        if self._query_id is None:
            text = self.files.read_text(join(self.checkpoint, "metadata")) or "{}"
            self._query_id = str(json.loads(text).get("id", self.spec.job))
        return f"binlake-stream-{self._query_id}"

    def _applied_before(self, logged: BinlogOffset | None) -> tuple[str, str] | None:
        """The offset tokens this batch's changes had when it was planned on a source replaced
        since (`StreamSpec.replayed`): what it applied then is not applied again."""
        replayed = self.spec.replayed
        if replayed is None or logged != replayed[1]:
            return None
        return position_token(replayed[0], 0), position_token(replayed[1], MAX_ROW)

    def _apply_tables(
        self,
        batch: DataFrame,
        names: list[str],
        summary: BatchSummary,
        applied_before: tuple[str, str] | None,
    ) -> list[tuple[str, float]]:
        def one(name: str) -> tuple[str, float]:
            own = [d for d in summary.ddl if d.table == name]
            _, seconds = timed(
                apply_table_changes, batch.sparkSession, self.config, self.history, self.joined,
                batch, name, own, applied_before, self.ends, summary.spread(name),
                summary.records_of(name),
            )  # fmt: skip
            return name, seconds

        return side_by_side(one, names, self.config)


def apply_table_changes(
    spark: SparkSession,
    config: Config,
    history: SchemaHistory,
    joined: StreamTables,
    batch: DataFrame,
    name: str,
    ddl: list[SchemaChange],
    applied_before: tuple[str, str] | None = None,
    ends: ChangelogEnds | None = None,
    spread: Spread | None = None,
    records: list[Row] | None = None,
) -> None:
    """One table's rows and DDL of `batch`, segment by segment in binlog order
    (`applied_before`, `ends`, `spread`, `records`: the table's row changes in `batch`, see
    `TableApply`)."""
    rows = batch.where((F.col("_table") == name) & (F.col("_op") != DDL))
    bounds = [d.offset for d in ddl]
    for index, (low, high) in enumerate(zip([None, *bounds], [*bounds, None], strict=True)):
        segment, own = rows, records
        if low is not None:
            segment = segment.where(F.col("_offset") > position_token(low, 0))
            own = own and [r for r in own if r["_offset"] > position_token(low, 0)]
        if high is not None:
            segment = segment.where(F.col("_offset") < position_token(high, 0))
            own = own and [r for r in own if r["_offset"] < position_token(high, 0)]
        schema = _segment_schema(history, name, ddl, index)
        if schema is not None:
            columns = data_columns(spark, silver_table(config, schema), config, schema.qualified)
            if columns is None:
                require_silver(spark, config, schema)
            else:
                apply = TableApply(config, schema, columns, applied_before, ends, spread, own)
                apply(segment)
        if index < len(ddl) and not _apply_ddl(spark, config, history, joined, ddl[index]):
            return  # the table went back to its snapshot, which holds its later rows


def _segment_schema(
    history: SchemaHistory, name: str, ddl: list[SchemaChange], index: int
) -> TableSchema | None:
    """The table's schema between its DDL `index - 1` and `index` of the batch."""
    if index > 0:
        return ddl[index - 1].after
    if ddl and ddl[0].before is not None:
        return ddl[0].before
    # No DDL, or the first brings in another table under the name (CREATE OR REPLACE, a table
    # renamed onto it): the rows before it are the old table's, in the schema in force then.
    earlier = [e for e in history.entries(name) if not ddl or e.offset < ddl[0].offset]
    return next((e.schema for e in reversed(earlier) if e.schema), None)


def _apply_ddl(
    spark: SparkSession,
    config: Config,
    history: SchemaHistory,
    joined: StreamTables,
    change: SchemaChange,
) -> bool:
    """Silver and the schema history follow `change`; False if silver cannot and the table was
    sent back to its snapshot (`stream.on_unfollowable_ddl: resnapshot`)."""
    try:
        apply_schema_change(spark, config, change)
    except UnfollowableChange:
        if config.stream.on_unfollowable_ddl == "stop":
            raise
        send_back(driver_files(spark), config, change.table)
        log.warning(
            "%s changed %s in a way silver cannot follow from the binlog: the table is "
            "snapshotted again by itself and then rejoins the stream; the other tables go on",
            change.table, change.where(),
            extra=event("table_sent_back", [change.table], change.offset),
        )  # fmt: skip
        return False
    if change.kind != "truncate":
        history.record(change.table, change.entry())
    if change.before is None and change.after is not None:
        joined.update(lambda tables: {change.table: change.offset, **tables})
    log.info(
        "%s: silver follows the %s %s", change.table, change.kind, change.where(),
        extra=event("ddl_applied", [change.table], change.offset),
    )  # fmt: skip
    return True


@dataclass(frozen=True)
class BatchSummary:
    counts: dict[str, int]  # each table's row changes
    #: The most of a table's row changes one of the batch's partitions (its reads) holds.
    most_in_a_read: dict[str, int]
    newest: int | None  # the newest change's commit time
    ddl: list[SchemaChange]  # in binlog order: each table's segments are cut at them
    #: Each table's row change records, for a batch collected whole (`SMALL_BATCH_RECORDS`),
    #: a table with none included; None: not collected.
    records: dict[str, list[Row]] | None = None

    def spread(self, table: str) -> Spread | None:
        if table not in self.counts:
            return None
        return Spread(self.counts[table], self.most_in_a_read[table])

    def records_of(self, table: str) -> list[Row] | None:
        """`table`'s row change records, if the batch was collected and none of their images
        was left out for its length (`IMAGE_BYTES`)."""
        if self.records is None:
            return None
        own = self.records.get(table, [])
        return None if any(r["_long"] for r in own) else own


#: A batch of at most this many change records is collected whole by its summary's one Spark job
#: (no shuffle), and each table's segments are summarised from the records (`TableApply`)
#: instead of by a Spark job each: a small batch's latency is mostly such fixed costs.
SMALL_BATCH_RECORDS = 1000
#: ...where its binlog range holds at most this many bytes (`collectable`): a larger batch is
#: summarised by Spark at once, without first collecting a part of each of its reads (~0.4 s
#: of a 200k-change batch). 1,000 single-row updates of an 18-column table take ~0.5 MiB.
SMALL_BATCH_BYTES = 2**20
#: An image longer than this (a TEXT or BLOB value) is left out of the collected records, so a
#: small batch of wide rows stays small on the driver; its table is summarised by Spark.
IMAGE_BYTES = 4096


def collectable(start: BinlogOffset | None, end: BinlogOffset | None) -> bool:
    """Whether a batch of the binlog range `(start, end]` may be small enough to collect
    (`SMALL_BATCH_BYTES`): within one binlog file, where its bytes are a subtraction."""
    if start is None or end is None or start.file != end.file:
        return False
    return end.pos - start.pos <= SMALL_BATCH_BYTES


def batch_summary(batch: DataFrame, collect: bool = False) -> BatchSummary:
    """The batch's counts, newest commit time and DDL from one Spark job: a batch of a few
    changes costs a few small jobs in all, and each is a fixed cost of its latency. With
    `collect` (a small binlog range: `collectable`), a batch of at most `SMALL_BATCH_RECORDS`
    is collected, and its records summarised on the driver."""
    collected = _small_batch(batch) if collect else None
    if collected is not None:
        return _summary_of(collected)
    ddl_fields = ["_table", "_file", "_pos", "_before", "_after", "_ts"]
    is_ddl = F.col("_op") == DDL
    summary = (
        batch.groupBy("_table", F.spark_partition_id().alias("read"))
        .agg(
            F.count_if(~is_ddl).alias("n"),
            F.max("_ts").alias("ts"),
            F.collect_list(F.when(is_ddl, F.struct(*ddl_fields))).alias("ddl"),
        )
        .collect()
    )
    counts: dict[str, int] = {}
    most: dict[str, int] = {}
    for r in summary:
        if r["n"]:
            counts[r["_table"]] = counts.get(r["_table"], 0) + r["n"]
            most[r["_table"]] = max(most.get(r["_table"], 0), r["n"])
    newest = max((r["ts"] for r in summary), default=None)
    ddl = _in_binlog_order([d for r in summary for d in r["ddl"]])
    return BatchSummary(counts, most, newest, ddl)


def _small_batch(batch: DataFrame) -> list[Row] | None:
    """The batch's records with the partition (read) of each, if it holds at most
    `SMALL_BATCH_RECORDS`: images longer than `IMAGE_BYTES` as NULL and `_long` set (a DDL's
    whole), so a batch of a few wide rows does not fill the driver.

    Each partition sends at most one record past the bound, all partitions at once: a `limit`
    would read the first partition alone and then the others, and a large batch's reads would
    no longer run side by side."""
    is_ddl = F.col("_op") == DDL
    images = [
        F.when(is_ddl | (F.length(image) <= IMAGE_BYTES), F.col(image)).alias(image)
        for image in ("_before", "_after")
    ]
    long = ~is_ddl & ((F.length("_before") > IMAGE_BYTES) | (F.length("_after") > IMAGE_BYTES))
    read = F.spark_partition_id()
    index_in_read = F.monotonically_increasing_id() - read.cast("long") * 2**33
    rows = (
        batch.select(
            *(f.name for f in META_FIELDS), *images,
            F.coalesce(long, F.lit(False)).alias("_long"), read.alias("_read"),
        )
        .where(index_in_read <= SMALL_BATCH_RECORDS)
        .collect()
    )  # fmt: skip
    return rows if len(rows) <= SMALL_BATCH_RECORDS else None


def _summary_of(records: list[Row]) -> BatchSummary:
    """`batch_summary` of a batch's collected records (`_small_batch`)."""
    changes = [r for r in records if r["_op"] != DDL]
    per_read = Counter((r["_table"], r["_read"]) for r in changes)
    counts = dict(Counter(r["_table"] for r in changes))
    most: dict[str, int] = {}
    for (table, _), n in per_read.items():
        most[table] = max(most.get(table, 0), n)
    newest = max((r["_ts"] for r in records), default=None)
    ddl = _in_binlog_order([r for r in records if r["_op"] == DDL])
    own: dict[str, list[Row]] = {}
    for r in changes:
        own.setdefault(r["_table"], []).append(r)
    return BatchSummary(counts, most, newest, ddl, own)


def _in_binlog_order(rows: list[Row]) -> list[SchemaChange]:
    return sorted((_ddl_record(r) for r in rows), key=lambda d: d.offset)


def _ddl_record(row: Row) -> SchemaChange:
    before = json.loads(row["_before"])
    after = json.loads(row["_after"]) if row["_after"] else None
    return SchemaChange(
        table=row["_table"],
        offset=BinlogOffset(row["_file"], row["_pos"]),
        statement=before["statement"],
        kind=before["kind"],
        before=TableSchema.from_json(before["schema"]) if before["schema"] else None,
        after=TableSchema.from_json(after) if after else None,
        shadow=tuple(before.get("shadow", ())),
        ts=float(row["_ts"]),
    )


def batch_end(files: LakeFiles, checkpoint: str, batch_id: int) -> BinlogOffset | None:
    """The end offset of micro-batch `batch_id`, from the query's offset log (written before
    the batch runs)."""
    logged = files.read_text(join(checkpoint, "offsets", str(batch_id)))
    if logged is None:
        return None
    return BinlogOffset.from_dict(json.loads(logged.strip().splitlines()[-1]))


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
    ready = [t for t in pending if _finished(chunks, t) and not resets.pending(t)]
    if not ready:
        return []
    marks = {
        name: ChunkMarks.of(
            [c.range for c in chunks if c.table == name],
            [c.hw for c in chunks if c.table == name and c.hw is not None],
        )
        for name in ready
    }
    _require_same_lineage(marks, position)
    until = max(position, *(m.max_hw for m in marks.values()))
    caught_up = _catch_up(spark, files, spec, marks, until)
    history = SchemaHistory(spec.history_root, files)

    def join(name: str) -> None:
        rows = snapshot_rows(chunks, name)
        ensure_silver(spark, config, tables[name], from_bronze=True, replace=True, bronze_rows=rows)
        own = [d for d in caught_up.summary.ddl if d.table == name]
        apply_table_changes(
            spark, config, history, registry, caught_up.frame, name, own, ends=ends,
            spread=caught_up.summary.spread(name), records=caught_up.summary.records_of(name),
        )  # fmt: skip

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


def _finished(chunks: list[ChunkState], table: str) -> bool:
    own = [c for c in chunks if c.table == table]
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


#: Tables applied at once: each is a few small Spark jobs and Delta commits, mostly waiting on
#: the JVM's driver-side work, so more threads than cores keep the cores busy.
APPLY_THREADS = 8


#: A batch whose tables' silver tables hold at most this many bytes of files together is applied
#: with interpreted queries (`spark.INTERPRETED_QUERIES`): compiling the code of a small batch's
#: new plans costs more than the work on so few rows, and what interpreted code costs grows with
#: the rows a query reads, not with the batch's changes. Batches of one or two keys into the
#: bench's silver, alternated (`BENCH_ONLY=small_merges`, 2026-12-04): 1,000 rows (49 KB),
#: 3.08 s compiled, 2.76 s interpreted; 200,000 rows (6 MB): 2.89 s either way, the break-even.
#: Below that, with room: a table's rows differ in width.
SMALL_SILVER_BYTES = 4 * 2**20

#: A batch whose MERGEs rewrite about this many bytes of silver files at most
#: (`TableSize.rewritten`) rewrites the files it touches (`spark.COPY_ON_WRITE_MERGES`) instead
#: of writing deletion vectors, whose own steps cost more than rewriting a few MB. Batches
#: alternated (`BENCH_ONLY=small_merges`): one or two keys into a 1,000-row silver, 2.14 s with
#: vectors, 1.59 s rewriting; into 200,000 rows (6 MB), 2.69 s and 2.44 s (2026-12-04). Into
#: 1,000,000 rows in 22 files of 1.4 MB (2026-12-05): two or four keys (at most 5.5 MB
#: rewritten), 2.32 s and 2.08 s; eight or twelve (16 MB), 2.68 s and 2.71 s, the break-even.
REWRITE_BYTES = 8 * 2**20


#: How long a silver table's size read from Delta is taken as known (`SilverSizes`)...
SIZE_KNOWN_S = 300.0
#: ...and how many of its changes may be applied after the read before it is read again.
SIZE_KNOWN_CHANGES = 1000


class SilverSizes:
    """Each silver table's files as Delta last reported them (`LakeTable.size`), kept for one
    run of the stream: read again once `SIZE_KNOWN_S` have passed or more than
    `SIZE_KNOWN_CHANGES` of its changes (or a DDL) were applied since, so a table that grows
    past `SMALL_SILVER_BYTES` is seen within a few batches. Only the choice of settings
    reads them, which a stale size makes slower, never wrong; a stream of small batches is
    spared the read on each (about 0.05 s)."""

    def __init__(self) -> None:
        #: table: its size, when it was read, the changes applied since
        self._known: dict[str, tuple[TableSize | None, float, int]] = {}

    def of(self, spark: SparkSession, config: Config, table: TableSchema) -> TableSize | None:
        """The files of `table`'s silver; None if it has none yet."""
        silver = silver_table(config, table)
        size, read_at, changes = self._known.get(silver.sql, (None, 0.0, 0))
        stale = changes > SIZE_KNOWN_CHANGES or time.monotonic() - read_at > SIZE_KNOWN_S
        if size is None or stale:
            size = silver.size(spark)
            self._known[silver.sql] = (size, time.monotonic(), 0)
        return size

    def applied(self, config: Config, table: TableSchema, changes: int, ddl: bool) -> None:
        """`changes` of `table` were applied to its silver (and a DDL, if `ddl`)."""
        key = silver_table(config, table).sql
        if key in self._known:
            size, read_at, before = self._known[key]
            if ddl:
                del self._known[key]
            else:
                self._known[key] = (size, read_at, before + changes)


@contextlib.contextmanager
def settings_for(
    spark: SparkSession,
    config: Config,
    tables: dict[str, TableSchema],
    changes: dict[str, int],
    sizes: SilverSizes | None = None,
) -> Iterator[None]:
    """The settings a batch of `changes` (each table's row changes; a table of DDL alone with
    none) is applied with, where each silver table it touches exists (`silver_sizes`):
    interpreted queries where they hold `SMALL_SILVER_BYTES` at most together, MERGEs that
    rewrite the files they touch, in files of `SILVER_FILE_ROWS` rows at most, where they
    rewrite `REWRITE_BYTES` at most; each group kept or refused whole by the compute
    (`session_settings`); else the session's own."""
    with contextlib.ExitStack() as settings:
        found = silver_sizes(spark, config, tables, changes, sizes)
        if found:
            if sum(size.bytes for size, _ in found) <= SMALL_SILVER_BYTES:
                settings.enter_context(session_settings(spark, INTERPRETED_QUERIES))
            if sum(size.rewritten(n) for size, n in found) <= REWRITE_BYTES:
                rewrites = {**COPY_ON_WRITE_MERGES, **silver_file_settings()}
                settings.enter_context(session_settings(spark, rewrites))
        yield


def silver_sizes(
    spark: SparkSession,
    config: Config,
    tables: dict[str, TableSchema],
    changes: dict[str, int],
    sizes: SilverSizes | None = None,
) -> list[tuple[TableSize, int]] | None:
    """The size of each silver table of `changes`'s tables (Delta's own, read side by side, or
    known to `sizes`) and the row changes a batch of `changes` applies to it (a route's members
    together); None if one of them has no silver yet."""
    groups = group_by_silver(config, list(changes))
    if not groups or any(group[0] not in tables for group in groups):
        return None
    known_sizes = sizes if sizes is not None else SilverSizes()

    def size(group: list[str]) -> TableSize | None:
        return known_sizes.of(spark, config, tables[group[0]])

    with ThreadPoolExecutor(max_workers=min(len(groups), APPLY_THREADS)) as pool:
        found = list(pool.map(size, groups))
    if any(s is None for s in found):
        return None
    return [
        (size, sum(changes.get(name, 0) for name in group))
        for size, group in zip(found, groups, strict=True)
        if size is not None
    ]


def side_by_side(step: Callable[[str], _T], names: list[str], config: Config) -> list[_T]:
    """`step` of each table ("db.table"), up to `APPLY_THREADS` at once, but one after another
    for the tables of one silver (a route's members: two writes into one Delta table
    conflict); the first failure is raised."""

    def in_turn(group: list[str]) -> list[_T]:
        return [step(name) for name in group]

    groups = group_by_silver(config, names)
    with ThreadPoolExecutor(max_workers=max(min(len(groups), APPLY_THREADS), 1)) as pool:
        return [done for group in pool.map(in_turn, groups) for done in group]
