"""The floors binlake's apply is held against, each a bare Delta write of the same changes in the
same session: `FloorMerge` (one MERGE of a table's collapsed changes, with `TableApply`'s clauses
written out here, into a copy of its silver as it was before them) and `FloorAppend` (the
changelog rows appended by Delta alone); `merge_floor` and `append_floor` run them for the stream
burst; `silver_merge_metrics` is Delta's own account of binlake's MERGEs."""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import Bench, frame_fingerprint, silver_fingerprint

MERGE_METRICS = (
    "numSourceRows",
    "materializeSourceTimeMs",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "numTargetFilesAdded",
    "numTargetFilesRemoved",
    "numTargetDeletionVectorsAdded",
    "numTargetChangeFilesAdded",
    "numTargetBytesAdded",
    "executionTimeMs",
    "scanTimeMs",
    "rewriteTimeMs",
)


def merge_floor(bench: Bench, spark, config, version_before: int, start, end) -> dict[str, Any]:
    """The floor of the stream's apply: one bare Delta MERGE of the burst's collapsed changes
    from a static Delta table into silver as it was before the burst, same table, same run.

    Silver's directory is copied and the copy restored (`RESTORE … TO VERSION AS OF`) to its
    version before the burst: the same files, layout, statistics and table properties (CDF,
    deletion vectors) binlake's MERGE met. The changes and the MERGE are `FloorMerge`'s.
    Afterwards the copy must equal binlake's silver (count, sums, key range): the floor did the
    same work."""
    from delta.tables import DeltaTable

    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate

    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    root = bench.fresh_root("merge-floor")
    target_path = str(root / "silver")
    shutil.copytree(silver_path(config, table), target_path)
    DeltaTable.forPath(spark, target_path).restoreToVersion(version_before)
    properties = DeltaTable.forPath(spark, target_path).detail().collect()[0]["properties"] or {}
    floor = FloorMerge(spark, config, table, target_path, str(root / "changes"), start, end)
    started = time.monotonic()
    floor.merge()
    seconds = time.monotonic() - started
    metrics = DeltaTable.forPath(spark, target_path).history(1).collect()[0]["operationMetrics"]
    matches = frame_fingerprint(spark.read.format("delta").load(target_path)) == (
        silver_fingerprint(spark, config, table)
    )
    shutil.rmtree(root, ignore_errors=True)
    return {
        "merge_s": round(seconds, 2),
        "rows": floor.rows,
        "changelog_rows": floor.changelog_rows,
        "silver_version_before": version_before,
        "matches_silver": matches,
        "target_properties": {k: v for k, v in properties.items() if k.startswith("delta.")},
        "operation_metrics": {k: (metrics or {})[k] for k in MERGE_METRICS if k in (metrics or {})},
    }


def append_floor(
    bench: Bench, spark, config, version_before: int | None, start, end
) -> dict[str, Any]:
    """The floor of the changelog's share of the apply (`FloorAppend`): the burst's changelog
    rows appended by Delta alone to a copy of the changelog restored to its version before the
    burst (`version_before`; None: the burst's append created the changelog). binlake writes
    both the MERGE and this append for every batch; the bare MERGE floor holds only the first."""
    from delta.tables import DeltaTable

    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate

    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    root = bench.fresh_root("append-floor")
    target = root / "changelog"
    if version_before is not None:
        shutil.copytree(changelog_path(config, table), target)
        DeltaTable.forPath(spark, str(target)).restoreToVersion(version_before)
    floor = FloorAppend(spark, config, table, target, root / "rows", start, end)
    seconds = floor.append()
    shutil.rmtree(root, ignore_errors=True)
    return {"append_s": round(seconds, 2), "rows": floor.rows, "changelog_before": version_before}


class FloorAppend:
    """A table's changelog rows of [start, end] (as binlake appended them, read back into a
    static Delta table at `rows_path`); `append()` is Delta's bare append of them to the Delta
    table at `target` (a copy of the changelog taken before the changes), or, where there is no
    copy (binlake's append created the changelog), to a new table with the changelog's
    properties. Everything but the append is done before it is timed."""

    def __init__(self, spark, config, table, target: Path, rows_path: Path, start, end):
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        from binlake.model.offsets import position_token
        from binlake.silver.merge import OFFSET_COLUMN

        changelog = changelog_path(config, table)
        first, last = position_token(start, 0), position_token(end, 99_999_999)
        within = F.col(OFFSET_COLUMN).between(first, last)
        spark.read.format("delta").load(changelog).where(within).write.format("delta").save(
            str(rows_path)
        )
        self.target = str(target)
        self.options: dict[str, str] = {}
        if not target.exists():
            detail = DeltaTable.forPath(spark, changelog).detail().first()
            self.options = dict(detail["properties"] or {})
        self.source = spark.read.format("delta").load(str(rows_path))
        self.rows = self.source.count()

    def append(self) -> float:
        """Seconds of the append."""
        started = time.monotonic()
        self.source.write.format("delta").mode("append").options(**self.options).save(self.target)
        return time.monotonic() - started


