"""The binlog as a Spark Structured Streaming source (PySpark's Python data source API).

The stream's offset is the binlog offset `{"file", "pos"}`, always on a transaction boundary
(`SHOW MASTER STATUS`), so Spark's checkpoint is where a restart resumes and a micro-batch never
splits a transaction. Each micro-batch `(start, end]` is read by one task, or a large one by
several, each from a transaction start (`StreamSpec.reads`); a read decodes every row with the
schema in force at its position (`schema_history`) and applies the high-watermark filter before
anything leaves Python: changes a chunk already holds are dropped, key-changing updates are split
into delete + insert and each side is judged by its own chunk.

Rows are `change_record`s: one fixed schema whatever the tables, the images as JSON that the sink
types against silver, DDL in the same order as the rows around it.

The source class is built per job by `binlog_source(spec)`; the spec (config, chunk watermarks)
travels with the pickled class, never as string options visible in query plans. Which tables a
batch captures, and with which schemas, is planned per batch from the schema history and the
job's table list (`partitions`), which the sink updates between batches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice, pairwise
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema

try:  # Spark 4.2+: read limits and Trigger.AvailableNow for Python sources (SPARK-55304)
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # Spark 4.0 and 4.1 (the LTS runtimes): `latestOffset()` is called bare
    ReadAllAvailable = ReadLimit = ReadMaxBytes = SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

from binlake.config.settings import SourceConfig
from binlake.errors import SourceError, SourceReplacedError
from binlake.lake.files import ArrowFiles
from binlake.lake.stream_tables import StreamTables
from binlake.model.changes import Row, RowChange, split_key_change
from binlake.model.offsets import BinlogOffset, position_token
from binlake.model.schema import TableSchema
from binlake.mysql.batch_ranges import BatchBudget, bounded_end, read_splits, settled_end
from binlake.mysql.binlog import follow_changes
from binlake.mysql.binlog_archive import BinlogArchive
from binlake.mysql.column_rules import lake_view, projection
from binlake.mysql.commit_times import commit_times_at
from binlake.mysql.connection import connection
from binlake.mysql.ddl import short_statement
from binlake.mysql.gtids import gtid_head, server_identity
from binlake.mysql.lost_binlog import binlog_behind
from binlake.mysql.schema_history import (
    SchemaChange,
    SchemaEntry,
    SchemaHistory,
    SchemaTracker,
)
from binlake.mysql.schema_source import ServerSchemas
from binlake.silver.change_record import CHANGE_SCHEMA, DDL, ImageEncoder
from binlake.snapshot.chunks import ChunkRange, SortKey, decode_key, encode_key
from binlake.snapshot.planner import key_order
from binlake.snapshot.watermarks import TableWatermarks, WatermarkFilter

_FILTER_BLOCK = 8192  # changes per collation-weight round trip and per Arrow batch
#: Row-image bytes per Arrow batch, at most (one row may exceed it alone).
ARROW_BATCH_BYTES = 32 << 20


@dataclass(frozen=True)
class ChunkMarks:
    """A table's finished chunks in picklable form: encoded ranges and (file, pos) HWs."""

    ranges: tuple[tuple[str | None, str | None], ...]
    high_watermarks: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, ranges: Sequence[ChunkRange], hws: Sequence[BinlogOffset]) -> ChunkMarks:
        return cls(
            tuple((encode_key(r.start), encode_key(r.end)) for r in ranges),
            tuple((h.file, h.pos) for h in hws),
        )

    @property
    def max_hw(self) -> BinlogOffset:
        return max(BinlogOffset(f, p) for f, p in self.high_watermarks)

    @property
    def min_hw(self) -> BinlogOffset:
        return min(BinlogOffset(f, p) for f, p in self.high_watermarks)

    def watermarks(self, order: SortKey | None) -> TableWatermarks:
        return TableWatermarks(
            tuple(ChunkRange(decode_key(s), decode_key(e)) for s, e in self.ranges),
            tuple(BinlogOffset(f, p) for f, p in self.high_watermarks),
            order,
        )


