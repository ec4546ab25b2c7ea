"""What a stream batch holds, found by one Spark job (or, for a small batch, from its records
collected whole): each table's row changes, how its reads hold them, its newest commit time and its
DDL in binlog order.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.mysql.schema_history import SchemaChange
from binlake.silver.change_record import DDL, META_FIELDS
from binlake.silver.spread import Spread


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
#: summarised by Spark at once, without first collecting a part of each of its reads, which a
#: large batch would pay for nothing; the bound leaves room for `SMALL_BATCH_RECORDS` changes of a
#: typical table (`bench/results/2026-12-05-small-batches.md`, docs/performance.md).
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