def silver_merge_metrics(spark, silver, after_version: int) -> dict[str, Any]:
    """binlake's own MERGEs into `silver` since `after_version`, from Delta's history: how many,
    and per metric of `MERGE_METRICS` the median and the maximum over them (where the time of
    a MERGE goes: copying its source, finding the files, rewriting them)."""
    from pyspark.sql import functions as F

    merges = (
        spark.sql(f"DESCRIBE HISTORY {silver.sql}")
        .where((F.col("version") > after_version) & (F.col("operation") == "MERGE"))
        .select("operationMetrics")
        .collect()
    )
    metrics = [r["operationMetrics"] or {} for r in merges]
    out: dict[str, Any] = {"merges": len(metrics)}
    for name in MERGE_METRICS:
        values = [float(m[name]) for m in metrics if name in m]
        if values:
            out[name] = {"median": statistics.median(values), "max": max(values)}
    return out


def silver_path(config, table) -> str:
    from binlake.silver.merge import silver_table

    return _table_path(silver_table(config, table), "merge")


def changelog_path(config, table) -> str:
    from binlake.silver.merge import changelog_table

    return _table_path(changelog_table(config, table), "append")


def _table_path(lake_table, floor: str) -> str:
    path = getattr(lake_table, "path", None)
    if path is None:
        raise RuntimeError(f"the {floor} floor copies binlake's files: it needs a lake by path")
    return path


class FloorMerge:
    """A table's changes in [start, end], read back from binlake's changelog (the typed images
    binlake appended while applying them), collapsed to the last change per key by
    `_binlake_offset` and written to a static Delta table at `changes_path`; `merge()` is the
    bare MERGE of them into the Delta table at `target_path`, with the clauses of binlake's
    `merge.TableApply` (rewritten here, not imported): key equality plus the batch's key range
    on the target, delete when the change is a newer delete, update when newer, insert when not
    a delete. Everything but the MERGE itself (the key range too) is done before it is timed."""

    def __init__(self, spark, config, table, target_path: str, changes_path: str, start, end):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from binlake.lake.tables import column_name
        from binlake.model.offsets import position_token
        from binlake.silver.merge import OFFSET_COLUMN, changelog_table, data_columns, silver_table

        columns = data_columns(spark, silver_table(config, table), config, table.qualified)
        assert columns is not None
        self.spark, self.target_path, self.table = spark, target_path, table.qualified
        self.names = columns.fieldNames()
        self.key = [column_name(k) for k in table.key]
        offset = F.col(OFFSET_COLUMN)
        first, last = position_token(start, 0), position_token(end, 99_999_999)
        burst = changelog_table(config, table).read(spark).where(offset.between(first, last))
        image = F.when(F.col("_op") == "delete", F.col("_before")).otherwise(F.col("_after"))
        flat = burst.select("_op", OFFSET_COLUMN, image.alias("_image")).select(
            "_op", OFFSET_COLUMN,
            *[F.col(f"_image.{column_name(c)}").alias(c) for c in self.names],
        )  # fmt: skip
        latest = Window.partitionBy(*self.key).orderBy(offset.desc())
        collapsed = flat.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n")
        collapsed.write.format("delta").save(changes_path)
        self.changelog_rows = burst.count()
        self.source = spark.read.format("delta").load(changes_path)
        self.rows = self.source.count()
        self.bounds = self.source.agg(
            *[agg(F.col(k)).alias(f"{name}_{j}") for j, k in enumerate(self.key)
              for name, agg in (("lo", F.min), ("hi", F.max))]
        ).collect()[0]  # fmt: skip

    def merge(self) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        from binlake.lake.tables import column_name
        from binlake.silver.merge import OFFSET_COLUMN

        on = F.lit(True)
        for j, k in enumerate(self.key):
            on = on & (F.col(f"t.{k}") == F.col(f"s.{k}"))
            low, high = F.lit(self.bounds[f"lo_{j}"]), F.lit(self.bounds[f"hi_{j}"])
            on = on & F.col(f"t.{k}").between(low, high)
        values: dict[str, Any] = {
            column_name(c): f"s.{column_name(c)}" for c in (*self.names, OFFSET_COLUMN)
        }
        newer = f"t.{OFFSET_COLUMN} < s.{OFFSET_COLUMN}"
        (
            DeltaTable.forPath(self.spark, self.target_path)
            .alias("t")
            .merge(self.source.alias("s"), on)
            .whenMatchedDelete(condition=f"s._op = 'delete' AND {newer}")
            .whenMatchedUpdate(condition=f"s._op <> 'delete' AND {newer}", set=values)
            .whenNotMatchedInsert(condition="s._op <> 'delete'", values=values)
            .execute()
        )