@dataclass(frozen=True)
class StreamSpec:
    """Everything a stream reader needs; pickled with the source class into Spark's workers."""

    name: str
    job: str  # stream.job_name
    source: SourceConfig
    server_id: int
    split_keys: dict[str, str]
    start: BinlogOffset
    history_root: str  # `SchemaHistory` of the lake
    tables_path: str  # `StreamTables` of the job
    marks: dict[str, ChunkMarks] = field(default_factory=dict)
    stop: BinlogOffset | None = None  # a bounded stream (a joining table's catch-up) ends here
    max_bytes: int | None = None  # stream.max_bytes_per_batch
    max_changes: int | None = None  # stream.max_changes_per_batch
    server: int | None = None  # the source's server_id when the query started
    #: The checkpoint's offsets on a replaced source's binlog and where `lineage.locate` found
    #: them on the new one: Spark hands the reader the former, the reader reads the latter.
    rebase: tuple[tuple[BinlogOffset, BinlogOffset], ...] = ()
    #: The range, on the replaced source, of a batch planned there and not committed: Spark
    #: replays it first, read on the new source, and what it applied then is not applied again.
    replayed: tuple[BinlogOffset, BinlogOffset] | None = None
    #: The server ids of one batch's reads (`Config.stream_read_ids`): a batch of several
    #: times `bytes_per_read` binlog bytes is read by up to one task per id (`reads`).
    read_ids: tuple[int, ...] = ()
    bytes_per_read: int = 4 * 2**20  # stream.bytes_per_read_task
    #: `source.binlog_archive`: the folder of binlog files read instead of the server.
    archive: str | None = None

    def offset(self, data: dict[str, Any]) -> BinlogOffset:
        """An offset Spark hands the reader, on the source as it is now."""
        return self.on_source(BinlogOffset.from_dict(data))

    def on_source(self, offset: BinlogOffset) -> BinlogOffset:
        """A checkpoint offset on the source as it is now (see `rebase`)."""
        return next((new for old, new in self.rebase if old == offset), offset)

    def check_server(self, conn: Any) -> None:
        """Stop a batch whose source was replaced under the running query (a failover to a
        replica at the same address): its binlog coordinates are not the query's."""
        if self.server is not None and (found := server_identity(conn)) != self.server:
            raise SourceReplacedError(
                f"the source at {self.source.host}:{self.source.port} is server_id {found} now, "
                f"not {self.server} as when the stream started: the stream starts again and "
                "finds its position on the new server by GTID"
            )

    def budget(self, max_bytes: int | None) -> BatchBudget:
        """What one batch may read: `max_bytes` (Spark's read limit, or the spec's on Spark
        4.0/4.1) and the spec's change bound (Spark passes a single read limit)."""
        return BatchBudget(self.source.capture, max_bytes, self.max_changes)

    def plan(self, start: BinlogOffset, end: BinlogOffset, since: int = 0) -> BinlogRange:
        """The read of `(start, end]`: the job's tables with their schema histories, the
        floor at or below which each table's rows are already applied, and the commit time
        reached at `start` (`since`, `commit_times`).

        Spark runs this in a Python process of its own, without a JVM: the files are read
        with `ArrowFiles`, every joined table's history before every batch, so they are read
        `FILE_THREADS` at once (`SchemaHistory.entries_of`): each is a listing and a read, and on
        a `/Volumes` mount or an object store a call takes milliseconds to tens of them."""
        files = ArrowFiles()
        history = SchemaHistory(self.history_root, files)
        joined = StreamTables(self.tables_path, files).read()
        entries = {t: tuple(found) for t, found in history.entries_of(joined).items()}
        floors = {t: since for t, since in joined.items() if since is not None}
        for table, marks in self.marks.items():
            floors[table] = max(floors.get(table, marks.min_hw), marks.min_hw)
        return BinlogRange(start.file, start.pos, end.file, end.pos, entries, floors, since=since)

    def reads(self, whole: BinlogRange) -> list[BinlogRange]:
        """`whole` (a micro-batch, a joining table's catch-up) as the reads Spark runs side by
        side: cut between transactions into reads of at least `bytes_per_read` bytes
        (`batch_ranges.read_splits`), one per server id of `read_ids` at most, or read whole. The
        reads together yield the changes the whole read would, with the same offsets: a
        change's offset is its own row event's, wherever a read starts, and its commit time
        too: each read starts from the commit time reached at its start (`commit_times_at`)."""
        if len(self.read_ids) < 2:
            return [whole]
        start, end = whole.start, whole.end
        cuts = read_splits(
            self.source, self.server_id, start, end, len(self.read_ids), self.bytes_per_read
        )
        bounds = [start, *cuts, end]
        since = [whole.since]
        if cuts:
            since += commit_times_at(self.source, self.server_id, start, whole.since, cuts)
        return [
            whole.between(low, high, server_id, reached)
            for (low, high), server_id, reached in zip(
                pairwise(bounds), self.read_ids, since, strict=False
            )
        ]


