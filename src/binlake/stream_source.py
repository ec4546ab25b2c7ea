"""The binlog as a Spark Structured Streaming source (PySpark's Python data source API).

The stream's offset is the binlog offset `{"file", "pos"}`, always on a transaction boundary
(`SHOW MASTER STATUS`), so Spark's checkpoint is where a restart resumes and a micro-batch never
splits a transaction. Each micro-batch `(start, end]` is read by one task, which applies the
high-watermark filter before anything leaves Python: changes a chunk already holds are dropped,
key-changing updates are split into delete + insert and each side is judged by its own chunk.

Rows carry one `before`/`after` struct pair per captured table, typed like the table, so the sink
gets exactly the values the snapshot wrote, with no JSON round trip.

The source class is built per job by `binlog_source(spec)`; the spec (config, schemas, chunk
watermarks) travels with the pickled class, never as string options visible in query plans.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from binlake.binlog import read_changes
from binlake.changes import RowChange, split_key_change
from binlake.chunks import ChunkRange, SortKey, decode_key, encode_key
from binlake.config import SourceConfig
from binlake.offsets import BinlogOffset
from binlake.planner import key_order
from binlake.source import TableSchema, connection, current_offset
from binlake.typemap import spark_schema
from binlake.watermarks import TableWatermarks, WatermarkFilter

META_FIELDS = [
    T.StructField("_table", T.StringType(), False),
    T.StructField("_op", T.StringType(), False),
    T.StructField("_offset", T.StringType(), False),
    T.StructField("_file", T.StringType(), False),
    T.StructField("_pos", T.LongType(), False),
    T.StructField("_row", T.IntegerType(), False),
    T.StructField("_ts", T.LongType(), False),
]
_FILTER_BLOCK = 8192  # changes per collation-weight round trip and per Arrow batch


def before_column(index: int) -> str:
    return f"_before_{index}"


def after_column(index: int) -> str:
    return f"_after_{index}"


def change_schema(tables: Sequence[TableSchema]) -> T.StructType:
    fields = list(META_FIELDS)
    for i, table in enumerate(tables):
        row = spark_schema(table)
        fields += [
            T.StructField(before_column(i), row, True),
            T.StructField(after_column(i), row, True),
        ]
    return T.StructType(fields)


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
    source: SourceConfig
    server_id: int
    tables: tuple[TableSchema, ...]
    start: BinlogOffset
    marks: dict[str, ChunkMarks] = field(default_factory=dict)


@dataclass(frozen=True)
class BinlogRange(InputPartition):
    start_file: str
    start_pos: int
    end_file: str
    end_pos: int


class BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        self.target: BinlogOffset | None = None

    def initialOffset(self) -> dict[str, Any]:
        return self.spec.start.to_dict()

    def _head(self) -> BinlogOffset:
        with connection(self.spec.source) as conn:
            return current_offset(conn)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._head()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        head = self.target or self._head()
        return max(head, BinlogOffset.from_dict(start)).to_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = BinlogOffset.from_dict(start), BinlogOffset.from_dict(end)
        if last <= first:
            return []
        return [BinlogRange(first.file, first.pos, last.file, last.pos)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BinlogRange)
        spec = self.spec
        start = BinlogOffset(partition.start_file, partition.start_pos)
        end = BinlogOffset(partition.end_file, partition.end_pos)
        changes = read_changes(spec.source, spec.server_id, list(spec.tables), start, end)
        batches = ChangeBatches(spec.tables)
        with connection(spec.source) as conn:
            for block in _filtered_blocks(conn, spec, changes):
                yield batches.of(block)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the binlog is re-readable until the source purges it."""


def _filtered_blocks(
    conn: Any, spec: StreamSpec, changes: Iterator[RowChange]
) -> Iterator[list[RowChange]]:
    """The changes to apply, in blocks: key changes split, the high-watermark filter applied."""
    by_name = {t.qualified: t for t in spec.tables}
    orders = {t.qualified: key_order(conn, t) for t in spec.tables}
    marks = WatermarkFilter({name: m.watermarks(orders[name]) for name, m in spec.marks.items()})
    while block := list(islice(changes, _FILTER_BLOCK)):
        parts = [
            part
            for change in block
            for part in split_key_change(change, by_name[change.table].key_of)
        ]
        for name, order in orders.items():
            if order is not None:
                split = by_name[name].split_index
                order.prime(
                    image[split]
                    for p in parts
                    if p.table == name
                    for image in (p.before, p.after)
                    if image is not None
                )
        # An update that keeps its key but moves a split column outside the key crosses
        # chunks: apply it if either side's chunk has not seen it. Silver's MERGE applies it
        # only if newer than the row it finds (rows loaded from bronze carry their chunk's HW).
        kept = [
            part
            for part in parts
            if any(
                marks.should_apply(
                    part.table, image[by_name[part.table].split_index], part.position
                )
                for image in (part.before, part.after)
                if image is not None
            )
        ]
        if kept:
            yield kept


class ChangeBatches:
    """Row changes → Arrow record batches in the stream's schema (columnar, so Spark receives
    them without a Python conversion per value)."""

    def __init__(self, tables: Sequence[TableSchema]) -> None:
        self.tables = {t.qualified: i for i, t in enumerate(tables)}
        self.schema = to_arrow_schema(change_schema(tables), timezone="UTC")

    def of(self, changes: list[RowChange]) -> pa.RecordBatch:
        offsets = [c.position.offset for c in changes]
        meta = [
            pa.array([c.table for c in changes], pa.string()),
            pa.array([c.op.value for c in changes], pa.string()),
            pa.array([c.position.token() for c in changes], pa.string()),
            pa.array([o.file for o in offsets], pa.string()),
            pa.array([o.pos for o in offsets], pa.int64()),
            pa.array([c.position.row for c in changes], pa.int32()),
            pa.array([c.timestamp for c in changes], pa.int64()),
        ]
        images: list[pa.Array] = []
        for name, index in self.tables.items():
            mine = [c.table == name for c in changes]
            for side, column in (("before", 2 * index), ("after", 2 * index + 1)):
                struct_type = self.schema.field(len(META_FIELDS) + column).type
                rows = [getattr(c, side) if m else None for c, m in zip(changes, mine, strict=True)]
                images.append(_struct_column(rows, struct_type))
        return pa.RecordBatch.from_arrays([*meta, *images], schema=self.schema)


def _struct_column(rows: list[Any], struct_type: pa.StructType) -> pa.Array:
    """A struct column of row tuples (None: a null struct), built column by column."""
    present = [r for r in rows if r is not None]
    if not present:
        return pa.nulls(len(rows), struct_type)
    fields = [struct_type.field(i) for i in range(struct_type.num_fields)]
    children = [
        pa.array(values, type=f.type)
        for values, f in zip(zip(*present, strict=True), fields, strict=True)
    ]
    dense = pa.StructArray.from_arrays(children, fields=fields)
    if len(present) == len(rows):
        return dense
    slots: list[int | None] = []
    at = 0
    for row in rows:  # scatter the dense rows back between the nulls
        if row is None:
            slots.append(None)
        else:
            slots.append(at)
            at += 1
    return dense.take(pa.array(slots, pa.int32()))


def binlog_source(spec: StreamSpec) -> type[DataSource]:
    """A data source class bound to `spec`; register it, then `readStream.format(spec.name)`."""

    class BinlogSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return spec.name

        def schema(self) -> T.StructType:
            return change_schema(spec.tables)

        def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
            return BinlogStreamReader(spec)

    return BinlogSource
