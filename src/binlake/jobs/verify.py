"""`binlake verify`: silver against the source, chunk by chunk, without collecting tables.

The source side re-reads every chunk with the snapshot's own chunk reader (Spark tasks, lock-free,
each chunk consistent as of its HW); silver rows are assigned to chunks by the same membership
test the stream filter uses (the column's collation for strings). Both sides reduce each chunk to
a row count and an order-independent checksum (the sum of each row's xxhash64 over the data
columns), computed in Spark; only those two numbers per chunk reach the driver.

Run it when the source is quiet and the stream has caught up: a row changed in between is a
difference by definition.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config.secrets import with_resolved_password
from binlake.config.settings import Config, SourceConfig
from binlake.lake.paths import ledger_path
from binlake.lake.tables import column_name
from binlake.model.schema import TableSchema
from binlake.model.typemap import spark_schema
from binlake.mysql.column_rules import lake_view
from binlake.mysql.connection import connection
from binlake.mysql.prerequisites import validate
from binlake.silver.merge import live_rows, silver_table
from binlake.snapshot.chunks import ChunkRange, chunk_of, decode_key, encode_key
from binlake.snapshot.ledger import ChunkState, Ledger
from binlake.snapshot.planner import key_order
from binlake.snapshot.row_filters import check_row_filters
from binlake.snapshot.task import read_chunks


@dataclass(frozen=True)
class ChunkDifference:
    table: str
    chunk_id: int
    range: ChunkRange
    source_rows: int
    silver_rows: int


@dataclass(frozen=True)
class VerifyReport:
    tables: dict[str, tuple[int, int]]  # table → (source rows, silver rows)
    differences: list[ChunkDifference]

    @property
    def identical(self) -> bool:
        return not self.differences


def _digest(rows: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    hashed = rows.select(
        "_chunk_id", F.xxhash64(*[F.col(column_name(c)) for c in columns]).alias("_h")
    )
    return hashed.groupBy("_chunk_id").agg(
        F.count(F.lit(1)).alias("rows"), F.sum(F.col("_h").cast("decimal(38,0)")).alias("checksum")
    )


def verify_silver(spark: SparkSession, config: Config) -> VerifyReport:
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        tables = validate(conn, config)
    check_row_filters(spark, config, tables)
    ledger = Ledger(spark, ledger_path(config))
    totals: dict[str, tuple[int, int]] = {}
    differences: list[ChunkDifference] = []
    for table in tables:
        chunks = ledger.chunks(table.qualified) or [
            ChunkState(table.qualified, 0, table.split_column, ChunkRange.all())
        ]
        rows, _ = read_chunks(spark, config, source, table, chunks)
        landed = lake_view(config.source, table)  # ruled columns: hashed on both sides alike
        source_digest = {r["_chunk_id"]: r for r in _digest(rows, landed.column_names).collect()}
        silver = _assign_chunks(
            live_rows(silver_table(config, table).read(spark), config, table.qualified),
            source,
            landed,
            chunks,
        )
        silver_digest = {r["_chunk_id"]: r for r in _digest(silver, landed.column_names).collect()}
        for chunk in chunks:
            ours, theirs = source_digest.get(chunk.chunk_id), silver_digest.get(chunk.chunk_id)
            if _same(ours, theirs):
                continue
            differences.append(
                ChunkDifference(
                    table.qualified,
                    chunk.chunk_id,
                    chunk.range,
                    ours["rows"] if ours else 0,
                    theirs["rows"] if theirs else 0,
                )
            )
        unplaced = silver_digest.get(-1)
        if unplaced is not None:
            differences.append(
                ChunkDifference(table.qualified, -1, ChunkRange.all(), 0, unplaced["rows"])
            )
        totals[table.qualified] = (
            sum(r["rows"] for r in source_digest.values()),
            sum(r["rows"] for r in silver_digest.values()),
        )
    return VerifyReport(totals, differences)


def _same(ours: Row | None, theirs: Row | None) -> bool:
    """Equal counts and checksums; a chunk empty on both sides may be absent from either."""
    if ours is None or theirs is None:
        return (ours or theirs or {"rows": 0})["rows"] == 0
    return bool(ours["rows"] == theirs["rows"] and ours["checksum"] == theirs["checksum"])


def _assign_chunks(
    silver: DataFrame, source: SourceConfig, table: TableSchema, chunks: list[ChunkState]
) -> DataFrame:
    """Silver's data columns, in the source's types, plus `_chunk_id`, placed by MySQL's order
    of the split key. (Silver may hold a column wider: a route's silver holds the widest type of
    its members, and the checksum hashes values as typed.)"""
    bounds = [(encode_key(c.range.start), encode_key(c.range.end)) for c in chunks]
    ids = [c.chunk_id for c in chunks]
    names = list(table.column_names)
    kinds = {f.name: f.dataType for f in spark_schema(table).fields}
    fields = [T.StructField(c, kinds.get(c, silver.schema[c].dataType)) for c in names]
    # Positional names going in: mapInArrow resolves its input columns by name, parsing a dot in
    # one as a struct field.
    data = silver.select(
        *[F.col(column_name(f.name)).cast(f.dataType).alias(f"_{i}") for i, f in enumerate(fields)]
    )
    schema = T.StructType([*fields, T.StructField("_chunk_id", T.IntegerType())])
    split = table.split_index

    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ranges = [ChunkRange(decode_key(s), decode_key(e)) for s, e in bounds]
        with connection(source) as conn:
            order = key_order(conn, table)
            for batch in batches:
                keys = batch.column(split).to_pylist()
                if order is not None:
                    order.prime(keys)
                placed = [chunk_of(ranges, k, order) for k in keys]
                chunk_ids = pa.array([-1 if i is None else ids[i] for i in placed], pa.int32())
                yield pa.RecordBatch.from_arrays(
                    [*batch.columns, chunk_ids], names=[*names, "_chunk_id"]
                )

    return data.mapInArrow(assign, schema)


def render_report(report: VerifyReport) -> str:
    lines = [f"{'table':<32} {'source rows':>12} {'silver rows':>12}  result"]
    failed = {d.table for d in report.differences}
    for table, (source_rows, silver_rows) in report.tables.items():
        verdict = "DIFFERENT" if table in failed else "identical"
        lines.append(f"{table:<32} {source_rows:>12,} {silver_rows:>12,}  {verdict}")
    for d in report.differences:
        where = "rows outside every chunk" if d.chunk_id < 0 else f"chunk {d.chunk_id} {d.range}"
        lines.append(
            f"  {d.table} {where}: source {d.source_rows} rows, silver {d.silver_rows} rows "
            "(counts or checksums differ)"
        )
    return "\n".join(lines)