@dataclass(frozen=True)
class BinlogRange(InputPartition):
    start_file: str
    start_pos: int
    end_file: str
    end_pos: int
    entries: dict[str, tuple[SchemaEntry, ...]] = field(default_factory=dict)
    floors: dict[str, BinlogOffset] = field(default_factory=dict)
    #: The replica id this read connects with (None: the stream's own): reads of one batch
    #: run at once, and the source evicts a replica connection when another takes its id.
    server_id: int | None = None
    #: The commit time reached at `start` (`commit_times`): no change read is stamped earlier.
    since: int = 0

    @property
    def start(self) -> BinlogOffset:
        return BinlogOffset(self.start_file, self.start_pos)

    @property
    def end(self) -> BinlogOffset:
        return BinlogOffset(self.end_file, self.end_pos)

    def between(
        self, start: BinlogOffset, end: BinlogOffset, server_id: int, since: int
    ) -> BinlogRange:
        """The part `(start, end]` of this read, by replica id `server_id`, from the commit
        time `since` reached at `start`."""
        return replace(
            self, start_file=start.file, start_pos=start.pos, end_file=end.file,
            end_pos=end.pos, server_id=server_id, since=since,
        )  # fmt: skip

    def in_force(self) -> dict[str, SchemaEntry]:
        """Each table's entry in force at the range's start (see `SchemaHistory.at`)."""
        result: dict[str, SchemaEntry] = {}
        for table, entries in self.entries.items():
            before = [e for e in entries if e.offset <= self.start]
            if entries:
                result[table] = before[-1] if before else entries[0]
        return result

    def recorded(self, table: str, offset: BinlogOffset) -> SchemaEntry | None:
        return next((e for e in self.entries.get(table, ()) if e.offset == offset), None)


class BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The binlog from `spec.start`, one micro-batch per `(start, end]` range of it.

    Spark 4.2 passes each batch's start and read limit to `latestOffset`; Spark 4.0 and 4.1
    call it bare, so the reader keeps where the last batch ended itself (`position`: the
    job's checkpoint offset at first, then each planned batch's end) and applies
    `stream.max_bytes_per_batch` on its own. Both bound a batch the same way, and both take
    `stream.max_changes_per_batch` from the spec.

    An offset also holds the commit time reached there (`COMMIT_TIME`), found from the GTID
    events' headers of the batch it ends: the next batch's reads start from it, so no change
    is stamped earlier than one before it, across batches and restarts (the checkpoint holds
    it). On Spark 4.0 and 4.1 a restarted query's first batch ends with its own range's."""

    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        #: `source.binlog_archive`'s files, listed for each trigger's head and batch end.
        self.archive = BinlogArchive(spec.archive) if spec.archive is not None else None
        self.target: BinlogOffset | None = None
        self.position, self.since = spec.start, 0

    def initialOffset(self) -> dict[str, Any]:
        return self.spec.start.to_dict()

    def _head(self) -> BinlogOffset:
        """The binlog head with its GTID position, on the query's lineage (an archive's: the
        end of its newest file)."""
        if self.archive is not None:
            return self.archive.head()
        with connection(self.spec.source) as conn:
            self.spec.check_server(conn)
            return gtid_head(conn).on(self.spec.start.lineage)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._head()

    def getDefaultReadLimit(self) -> ReadLimit:
        """`stream.max_bytes_per_batch`: Spark passes it to `latestOffset` for every trigger,
        AvailableNow included (each of its batches then stays within it)."""
        if self.spec.max_bytes is None:
            return ReadAllAvailable()
        return ReadMaxBytes(self.spec.max_bytes)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        if start is None:  # Spark 4.0/4.1
            position, since, max_bytes = self.position, self.since, self.spec.max_bytes
        else:
            position, since = self.spec.offset(start), commit_time(start)
            max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        head = self.target or self._head()
        if head < position:
            tables = sorted(StreamTables(self.spec.tables_path, ArrowFiles()).read())
            raise binlog_behind(self.spec.source, position, head, tables, self.spec.job)
        if self.spec.stop is not None:
            head = min(head, self.spec.stop)
        if head <= position:
            return stream_offset(position, since)
        if self.archive is not None:  # a file per batch: files end between transactions
            return stream_offset(min(head, self.archive.next_end(position)), 0)
        budget = self.spec.budget(max_bytes)
        if budget.max_bytes is not None or budget.max_changes is not None:
            head = bounded_end(self.spec.source, self.spec.server_id, position, head, budget)
        # Never between an XA transaction's prepare and its commit (`settled_end`).
        source = self.spec.source
        head = settled_end(source, self.spec.server_id, position, head, source.capture)
        if head <= position:
            return stream_offset(position, since)
        (reached,) = commit_times_at(self.spec.source, self.spec.server_id, position, since, [head])
        return stream_offset(head, reached)

    def reportLatestOffset(self) -> dict[str, Any]:
        """The binlog head, for each batch's progress (`sources[].latestOffset`): how far the
        source is ahead of the batch's end, which Databricks shows as the stream's backlog."""
        return self._head().to_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = self.spec.offset(start), self.spec.offset(end)
        if last >= self.position:
            self.position, self.since = last, commit_time(end)
        if last <= first:
            return []
        return self.spec.reads(self.spec.plan(first, last, commit_time(start)))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BinlogRange)
        yield from read_range(self.spec, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the binlog is re-readable until the source purges it."""


#: The key of a stream offset holding the commit time reached there (epoch seconds).
COMMIT_TIME = "commit_ts"


def stream_offset(offset: BinlogOffset, since: int) -> dict[str, Any]:
    """The stream's offset at `offset`, where the commit time reached is `since` (0: unknown,
    left out, as in offsets written before commit times were kept)."""
    return {**offset.to_dict(), COMMIT_TIME: since} if since else offset.to_dict()


def commit_time(data: dict[str, Any]) -> int:
    """The commit time reached at a stream offset Spark hands the reader (0: unknown)."""
    return int(data.get(COMMIT_TIME, 0))


def read_range(spec: StreamSpec, partition: BinlogRange) -> Iterator[pa.RecordBatch]:
    """The changes of `(start, end]` to apply, as Arrow batches in the change record's schema."""
    if spec.archive is not None:
        yield from _read_archive(spec, spec.archive, partition)
        return
    with connection(spec.source) as conn:
        spec.check_server(conn)
        server = ServerSchemas(conn, spec.split_keys)
        tracker = SchemaTracker(
            spec.source.capture.under(server.names),
            partition.in_force(),
            partition.recorded,
            server,
        )
        events = follow_changes(
            spec.source, partition.server_id or spec.server_id, tracker, partition.start,
            partition.end, partition.floors, partition.since,
        )  # fmt: skip
        batches = ChangeBatches(spec.source)
        for block in _filtered_blocks(conn, spec, events):
            yield from batches.of(block)
        # A source replaced while the range was read (a read reconnected to another server at
        # the same address) fails the batch before Spark commits it.
        spec.check_server(conn)


