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

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config.secrets import with_resolved_password
from binlake.config.settings import Config, SourceConfig
from binlake.jobs.status import StreamLag
from binlake.lake.paths import ledger_path
from binlake.lake.tables import column_name
from binlake.model.counts import counted
from binlake.model.schema import TableSchema
from binlake.model.typemap import spark_schema
from binlake.mysql.column_rules import lake_view
from binlake.mysql.connection import connection
from binlake.mysql.prerequisites import validate
from binlake.silver.merge import live_rows, silver_table
from binlake.snapshot.batch_reads import read_chunks
from binlake.snapshot.chunks import ChunkRange, chunk_of, decode_key, encode_key
from binlake.snapshot.ledger import ChunkState, Ledger
from binlake.snapshot.planner import key_order
from binlake.snapshot.row_filters import check_row_filters
from binlake.snapshot.task import chosen_tables

log = logging.getLogger(__name__)


#: Keys named per differing chunk: enough to look at, few enough to read.
KEYS_SHOWN = 5


@dataclass(frozen=True)
class KeyDifference:
    key: tuple[Any, ...]
    how: str  # "only in the source", "only in silver", "values differ"


@dataclass(frozen=True)
class ChunkDifference:
    table: str
    chunk_id: int
    range: ChunkRange
    source_rows: int
    silver_rows: int
    keys: tuple[KeyDifference, ...] = ()


@dataclass(frozen=True)
class VerifyReport:
    tables: dict[str, tuple[int, int]]  # table → (source rows, silver rows)
    differences: list[ChunkDifference]
    key_columns: dict[str, tuple[str, ...]]  # table → its key's columns, for the key lines

    @property
    def identical(self) -> bool:
        return not self.differences


def _hashes(rows: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    return rows.select("*", F.xxhash64(*[F.col(column_name(c)) for c in columns]).alias("_h"))


def _digest(rows: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    return (
        _hashes(rows, columns)
        .groupBy("_chunk_id")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.col("_h").cast("decimal(38,0)")).alias("checksum"),
        )
    )


def verify_silver(
    spark: SparkSession, config: Config, only: list[str] | None = None
) -> VerifyReport:
    """Silver against the source for the captured tables (those `only` names, by `--tables`)."""
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        tables = chosen_tables(validate(conn, config), only)
    check_row_filters(spark, config, tables)
    ledger = Ledger(spark, ledger_path(config))
    totals: dict[str, tuple[int, int]] = {}
    differences: list[ChunkDifference] = []
    for table in tables:
        started = time.monotonic()
        chunks = ledger.chunks(table.qualified) or [
            ChunkState(table.qualified, 0, table.split_column, ChunkRange.all())
        ]
        totals[table.qualified], found = _compare_table(spark, config, source, table, chunks)
        differences += found
        log.info(
            "verify: %s: %s compared in %.1f s, %s",
            table.qualified, counted(len(chunks), "chunk"), time.monotonic() - started,
            f"{len(found)} differ" if found else "identical",
        )  # fmt: skip
    keys = {t.qualified: lake_view(config.source, t).key for t in tables}
    return VerifyReport(totals, differences, keys)


def _compare_table(
    spark: SparkSession,
    config: Config,
    source: SourceConfig,
    table: TableSchema,
    chunks: list[ChunkState],
) -> tuple[tuple[int, int], list[ChunkDifference]]:
    """(source rows, silver rows) of `table`, and its chunks that differ, each with the first
    keys that do."""
    rows, _ = read_chunks(spark, config, source, table, chunks)
    landed = lake_view(config.source, table)  # ruled columns: hashed on both sides alike
    source_digest = {r["_chunk_id"]: r for r in _digest(rows, landed.column_names).collect()}
    silver = _silver_in_chunks(spark, config, source, table, chunks)
    silver_digest = {r["_chunk_id"]: r for r in _digest(silver, landed.column_names).collect()}
    differing = [
        c for c in chunks
        if not _same(source_digest.get(c.chunk_id), silver_digest.get(c.chunk_id))
    ]  # fmt: skip
    keys = _differing_keys(spark, config, source, table, differing, silver)
    found = [
        ChunkDifference(
            table.qualified,
            c.chunk_id,
            c.range,
            _rows(source_digest.get(c.chunk_id)),
            _rows(silver_digest.get(c.chunk_id)),
            keys.get(c.chunk_id, ()),
        )
        for c in differing
    ]
    unplaced = silver_digest.get(-1)
    if unplaced is not None:
        found.append(ChunkDifference(table.qualified, -1, ChunkRange.all(), 0, unplaced["rows"]))
    totals = (
        sum(r["rows"] for r in source_digest.values()),
        sum(r["rows"] for r in silver_digest.values()),
    )
    return totals, found


