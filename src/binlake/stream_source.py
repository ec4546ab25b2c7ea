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

from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from binlake.binlog import read_changes
from binlake.changes import Op, RowChange, split_key_change
from binlake.chunks import ChunkRange, decode_key, encode_key
from binlake.collation import CollationOrder
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
_FILTER_BLOCK = 2000  # changes per collation-weight round trip


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

    def watermarks(self, order: CollationOrder | None) -> TableWatermarks:
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

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, BinlogRange)
        spec = self.spec
        start = BinlogOffset(partition.start_file, partition.start_pos)
        end = BinlogOffset(partition.end_file, partition.end_pos)
        changes = read_changes(spec.source, spec.server_id, list(spec.tables), start, end)
        with connection(spec.source) as conn:
            yield from _filtered_rows(conn, spec, changes)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the binlog is re-readable until the source purges it."""


def _filtered_rows(
    conn: Any, spec: StreamSpec, changes: Iterator[RowChange]
) -> Iterator[tuple[Any, ...]]:
    index = {t.qualified: i for i, t in enumerate(spec.tables)}
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
        for part in parts:
            split = by_name[part.table].split_index
            images = (part.before, part.after) if part.op is Op.UPDATE else (part.image,)
            # An update that keeps its key but moves a split column outside the key crosses
            # chunks: apply it if either side's chunk has not seen it. Silver's MERGE applies it
            # only if newer than the row it finds (rows loaded from bronze carry their chunk's HW).
            if any(
                marks.should_apply(part.table, image[split], part.position)
                for image in images
                if image is not None
            ):
                yield _row(part, index[part.table], len(spec.tables))


def _row(change: RowChange, table_index: int, tables: int) -> tuple[Any, ...]:
    images: list[Any] = [None] * (2 * tables)
    images[2 * table_index] = change.before
    images[2 * table_index + 1] = change.after
    offset = change.position.offset
    return (
        change.table,
        change.op.value,
        change.position.token(),
        offset.file,
        offset.pos,
        change.position.row,
        change.timestamp,
        *images,
    )


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