def _read_archive(
    spec: StreamSpec, folder: str, partition: BinlogRange
) -> Iterator[pa.RecordBatch]:
    """`read_range` of a binlog archive: its files read in the worker, each table's schema from
    its table maps, held against the schemas the stream holds at the range's start."""
    in_force = {t: e.schema for t, e in partition.in_force().items() if e.schema is not None}
    events = BinlogArchive(folder).read(
        spec.source.capture, spec.split_keys, partition.start, partition.end, in_force,
        partition.since,
    )  # fmt: skip
    batches = ChangeBatches(spec.source)
    for block in _filtered_blocks(None, spec, events):
        yield from batches.of(block)


Event = RowChange | SchemaChange


def _filtered_blocks(conn: Any, spec: StreamSpec, events: Iterator[Event]) -> Iterator[list[Event]]:
    """The events to apply, in blocks: key changes split, the high-watermark filter applied."""
    orders: dict[str, Any] = {}  # CollationOrder | MemberOrder | None per table
    marks = WatermarkFilter({})
    while block := list(islice(events, _FILTER_BLOCK)):
        parts: list[Event] = []
        for event in block:
            if isinstance(event, SchemaChange):
                _check_after_snapshot(spec, event)
                parts.append(event)
            else:
                assert event.schema is not None
                parts.extend(split_key_change(event, event.schema.key_of))
        for part in parts:
            # Only a table with chunks is filtered, so only its keys are ordered (a binlog
            # archive's tables have none, and no server to order them).
            if (
                isinstance(part, RowChange)
                and part.table in spec.marks
                and part.table not in orders
            ):
                assert part.schema is not None
                orders[part.table] = key_order(conn, part.schema)
                watermarks = spec.marks[part.table].watermarks(orders[part.table])
                marks = WatermarkFilter({**marks.tables, part.table: watermarks})
        for name, order in orders.items():
            if order is not None:
                order.prime(
                    image[p.schema.split_index]
                    for p in parts
                    if isinstance(p, RowChange) and p.table == name and p.schema is not None
                    for image in (p.before, p.after)
                    if image is not None
                )
        # An update that keeps its key but moves a split column outside the key crosses
        # chunks: apply it if either side's chunk has not seen it. Silver's MERGE applies it
        # only if newer than the row it finds (rows loaded from bronze carry their chunk's HW).
        kept = [part for part in parts if _should_apply(marks, part)]
        if kept:
            yield kept


def _should_apply(marks: WatermarkFilter, part: Event) -> bool:
    if isinstance(part, SchemaChange):
        return True
    assert part.schema is not None
    split = part.schema.split_index
    return any(
        marks.should_apply(part.table, image[split], part.position)
        for image in (part.before, part.after)
        if image is not None
    )


def _check_after_snapshot(spec: StreamSpec, change: SchemaChange) -> None:
    """A DDL between a table's first and last chunk read rows of two schemas into one snapshot."""
    marks = spec.marks.get(change.table)
    if marks is not None and change.offset <= marks.max_hw:
        raise SourceError(
            f"{change.table} changed at {change.offset} ({short_statement(change.statement)}) "
            f"while its snapshot was read (its chunks end at {marks.max_hw}): re-snapshot it with "
            f"`binlake snapshot --tables {change.table.split('.', 1)[1]} --reset`"
        )


