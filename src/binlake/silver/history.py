"""SCD type 2 silver (`silver.history: scd2`): every version of each row, not just the last.

A version is a row image with the binlog position of the change that wrote it
(`_binlake_offset`) and, once a later change of its key ends it, that change's position
(`_binlake_end_offset`); `_valid_from` and `_valid_to` are those changes' binlog commit times and
`_is_current` marks each key's live version (a deleted key has none). Versions are ordered by
binlog position, never by wall clock: two changes in one second keep their order.

Exactly once, by identity: a version is its key and its `_binlake_offset`, so a replayed batch
finds its versions there and inserts none again; the version a batch ends is the key's current
one only if it is older than the batch's first change, so a replay ends nothing twice.

A snapshot joins a history by comparing its rows with the current versions: a changed row ends
its version and starts one, a row the snapshot no longer holds ends its version, an unchanged
row keeps it. The snapshot cannot know when a row changed in between, so those versions carry
the join's time; rows of a table's first snapshot start at `_valid_from` NULL (held since before
binlake captured the table). A join cut short by a crash is undone before it runs again: the
join records, in a table property, the silver version it started from, and restores it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.errors import LakeError
from binlake.lake.paths import (
    END_OFFSET,
    HISTORY_COLUMNS,
    IS_CURRENT,
    OFFSET_COLUMN,
    VALID_FROM,
    VALID_TO,
)
from binlake.lake.tables import LakeTable, column_name, source_prefix
from binlake.model.schema import TableSchema

log = logging.getLogger(__name__)

#: Silver's table property naming the join in progress: `<its first HW>@<silver version>`.
JOIN_PROPERTY = "binlake.history.join"

_VERSION, _END = "version", "end"


def history_fields() -> list[T.StructField]:
    return [
        T.StructField(VALID_FROM, T.TimestampType()),
        T.StructField(VALID_TO, T.TimestampType()),
        T.StructField(IS_CURRENT, T.BooleanType()),
        T.StructField(END_OFFSET, T.StringType()),
    ]


def current_versions(silver: DataFrame) -> DataFrame:
    return silver.where(F.col(IS_CURRENT))


def merge_changes(
    silver: LakeTable, typed: DataFrame, names: list[str], key: tuple[str, ...], within: Column
) -> None:
    """A batch's typed changes into an scd2 silver, in one MERGE: each insert and update is a
    version (ended by the key's next change in the batch, if any), and each key's first change
    ends the version current before the batch. `within` names the batch's keys (a target-only
    predicate, for file skipping)."""
    s = source_prefix([*names, OFFSET_COLUMN, *HISTORY_COLUMNS])

    def source(name: str) -> Column:
        return F.col(column_name(s + name))

    image = F.when(F.col("_op") == "delete", F.col("_before")).otherwise(F.col("_after"))
    flat = typed.select(
        F.col("_op").alias(s),
        F.col("_offset").alias(s + OFFSET_COLUMN),
        F.timestamp_seconds("_ts").alias(s + VALID_FROM),
        image.alias("_image"),
    ).select(
        s, s + OFFSET_COLUMN, s + VALID_FROM,
        *[F.col(f"_image.{column_name(c)}").alias(s + c) for c in names],
    )  # fmt: skip
    order = Window.partitionBy(*[source(k) for k in key]).orderBy(source(OFFSET_COLUMN))
    flat = (
        flat.withColumn(s + END_OFFSET, F.lead(source(OFFSET_COLUMN)).over(order))
        .withColumn(s + VALID_TO, F.lead(source(VALID_FROM)).over(order))
        .withColumn(s + IS_CURRENT, source(END_OFFSET).isNull())
        .withColumn("_first", F.row_number().over(order) == 1)
    )
    versions = flat.where(source("") != "delete").withColumn(s, F.lit(_VERSION))
    ends = flat.where("_first").withColumn(s, F.lit(_END))
    merged = versions.unionByName(ends).drop("_first")

    kind = source("")
    target_offset = F.col(column_name(OFFSET_COLUMN))
    same_key = F.lit(True)
    for k in key:
        same_key = same_key & (F.col(column_name(k)) == source(k))
    ends_current = (kind == _END) & F.col(IS_CURRENT) & (target_offset < source(OFFSET_COLUMN))
    is_version = (kind == _VERSION) & (target_offset == source(OFFSET_COLUMN))
    inserted = {column_name(c): source(c) for c in [*names, OFFSET_COLUMN, *HISTORY_COLUMNS]}
    (
        silver.merge(merged, within & same_key & (ends_current | is_version))
        .whenMatched(kind == _END)
        .update(_ended(source(VALID_FROM), source(OFFSET_COLUMN)))
        .whenNotMatched(kind == _VERSION)
        .insert(inserted)
        .merge()
    )


def end_current(spark: SparkSession, silver: LakeTable, offset: str, ts: float) -> None:
    """End every current version at the change at `offset` (token), written at `ts` (epoch
    seconds): a TRUNCATE, or the table dropped and created again. A replay ends nothing twice:
    the versions it would end are no longer current."""
    ended = _ended(F.timestamp_seconds(F.lit(ts)), F.lit(offset))
    silver.update(spark, ended, where=F.col(IS_CURRENT) & (F.col(OFFSET_COLUMN) < F.lit(offset)))


def _ended(at: Column, offset: Column) -> dict[str, Column]:
    return {VALID_TO: at, END_OFFSET: offset, IS_CURRENT: F.lit(False)}


def join_snapshot(
    spark: SparkSession, silver: LakeTable, rows: DataFrame, table: TableSchema, join: str
) -> None:
    """A snapshot's rows (data columns and `_binlake_offset`, their chunk's HW) into the history
    (see the module's docstring). `join` identifies this snapshot (its first HW): the join it
    names restarts from the silver version it began at."""
    _undo_unfinished(spark, silver, join, table.name)
    first = silver.read(spark).isEmpty()
    now = F.lit(datetime.now(UTC)).cast(T.TimestampType())
    names = [c for c in rows.columns if c != OFFSET_COLUMN]
    s = source_prefix([*names, *HISTORY_COLUMNS])

    def source(name: str) -> Column:
        return F.col(column_name(s + name))

    theirs = rows.select(*[F.col(column_name(c)).alias(s + c) for c in rows.columns])
    same_key = F.col(IS_CURRENT)
    for k in table.key:
        same_key = same_key & (F.col(column_name(k)) == source(k))
    if not first:
        unchanged = F.lit(True)
        for c in names:
            unchanged = unchanged & F.col(column_name(c)).eqNullSafe(source(c))
        (
            silver.merge(theirs, same_key)
            .whenMatched(~unchanged)
            .update(_ended(now, source(OFFSET_COLUMN)))
            .whenNotMatchedBySource(F.col(IS_CURRENT))
            .update(_ended(now, F.lit(join)))
            .merge()
        )
    started = F.lit(None).cast(T.TimestampType()) if first else now
    (
        silver.merge(theirs, same_key)
        .whenNotMatched()
        .insert(
            {
                **{column_name(c): source(c) for c in [*names, OFFSET_COLUMN]},
                VALID_FROM: started,
                VALID_TO: F.lit(None).cast(T.TimestampType()),
                IS_CURRENT: F.lit(True),
                END_OFFSET: F.lit(None).cast(T.StringType()),
            }
        )
        .merge()
    )
    log.info("silver %s: the snapshot joined its history (scd2)", table.qualified)


def _undo_unfinished(spark: SparkSession, silver: LakeTable, join: str, name: str) -> None:
    """Restore silver to where this join began if it began before (a crash cut it short), else
    record where it begins: the property's own commit, the next version."""
    begun = silver.properties(spark).get(JOIN_PROPERTY, "")
    if begun.startswith(join + "@"):
        version = int(begun.rsplit("@", 1)[1])
        if _version(spark, silver) != version:
            _restore(spark, silver, version, name)
        return
    version = _version(spark, silver) + 1
    spark.sql(
        f"ALTER TABLE {silver.sql} SET TBLPROPERTIES ('{JOIN_PROPERTY}' = '{join}@{version}')"
    )


def _version(spark: SparkSession, silver: LakeTable) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {silver.sql} LIMIT 1").first()["version"])  # type: ignore[index]


def _restore(spark: SparkSession, silver: LakeTable, version: int, name: str) -> None:
    try:
        spark.sql(f"RESTORE TABLE {silver.sql} TO VERSION AS OF {version}")
    except Exception as exc:  # Delta's own error: the version's files are gone (VACUUM)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LakeError(
            f"{silver} cannot go back to version {version}, where the unfinished join of its "
            f"snapshot began ({first}); snapshot the table again: "
            f"`binlake snapshot --tables {name} --reset`, then stream"
        ) from None
    log.info("%s: restored to version %d, where its unfinished join began", silver, version)