def _rows(digest: Row | None) -> int:
    return int(digest["rows"]) if digest else 0


def _silver_in_chunks(
    spark: SparkSession,
    config: Config,
    source: SourceConfig,
    table: TableSchema,
    chunks: list[ChunkState],
) -> DataFrame:
    live = live_rows(silver_table(config, table).read(spark), config, table.qualified)
    return _assign_chunks(live, source, lake_view(config.source, table), chunks)


def _differing_keys(
    spark: SparkSession,
    config: Config,
    source: SourceConfig,
    table: TableSchema,
    differing: list[ChunkState],
    silver: DataFrame,
) -> dict[int, tuple[KeyDifference, ...]]:
    """Per differing chunk, its first `KEYS_SHOWN` keys whose rows differ: the chunks read from
    the source again (only those), joined with silver's rows of them by key."""
    if not differing:
        return {}
    landed = lake_view(config.source, table)
    names = list(landed.key)
    key = [F.col(column_name(k)) for k in names]
    ids = [c.chunk_id for c in differing]
    ours = _hashes(read_chunks(spark, config, source, table, differing)[0], landed.column_names)
    theirs = _hashes(silver.where(F.col("_chunk_id").isin(ids)), landed.column_names)
    joined = (
        ours.select(*key, "_chunk_id", F.col("_h").alias("_source"))
        .join(theirs.select(*key, F.col("_chunk_id").alias("_in"), F.col("_h").alias("_silver")),
              on=names, how="full_outer")
        .where(~F.col("_source").eqNullSafe(F.col("_silver")))
        .select(*key, F.coalesce("_chunk_id", "_in").alias("_chunk"), "_source", "_silver")
    )  # fmt: skip
    found: dict[int, list[KeyDifference]] = {}
    for row in joined.limit(KEYS_SHOWN * len(ids)).collect():
        how = (
            "only in silver" if row["_source"] is None
            else "only in the source" if row["_silver"] is None
            else "values differ"
        )  # fmt: skip
        shown = found.setdefault(row["_chunk"], [])
        if len(shown) < KEYS_SHOWN:
            shown.append(KeyDifference(tuple(row[k] for k in landed.key), how))
    return {chunk: tuple(keys) for chunk, keys in found.items()}


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


def lag_hint(lag: StreamLag | None) -> str:
    """What a difference means, given where the stream stands (`status.stream_lag`)."""
    if lag is None:
        return (
            "the stream has applied no batch yet: silver holds the snapshot alone. Run "
            "`binlake stream --available-now`, then verify again"
        )
    if lag.lag_bytes:
        return (
            f"the stream {lag.job} is {lag.lag_bytes:,} binlog bytes behind the source (at "
            f"{lag.offset}, head {lag.head}): a difference may be a change it has not applied "
            "yet. Let it catch up (`binlake stream --available-now`), then verify again; a "
            "difference that stays calls for `binlake snapshot --tables T --reset`"
        )
    return (
        "the stream has caught up with the source: a row written during the comparison differs "
        "by definition (verify again); a difference that stays calls for "
        "`binlake snapshot --tables T --reset` of its table"
    )


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
        columns = report.key_columns.get(d.table, ())
        for k in d.keys:
            named = ", ".join(f"{c}={v!r}" for c, v in zip(columns, k.key, strict=True))
            lines.append(f"    key ({named}): {k.how}")
    return "\n".join(lines)