class ChangeBatches:
    """Events → Arrow record batches in the change record's schema: row images as JSON
    (`change_record`) of what lands (`column_rules`), one encoder per schema a batch meets."""

    def __init__(self, source: SourceConfig) -> None:
        self.source = source  # its column rules apply to each image before it is encoded
        self.schema = to_arrow_schema(CHANGE_SCHEMA)  # no timestamps: no time zone
        # Keyed by identity and holding the schema, so a freed schema's id is never reused.
        self._encoders: dict[int, tuple[TableSchema, Encode]] = {}

    def _encoder(self, table: TableSchema) -> Encode:
        """The images of `table` (as the source holds them) → JSON of what lands: built once
        per schema, since every image of the batch passes through it (asking the projection
        whether it changes anything took a seventh of a read's time, image by image)."""
        held = self._encoders.get(id(table))
        if held is None or held[0] is not table:
            held = self._encoders[id(table)] = (table, _landed_encoder(self.source, table))
        return held[1]

    def of(self, events: list[Event]) -> Iterator[pa.RecordBatch]:
        """The events as record batches of at most `ARROW_BATCH_BYTES` of row images (or one
        row): a block of multi-MB rows (LONGBLOB, LONGTEXT) would otherwise cross into the JVM
        as one Arrow batch of gigabytes, beyond its heap."""
        rows: list[tuple[Any, ...]] = []
        size = 0
        for event in events:
            row = self._row(event)
            rows.append(row)
            size += len(row[-2] or "") + len(row[-1] or "")
            if size >= ARROW_BATCH_BYTES:
                yield self._batch(rows)
                rows, size = [], 0
        if rows:
            yield self._batch(rows)

    def _row(self, event: Event) -> tuple[Any, ...]:
        if isinstance(event, SchemaChange):
            return (
                event.table, DDL, position_token(event.offset, 0), event.offset.file,
                event.offset.pos, 0, int(event.ts), json.dumps(_ddl_before(event)),
                json.dumps(event.after.to_json()) if event.after else None,
            )  # fmt: skip
        assert event.schema is not None
        encode = self._encoder(event.schema)
        offset = event.position.offset
        return (
            event.table, event.op.value, event.position.token(), offset.file, offset.pos,
            event.position.row, event.timestamp, encode(event.before), encode(event.after),
        )  # fmt: skip

    def _batch(self, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
        arrays = [
            pa.array([row[i] for row in rows], type=field.type)
            for i, field in enumerate(self.schema)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


Encode = Callable[[Row | None], str | None]


def _landed_encoder(source: SourceConfig, table: TableSchema) -> Encode:
    """`ChangeBatches._encoder` of `table`: its column rules (`projection`), then JSON."""
    encode = ImageEncoder(lake_view(source, table))
    project = projection(source, table)
    if project.identity:
        return encode
    return lambda row: encode(project.row(row))


def _ddl_before(change: SchemaChange) -> dict[str, Any]:
    return {
        "statement": change.statement,
        "kind": change.kind,
        "schema": change.before.to_json() if change.before else None,
        "shadow": list(change.shadow),
    }


class BinlogRangeReader(DataSourceReader):
    """A bounded range of the binlog as a batch source (a joining table's catch-up): read in
    Spark tasks like a stream's micro-batch (`StreamSpec.reads`), never collected on the
    driver."""

    def __init__(self, spec: StreamSpec, bounded: BinlogRange) -> None:
        self.spec = spec
        self.bounded = bounded

    def partitions(self) -> Sequence[InputPartition]:
        return self.spec.reads(self.bounded)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BinlogRange)
        yield from read_range(self.spec, partition)


def binlog_source(spec: StreamSpec, bounded: BinlogRange | None = None) -> type[DataSource]:
    """A data source class bound to `spec`; register it, then `readStream.format(spec.name)`,
    or, with a `bounded` range, `read.format(spec.name)` for that range."""

    class BinlogSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return spec.name

        def schema(self) -> T.StructType:
            return CHANGE_SCHEMA

        def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
            return BinlogStreamReader(spec)

        def reader(self, schema: T.StructType) -> DataSourceReader:
            if bounded is None:
                raise NotImplementedError(f"{spec.name} is a stream: readStream.format(...)")
            return BinlogRangeReader(spec, bounded)

    return BinlogSource
