"""Silver: the live mirror of each source table, kept by one Delta MERGE per table per batch.

Per micro-batch and table: the filtered changes are appended to the bronze changelog, collapsed
to the last change of each key by binlog position, and merged into silver (delete → delete,
insert/update → upsert). Silver keeps `_binlake_offset`, the position of the change that last
wrote each row, and every MERGE clause requires the incoming change to be newer, so replaying a
batch after a crash changes nothing; the changelog append is made idempotent by Delta's
`txnAppId`/`txnVersion`. Silver has Change Data Feed on: its CDF is the table's changelog for
downstream jobs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config import Config
from binlake.lake import table_exists
from binlake.snapshot import bronze_path
from binlake.source import TableSchema
from binlake.stream_source import after_column, before_column
from binlake.typemap import exact_key, key_literal, spark_schema

log = logging.getLogger(__name__)

OFFSET_COLUMN = "_binlake_offset"
SILVER_FILE_ROWS = 50_000  # rows per silver file at creation (see ensure_silver)
#: A batch with at most this many distinct keys of a single-column key MERGEs with `key IN
#: (...)`, which Delta's data skipping resolves to the files holding them; larger batches use
#: the key range.
MERGE_KEY_LIST_LIMIT = 1000


def silver_path(config: Config, table: TableSchema) -> str:
    return config.lake.path("silver", table.database, table.name)


def changelog_path(config: Config, table: TableSchema) -> str:
    return config.lake.path("bronze", table.database, f"{table.name}__changelog")


def offset_token(file: Column, pos: Column, row: Column) -> Column:
    """Spark twin of `binlake.offsets.position_token` (same fixed-width, ordered format)."""
    sequence = F.regexp_extract(file, r"(\d+)$", 1).cast("bigint")
    return F.format_string("%010d:%020d:%08d", sequence, pos, row)


def ensure_silver(
    spark: SparkSession, config: Config, table: TableSchema, from_bronze: bool
) -> None:
    """Create silver once, in one commit: from bronze (rows at their chunk's HW) or empty.

    Rows are laid out in key order, `SILVER_FILE_ROWS` per file, so each file covers a narrow,
    disjoint key range: a MERGE of a few changed keys then reads and touches only their files
    (Delta skips the others by their key statistics) instead of the whole table. Deletion
    vectors keep that layout: a MERGE marks a file's changed rows deleted instead of rewriting
    the file, so only the changed rows are written anew.
    """
    path = silver_path(config, table)
    if table_exists(spark, path):
        return
    columns = list(table.column_names)
    if from_bronze:
        bronze = spark.read.format("delta").load(bronze_path(config, table))
        key = [F.col(f"`{k}`") for k in table.key]
        initial = (
            bronze.select(
                *columns,
                offset_token(F.col("_hw_file"), F.col("_hw_pos"), F.lit(0)).alias(OFFSET_COLUMN),
            )
            .repartitionByRange(*key)
            .sortWithinPartitions(*key)
        )
    else:
        schema = T.StructType(
            [*spark_schema(table).fields, T.StructField(OFFSET_COLUMN, T.StringType())]
        )
        initial = spark.createDataFrame([], schema)
    (
        initial.write.format("delta")
        .option("delta.enableChangeDataFeed", "true")
        .option("delta.enableDeletionVectors", "true")
        .option("maxRecordsPerFile", SILVER_FILE_ROWS)
        .mode("errorifexists")
        .save(path)
    )
    log.info("silver %s created (%s)", table.qualified, "from bronze" if from_bronze else "empty")


class SilverWriter:
    """The `foreachBatch` sink: per table, a changelog append and one MERGE, run concurrently.

    A batch's fixed cost is what a user waits for on every commit, so it is kept to one small
    aggregate (per-table counts, key ranges, short key lists) plus the two Delta commits,
    submitted side by side: they read the same cached batch and neither depends on the other
    (each is idempotent on its own). The MERGE condition names the batch's keys (their list, or
    their range) as a target-only predicate, so Delta skips the silver files that cannot hold
    them instead of scanning the whole table for a few changed rows.
    """

    def __init__(self, config: Config, tables: Sequence[TableSchema], job: str) -> None:
        self.config = config
        self.tables = tuple(tables)
        self.job = job

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = batch.persist()
        try:
            summary = self._summary(batch)
            read = time.monotonic() - started
            work = [
                (step, table, index, summary[table.qualified])
                for index, table in enumerate(self.tables)
                if table.qualified in summary
                for step in (self._append_changelog, self._merge)
            ]
            with ThreadPoolExecutor(max_workers=max(len(work), 1)) as pool:
                timings = list(
                    pool.map(lambda w: _timed(w[0], batch, w[1], w[2], w[3], batch_id), work)
                )
            if summary:
                steps = ", ".join(
                    f"{table.qualified} {step.__name__.strip('_')} {seconds:.1f} s"
                    for (step, table, _, _), seconds in zip(work, timings, strict=True)
                )
                counts = ", ".join(f"{t} {s['count']}" for t, s in sorted(summary.items()))
                log.info(
                    "batch %d applied in %.1f s: changes %s; read %.1f s, %s",
                    batch_id, time.monotonic() - started, counts, read, steps,
                )  # fmt: skip
        finally:
            batch.unpersist()

    def _summary(self, batch: DataFrame) -> dict[str, Row]:
        """Per table in the batch: its change count, the min/max of each key column and (for a
        single-column key) its distinct keys, up to one past `MERGE_KEY_LIST_LIMIT`."""
        limit = MERGE_KEY_LIST_LIMIT + 1
        bounds = [
            exact_key(agg(_key_of(i, k)), _key_type(table, k)).alias(f"{name}_{i}_{j}")
            for i, table in enumerate(self.tables)
            for j, k in enumerate(table.key)
            for name, agg in (("lo", F.min), ("hi", F.max))
        ]
        # One key past the limit tells a list that fits from one that was cut short.
        keys = [
            F.slice(
                F.array_distinct(
                    F.collect_list(
                        exact_key(_key_of(i, table.key[0]), _key_type(table, table.key[0]))
                    )
                ),
                1,
                limit,
            ).alias(f"keys_{i}")
            for i, table in enumerate(self.tables)
            if len(table.key) == 1
        ]
        rows = (
            batch.groupBy("_table").agg(F.count(F.lit(1)).alias("count"), *bounds, *keys).collect()
        )
        return {r["_table"]: r for r in rows}

    def _append_changelog(
        self, batch: DataFrame, table: TableSchema, index: int, summary: Row, batch_id: int
    ) -> None:
        changes = batch.where(F.col("_table") == table.qualified)
        (
            changes.select(
                "_op",
                F.col("_offset").alias(OFFSET_COLUMN),
                "_file",
                "_pos",
                "_row",
                F.timestamp_seconds("_ts").alias("_commit_ts"),
                F.col(before_column(index)).alias("_before"),
                F.col(after_column(index)).alias("_after"),
            )
            .write.format("delta")
            .mode("append")
            .option("txnAppId", f"binlake-{self.job}-{table.qualified}")
            .option("txnVersion", batch_id)
            .save(changelog_path(self.config, table))
        )

    def _merge(
        self, batch: DataFrame, table: TableSchema, index: int, summary: Row, batch_id: int
    ) -> None:
        changes = batch.where(F.col("_table") == table.qualified)
        before, after = before_column(index), after_column(index)
        image = F.when(F.col("_op") == "delete", F.col(before)).otherwise(F.col(after))
        flat = changes.select("_op", F.col("_offset").alias(OFFSET_COLUMN), image.alias("_image"))
        flat = flat.select(
            "_op", OFFSET_COLUMN, *[F.col(f"_image.`{c}`").alias(c) for c in table.column_names]
        )
        latest = Window.partitionBy(*[F.col(k) for k in table.key]).orderBy(
            F.col(OFFSET_COLUMN).desc()
        )
        collapsed = flat.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n")
        on = F.lit(True)
        for k in table.key:
            on = on & (F.col(f"t.`{k}`") == F.col(f"s.`{k}`"))
        on = on & _target_keys(table, index, summary)
        values: dict[str, str | Column] = {
            f"`{c}`": f"s.`{c}`" for c in (*table.column_names, OFFSET_COLUMN)
        }
        newer = f"t.{OFFSET_COLUMN} < s.{OFFSET_COLUMN}"
        (
            DeltaTable.forPath(batch.sparkSession, silver_path(self.config, table))
            .alias("t")
            .merge(collapsed.alias("s"), on)
            .whenMatchedDelete(condition=f"s._op = 'delete' AND {newer}")
            .whenMatchedUpdate(condition=f"s._op <> 'delete' AND {newer}", set=values)
            .whenNotMatchedInsert(condition="s._op <> 'delete'", values=values)
            .execute()
        )


def _key_of(index: int, key: str) -> Column:
    """A change's key column value (after image; before image for deletes)."""
    return F.coalesce(
        F.col(f"{after_column(index)}.`{key}`"), F.col(f"{before_column(index)}.`{key}`")
    )


def _target_keys(table: TableSchema, index: int, summary: Row) -> Column:
    """A target-only predicate naming the batch's keys: their list when short, else their range.

    The values are typed literals (never SQL text; see `typemap.exact_key`), which Delta uses to
    skip files by statistics.
    """
    keys = summary[f"keys_{index}"] if len(table.key) == 1 else None
    if keys is not None and len(keys) <= MERGE_KEY_LIST_LIMIT:
        kind = _key_type(table, table.key[0])
        return F.col(f"t.`{table.key[0]}`").isin([key_literal(k, kind) for k in keys])
    within = F.lit(True)
    for j, k in enumerate(table.key):
        kind = _key_type(table, k)
        low, high = (key_literal(summary[f"{e}_{index}_{j}"], kind) for e in ("lo", "hi"))
        within = within & F.col(f"t.`{k}`").between(low, high)
    return within


def _key_type(table: TableSchema, key: str) -> T.DataType:
    return spark_schema(table)[key].dataType


def _timed(step: Callable[..., None], *args: Any) -> float:
    started = time.monotonic()
    step(*args)
    return time.monotonic() - started
