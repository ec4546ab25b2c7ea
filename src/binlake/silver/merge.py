"""Silver: the live mirror of each source table, kept by one Delta MERGE per table per batch.

Per micro-batch and table: the filtered changes are typed against silver's columns, collapsed to
the last change of each key by binlog position and merged into silver (delete → delete,
insert/update → upsert), and appended to the bronze changelog (side by side when the batch is
large). Silver keeps `_binlake_offset`, the position of the change that last wrote each row,
and every MERGE clause requires the incoming change to be newer, so replaying a batch after a
crash changes nothing; the changelog append leaves out the changes it holds already (each is its
offset and operation), so a replayed batch, a join repeated at another position or a job started
again over a deleted checkpoint appends each change once. Silver has Change Data Feed on: its CDF
is the table's changelog for downstream jobs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config.settings import Config
from binlake.errors import LakeError
from binlake.lake.paths import (
    DELETED_COLUMN,
    END_OFFSET,
    IS_CURRENT,
    ROUTE_COLUMNS,
    VALID_TO,
    meta_columns,
)
from binlake.lake.table_layout import apply_layout
from binlake.lake.tables import (
    STATS_COLUMNS,
    STREAMED_TABLE_PROPERTIES,
    LakeTable,
    bronze_table,
    column_mapping,
    column_name,
    create_schemas,
    enable_column_mapping,
    lake_table,
    local_frame,
    source_prefix,
)
from binlake.model.schema import TableSchema
from binlake.model.typemap import spark_schema
from binlake.mysql.column_rules import lake_view
from binlake.silver.change_record import typed_image
from binlake.silver.change_summary import keys_of_batch, summary_of_changes, summary_of_records
from binlake.silver.file_sizes import creation_file_options, key_ordered
from binlake.silver.history import (
    OFFSET_COLUMN,
    current_versions,
    history_fields,
    join_snapshot,
    merge_changes,
)
from binlake.silver.routes import Member, member_of, reconcile, silver_name
from binlake.silver.spread import Spread
from binlake.snapshot.row_filters import filtered_changes

log = logging.getLogger(__name__)

#: From this many changes, a table's changelog append runs beside its MERGE: a large batch's two
#: writes overlap. Below it, both are a few small jobs and commits that would compete for the
#: cores, so the MERGE runs first and a small batch's latency is its commit
#: (`bench/results/merge-source-2026-12-05-spread.md`, docs/performance.md).
SIDE_BY_SIDE_CHANGES = 10_000


def silver_table(config: Config, table: TableSchema) -> LakeTable:
    """The silver table `table` lands in: its own, or its route's (`routes`)."""
    return lake_table(config.lake, "silver", *silver_name(config, table.qualified))


def changelog_table(config: Config, table: TableSchema) -> LakeTable:
    return lake_table(config.lake, "bronze", table.database, f"{table.name}__changelog")


def offset_token(file: Column, pos: Column, row: Column) -> Column:
    """Spark twin of `binlake.model.offsets.position_token` (same fixed-width, ordered format)."""
    sequence = F.regexp_extract(file, r"(\d+)(@\d+)?$", 1).cast("bigint")
    lineage = F.regexp_extract(file, r"@(\d+)$", 1)
    prefix = F.when(lineage == "", F.lit("")).otherwise(
        F.format_string("L%04d:", lineage.cast("int"))
    )
    return F.concat(prefix, F.format_string("%010d:%020d:%08d", sequence, pos, row))


def ensure_silver(
    spark: SparkSession,
    config: Config,
    table: TableSchema,
    from_bronze: bool,
    replace: bool = False,
    bronze_rows: int | None = None,
) -> None:
    """Create silver once, in one commit (two for names that need column mapping): from
    bronze (rows at their chunk's HW) or empty.

    Rows are laid out in key order, `file_sizes.SILVER_FILE_ROWS` per file, so each file covers
    a narrow, disjoint key range: a MERGE of a few changed keys then reads and touches only
    their files (Delta skips the others by their key statistics) instead of the whole table.
    Deletion vectors keep that layout: a MERGE marks a file's changed rows deleted instead of
    rewriting the file, so only the changed rows are written anew. A bronze known to fit one
    file (`bronze_rows`, from the ledger) is sorted in one task instead: the same layout,
    without range partitioning's sampling job and shuffle.
    """
    _ensure_silver(spark, config, table, from_bronze, replace, bronze_rows)
    apply_layout(spark, config, table, silver_table(config, table), cluster=True)


def _ensure_silver(
    spark: SparkSession,
    config: Config,
    table: TableSchema,
    from_bronze: bool,
    replace: bool,
    bronze_rows: int | None,
) -> None:
    table = lake_view(config.source, table)
    silver = silver_table(config, table)
    exists = silver.exists(spark)
    _require_history_as_configured(spark, config, table, silver, exists)
    member = member_of(config, table.qualified)
    if member is not None:
        replace = replace or not exists
        _ensure_member(spark, config, table, member, from_bronze, replace, bronze_rows)
        return
    if keeps_history(config, table.qualified):
        _ensure_history(spark, config, table, from_bronze, replace or not exists, exists)
        return
    soft = config.silver.deletes == "soft"
    if exists and not replace:
        if soft:
            _keep_deleted_rows(spark, silver)
        return
    columns = list(table.column_names)
    if from_bronze:
        rows = _bronze_rows(spark, config, table).select("*", *_deleted_column(config))
        initial = key_ordered(rows, table, bronze_rows)
    else:
        initial = local_frame(spark, [], _silver_schema(config, table))
    mapping = column_mapping(columns)
    if mapping and not exists and from_bronze:
        # Delta refuses a table's first commit holding rows when it maps columns by name and
        # has the Change Data Feed on (DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION): such a
        # table is created empty, then filled.
        _save_silver(local_frame(spark, [], initial.schema), silver, mapping, "error")
        exists = True
    _save_silver(initial, silver, mapping, "overwrite" if exists else "error")
    log.info("silver %s created (%s)", table.qualified, "from bronze" if from_bronze else "empty")


def _deleted_column(config: Config) -> list[Column]:
    """`_deleted_at` of live rows, with `silver.deletes: soft`."""
    soft = config.silver.deletes == "soft"
    return [F.lit(None).cast(T.TimestampType()).alias(DELETED_COLUMN)] if soft else []


def _silver_schema(config: Config, table: TableSchema, *leading: T.StructField) -> T.StructType:
    """The schema of an empty silver (of latest rows) of `table`."""
    meta = [T.StructField(OFFSET_COLUMN, T.StringType())]
    if config.silver.deletes == "soft":
        meta.append(T.StructField(DELETED_COLUMN, T.TimestampType()))
    return T.StructType([*leading, *spark_schema(table).fields, *meta])


def _ensure_member(
    spark: SparkSession,
    config: Config,
    table: TableSchema,
    member: Member,
    from_bronze: bool,
    replace: bool,
    bronze_rows: int | None,
) -> None:
    """A routed table's rows in its route's silver (see `routes`): the silver created empty by
    its first member, each member's columns reconciled with it, and the member's rows replaced
    by bronze's (or by none) in one commit that touches no other member's rows."""
    silver = silver_table(config, table)
    route = [T.StructField(c, T.StringType()) for c in ROUTE_COLUMNS]
    if not silver.exists(spark):
        create_schemas(spark, config, [silver_name(config, table.qualified)[0]])
        empty = local_frame(spark, [], _silver_schema(config, table, *route))
        _save_silver(empty, silver, column_mapping(list(table.column_names)), "error")
    elif config.silver.deletes == "soft":
        _keep_deleted_rows(spark, silver)
    held = silver.schema(spark)
    assert held is not None
    reconcile(spark, silver, held, table.qualified, spark_schema(table).fields)
    if not replace:
        return
    if from_bronze:
        rows = _bronze_rows(spark, config, table).select(
            *member.columns(), "*", *_deleted_column(config)
        )
        rows = key_ordered(rows, table, bronze_rows)
    else:
        rows = local_frame(spark, [], _silver_schema(config, table, *route))
    held = silver.schema(spark)
    assert held is not None
    silver.replace_rows(_conformed(rows, held), member.rows)
    log.info(
        "silver %s: the rows of %s replaced (%s)",
        silver, table.qualified, "from bronze" if from_bronze else "empty",
    )  # fmt: skip


def _conformed(rows: DataFrame, schema: T.StructType) -> DataFrame:
    """`rows` with every column of `schema`, in its order and types: NULL where `rows` has no
    such column (another member's)."""
    held = {name.lower(): name for name in rows.columns}
    return rows.select(
        *[
            (F.col(column_name(held[f.name.lower()])) if f.name.lower() in held else F.lit(None))
            .cast(f.dataType)
            .alias(f.name)
            for f in schema.fields
        ]
    )


def _bronze_rows(spark: SparkSession, config: Config, table: TableSchema) -> DataFrame:
    """Bronze's rows as silver takes them: the data columns and `_binlake_offset`, the position
    of their chunk's HW."""
    return (
        bronze_table(config, table)
        .read(spark)
        .select(
            *[F.col(column_name(c)) for c in table.column_names],
            offset_token(F.col("_hw_file"), F.col("_hw_pos"), F.lit(0)).alias(OFFSET_COLUMN),
        )
    )


def keeps_history(config: Config, table: str) -> bool:
    """Whether silver of `table` ("db.table") keeps every version (`silver.history: scd2`)."""
    return config.silver.history_of(table) == "scd2"


def _require_history_as_configured(
    spark: SparkSession, config: Config, table: TableSchema, silver: LakeTable, exists: bool
) -> None:
    """Refuse to treat an scd2 silver's versions as rows: its keys are not unique."""
    if not exists or keeps_history(config, table.qualified):
        return
    schema = silver.schema(spark)
    if schema is not None and END_OFFSET in schema.fieldNames():
        raise LakeError(
            f"silver of {table.qualified}, {silver}, keeps every version of its rows "
            "(silver.history: scd2), and the config now asks for latest: set silver.history "
            f"(or silver.history_tables) back to scd2 for {table.name}, or rebuild silver with "
            f"`binlake snapshot --tables {table.name} --reset`"
        )


def _ensure_history(
    spark: SparkSession,
    config: Config,
    table: TableSchema,
    from_bronze: bool,
    join: bool,
    exists: bool,
) -> None:
    """An scd2 silver: created empty, then a snapshot's rows joined into its history (see
    `silver_history`); a silver of latest rows turns into the history they start."""
    silver = silver_table(config, table)
    if not exists:
        fields = [*spark_schema(table).fields, T.StructField(OFFSET_COLUMN, T.StringType())]
        empty = local_frame(spark, [], T.StructType([*fields, *history_fields()]))
        _save_silver(empty, silver, column_mapping(list(table.column_names)), "error")
    else:
        _start_history(spark, silver, table)
    if from_bronze and join:
        rows = _bronze_rows(spark, config, table)
        first_hw = rows.agg(F.min(OFFSET_COLUMN)).first()[0] or ""  # type: ignore[index]
        join_snapshot(spark, silver, rows, table, first_hw)


def _start_history(spark: SparkSession, silver: LakeTable, table: TableSchema) -> None:
    """A silver made under `history: latest` turns into the history its rows start when the
    config turns scd2: each live row is its key's current version (valid since before binlake
    kept history), each soft-deleted one a version ended at its delete, whose `_deleted_at`
    column then goes. Each step finds out whether it ran, so a run cut short converges."""
    schema = silver.schema(spark)
    if schema is None:
        return
    names = schema.fieldNames()
    if END_OFFSET not in names:
        added = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in history_fields())
        spark.sql(f"ALTER TABLE {silver.sql} ADD COLUMNS ({added})")
        log.info("%s keeps every version of its rows from now on (silver.history: scd2)", silver)
    soft = DELETED_COLUMN in names and DELETED_COLUMN not in table.column_names
    unset = F.col(IS_CURRENT).isNull()
    if not silver.read(spark).where(unset).isEmpty():
        deleted = F.col(DELETED_COLUMN) if soft else F.lit(None).cast(T.TimestampType())
        silver.update(spark, {IS_CURRENT: deleted.isNull(), VALID_TO: deleted}, where=unset)
    if soft:
        enable_column_mapping(spark, silver)
        spark.sql(f"ALTER TABLE {silver.sql} DROP COLUMN {DELETED_COLUMN}")


def _keep_deleted_rows(spark: SparkSession, silver: LakeTable) -> None:
    """A silver made under `deletes: hard` gets `_deleted_at` when the config turns soft: its
    rows are live, the rows deleted before are gone, and deletes from now on are kept."""
    schema = silver.schema(spark)
    if schema is not None and DELETED_COLUMN not in schema.fieldNames():
        spark.sql(f"ALTER TABLE {silver.sql} ADD COLUMNS ({DELETED_COLUMN} TIMESTAMP)")
        log.info("%s keeps deleted rows from now on (%s)", silver, DELETED_COLUMN)


def _save_silver(frame: DataFrame, silver: LakeTable, mapping: dict[str, str], mode: str) -> None:
    silver.save(
        frame.write.format("delta")
        .option("delta.enableChangeDataFeed", "true")
        .option("delta.enableDeletionVectors", "true")
        .options(**STREAMED_TABLE_PROPERTIES)
        .options(**creation_file_options())
        .options(**mapping)
        .mode(mode)
        .option("overwriteSchema", "true")
    )


def require_silver(spark: SparkSession, config: Config, table: TableSchema) -> None:
    """Refuse to go on for a table the stream applies whose silver is gone (dropped or moved):
    rebuilt from bronze it would miss every change since the snapshot, and skipped it would
    miss the batch's."""
    silver = silver_table(config, table)
    if not silver.exists(spark):
        raise LakeError(
            f"silver of {table.qualified}, {silver}, is missing (dropped or moved?): the stream "
            "applies its changes to it and cannot go on without it; nothing was committed. "
            "Restore it (move it back, or Delta's RESTORE of a dropped catalog table), or "
            f"rebuild it: `binlake snapshot --tables {table.name} --reset`, then stream again"
        )


def data_columns(
    spark: SparkSession, silver: LakeTable, config: Config, table: str
) -> T.StructType | None:
    """Silver's data columns (its schema without binlake's columns: `meta_columns`) for `table`
    ("db.table"); None if there is no such silver table."""
    schema = silver.schema(spark)
    if schema is None:
        return None
    meta = meta_columns(config, table)
    return T.StructType([f for f in schema.fields if f.name not in meta])


def live_rows(silver: DataFrame, config: Config, table: str) -> DataFrame:
    """Silver's rows the source holds, for `table` ("db.table"): without the soft-deleted ones,
    or an scd2 silver's current versions; only its own in a route's silver."""
    member = member_of(config, table)
    if member is not None:
        silver = silver.where(member.rows)
    if keeps_history(config, table):
        return current_versions(silver)
    if config.silver.deletes == "soft" and DELETED_COLUMN in silver.columns:
        return silver.where(F.col(DELETED_COLUMN).isNull())
    return silver


def typed_changes(
    changes: DataFrame, columns: T.StructType, table: TableSchema | None = None
) -> DataFrame:
    """Change records with their images typed as `columns` (see `change_record`); `table`, the
    source's schema the images were written with, spells their keys."""
    keys = {name.lower(): name for name in table.column_names} if table is not None else None
    return changes.select(
        "_op", "_offset", "_file", "_pos", "_row", "_ts",
        typed_image(F.col("_before"), columns, keys).alias("_before"),
        typed_image(F.col("_after"), columns, keys).alias("_after"),
    )  # fmt: skip


#: The changelog's table properties at creation: a streamed table's, and statistics of the two
#: columns its rows are found by (binlake looks a batch's offsets up, readers a time range)
#: instead of Delta's default 32, which are mostly its images' fields and make each append
#: compute statistics nobody reads (docs/performance.md). Both are binlake's own columns, which
#: no schema change renames.
CHANGELOG_TABLE_PROPERTIES = {
    **STREAMED_TABLE_PROPERTIES,
    STATS_COLUMNS: ", ".join(map(column_name, (OFFSET_COLUMN, "_commit_ts"))),
}


class ChangelogEnds:
    """The newest change offset each changelog holds, where this run knows it: a table's
    changelog whose rows from a batch's first offset on were found absent holds, once the batch is
    appended, nothing newer than the batch's last. A later batch starting past it appends without
    reading the changelog for its own offsets (that read, with its Delta state, is a large part
    of a small append's cost).

    Kept for one run of the stream (the lease keeps other writers off its changelogs meanwhile)
    and filled only by appends that go through it, the joins' included, so it never says less
    than a changelog holds. A table not known yet is read (a first batch after a start, a replay,
    a new checkpoint behind the changelog)."""

    def __init__(self) -> None:
        self._newest: dict[str, str] = {}  # the changelog's table key -> offset token

    def hold_none_from(self, changelog: LakeTable, offset: str) -> bool:
        """Whether `changelog` is known to hold no change at or after `offset`."""
        newest = self._newest.get(str(changelog))
        return newest is not None and newest < offset

    def appended(self, changelog: LakeTable, newest: str | None) -> None:
        """`changelog`'s newest change is `newest` now; None: not known."""
        if newest is None:
            self._newest.pop(str(changelog), None)
        else:
            self._newest[str(changelog)] = newest


class TableApply:
    """One table's rows of a batch (or of a segment between two DDLs): the MERGE and the
    changelog append (side by side from `SIDE_BY_SIDE_CHANGES`).

    Both are idempotent by the offsets they compare: the MERGE updates only with newer
    changes, the changelog appends only changes it does not hold. Their fixed cost is one small
    aggregate (the count, key and offset ranges and, for a single-column key, the key list and
    whether any key repeats: a batch of distinct keys needs no collapse), computed on the driver
    from the change records where the batch's summary collected them (`records`), plus the two
    commits. The MERGE condition names the batch's keys (their list, or their range) as a
    target-only predicate, so Delta skips the silver files that cannot hold them instead of
    scanning the whole table.
    """

    def __init__(
        self,
        config: Config,
        table: TableSchema,
        columns: T.StructType,
        applied_before: tuple[str, str] | None = None,
        ends: ChangelogEnds | None = None,
        spread: Spread | None = None,
        records: Sequence[Row] | None = None,
    ) -> None:
        self.config = config
        self.table = lake_view(config.source, table)  # the images hold what lands
        self.columns = columns
        #: The offset range the batch's changes had when it was planned on a source replaced
        #: since (a failover, read again by GTID on the new one, at other offsets): the MERGE
        #: and the changelog append that hold a change of that range ran then, and are skipped.
        self.applied_before = applied_before
        self.member = member_of(config, table.qualified)
        self.ends = ends if ends is not None else ChangelogEnds()
        #: The table's row changes in the batch and how its partitions hold them, where known.
        self.spread = spread
        #: The change records `__call__` is given, where the batch's summary collected them
        #: (`sink.batch_summary`): their summary is computed from them, not by a Spark job.
        self.records = records

    def __call__(self, changes: DataFrame) -> int:
        if self.spread is not None and self.spread.tasks is not None:
            changes = changes.repartition(self.spread.tasks)
        # Typed once: the summary, the changelog and the MERGE each read it, and parsing the
        # JSON images is most of what reading it costs.
        typed = typed_changes(changes, self.columns, self.table)
        predicate = self.config.source.row_filter_of(self.table.qualified)
        if predicate is not None:
            typed = filtered_changes(typed, self.columns, predicate)
        typed = typed.persist()
        try:
            summary = self._collected_summary() or self.summarise(typed)
            count = int(summary["count"])
            if not count:
                return 0
            # Each is idempotent on its own, so a crash between them, or during either, is
            # replayed exactly whatever the order.
            spark = typed.sparkSession
            silver = silver_table(self.config, self.table)
            merge = not self._applied(silver, spark, self.member)
            append = not self._applied(changelog_table(self.config, self.table), spark)
            if count < SIDE_BY_SIDE_CHANGES or not (merge and append):
                if merge:  # first: a small batch's latency is its commit
                    self.merge_silver(typed, summary)
                if append:
                    self.append_changelog(typed, summary)
            else:
                with ThreadPoolExecutor(1, thread_name_prefix="binlake-changelog") as pool:
                    changelog = pool.submit(self.append_changelog, typed, summary)
                    self.merge_silver(typed, summary)
                    changelog.result()
            return count
        finally:
            typed.unpersist()

    def _applied(self, table: LakeTable, spark: SparkSession, member: Member | None = None) -> bool:
        """Whether `table` holds a change of `applied_before` (the write of that table ran):
        among `member`'s rows, in a route's silver."""
        if self.applied_before is None or not table.exists(spark):
            return False
        low, high = self.applied_before
        rows = table.read(spark)
        held = F.col(OFFSET_COLUMN).between(low, high)
        if END_OFFSET in rows.columns:  # an scd2 silver: a batch of deletes only ends versions
            held = held | F.col(END_OFFSET).between(low, high)
        if member is not None:
            held = held & member.rows
        return not rows.where(held).isEmpty()

    def _collected_summary(self) -> Mapping[str, Any] | None:
        """`summarise` of the collected `records`, where Python computes it exactly: no row filter
        (a Spark predicate) drops any of them, and every key column is of a type whose JSON value
        is the typed value (`summary_of_records`); else None."""
        if self.records is None or self.config.source.row_filter_of(self.table.qualified):
            return None
        return summary_of_records(self.records, self.table, self.columns)

    def summarise(self, typed: DataFrame) -> dict[str, Any]:
        """The changes' summary by Spark (`change_summary.summary_of_changes`)."""
        return summary_of_changes(typed, self.table, self.columns)

    def append_changelog(self, typed: DataFrame, summary: Mapping[str, Any]) -> None:
        """Append the changes the changelog does not hold: those of the batch's offset range
        it holds (a replay, a repeated join, a new checkpoint reading from an older offset)
        are read by their file statistics, usually none, and left out. Unless `ChangelogEnds`
        knows the changelog ends before the batch, its rows from the batch's first offset on are
        looked for first: none (the usual case) is a plain append after which its end is known."""
        changelog = changelog_table(self.config, self.table)
        rows = typed.select(
            "_op",
            F.col("_offset").alias(OFFSET_COLUMN),
            "_file",
            "_pos",
            "_row",
            F.timestamp_seconds("_ts").alias("_commit_ts"),
            "_before",
            "_after",
        )
        spark = typed.sparkSession
        low, high = summary["offset_lo"], summary["offset_hi"]
        existed = changelog.exists(spark)
        newest = high
        if existed and not self.ends.hold_none_from(changelog, low):
            ahead = changelog.read(spark).where(F.col(OFFSET_COLUMN) >= low)
            if not ahead.isEmpty():
                held = ahead.where(F.col(OFFSET_COLUMN) <= high).select(OFFSET_COLUMN, "_op")
                rows = rows.join(F.broadcast(held), [OFFSET_COLUMN, "_op"], "left_anti")
                newest = None  # it may hold changes past the batch
        changelog.save(
            rows.write.format("delta")
            .mode("append")
            .option("mergeSchema", "true")
            .options(**column_mapping(self.columns.fieldNames()))
            .options(**({} if existed else CHANGELOG_TABLE_PROPERTIES))
        )
        self.ends.appended(changelog, newest)
        if not existed:
            apply_layout(spark, self.config, self.table, changelog, cluster=False)

    def merge_silver(self, typed: DataFrame, summary: Mapping[str, Any]) -> None:
        """The batch's last change per key, merged into silver unless silver holds a newer one
        (a replayed batch changes nothing). Source columns are `s` + silver's name, the change's
        operation is `s` alone: `LakeTable.merge` names silver's columns unqualified."""
        silver = silver_table(self.config, self.table)
        if keeps_history(self.config, self.table.qualified):
            within = self._target_keys(summary)
            merge_changes(silver, typed, self.columns.fieldNames(), self.table.key, within)
            return
        names = [*self.columns.fieldNames(), OFFSET_COLUMN]
        s = source_prefix([*names, DELETED_COLUMN])
        image = F.when(F.col("_op") == "delete", F.col("_before")).otherwise(F.col("_after"))
        fields = [F.col(f"_image.{column_name(c)}").alias(s + c) for c in names[:-1]]
        flat = typed.select(
            F.col("_op").alias(s),
            F.col("_offset").alias(s + OFFSET_COLUMN),
            F.timestamp_seconds("_ts").alias(s + DELETED_COLUMN),
            image.alias("_image"),
        ).select(s, s + OFFSET_COLUMN, s + DELETED_COLUMN, *fields)
        collapsed = flat if summary["unique_keys"] else _last_per_key(flat, self.table.key, s)
        try:
            self.merge_from(silver, collapsed, summary, names, s)
        finally:
            if collapsed is not flat:
                collapsed.unpersist()

    def merge_from(
        self,
        silver: LakeTable,
        collapsed: DataFrame,
        summary: Mapping[str, Any],
        names: list[str],
        s: str,
    ) -> None:
        """The MERGE of `collapsed` (one change per key, columns named `s` + silver's)."""

        def source(name: str) -> Column:
            return F.col(column_name(s + name))

        on = self._target_keys(summary)
        for k in self.table.key:
            on = on & (F.col(column_name(k)) == source(k))
        values = {column_name(c): source(c) for c in names}
        if self.member is not None:  # a route's silver: only this member's rows are its rows
            on = self.member.rows & on
            values.update(self.member.values())
        newer = F.col(column_name(OFFSET_COLUMN)) < source(OFFSET_COLUMN)
        deleted = F.col(column_name(s)) == "delete"
        merge = silver.merge(collapsed, on)
        if self.config.silver.deletes == "soft":
            # A delete keeps the row as it was (its before image) with the delete's commit
            # time; a later insert of the key makes it live again. Like the upserts, each
            # clause needs a newer change, so a replay changes nothing.
            gone = {**values, column_name(DELETED_COLUMN): source(DELETED_COLUMN)}
            live = {**values, column_name(DELETED_COLUMN): F.lit(None).cast(T.TimestampType())}
            merge = (
                merge.whenMatched(deleted & newer)
                .update(gone)
                .whenMatched(~deleted & newer)
                .update(live)
                .whenNotMatched(deleted)
                .insert(gone)
                .whenNotMatched(~deleted)
                .insert(live)
            )
        elif summary["inserts_only"]:
            # Inserts alone, rows deleted for good: a key silver holds already it holds at this
            # insert's offset or a newer one (a replay, or a chunk that read the row after it).
            # A row held at an older offset was deleted in the source before the insert (keys are
            # unique), and that delete reached silver: the matched clauses could never fire.
            # Without them Delta appends what its anti-join with silver leaves, and rewrites no
            # file.
            merge = merge.whenNotMatched().insert(values)
        else:
            merge = (
                merge.whenMatched(deleted & newer)
                .delete()
                .whenMatched(~deleted & newer)
                .update(values)
                .whenNotMatched(~deleted)
                .insert(values)
            )
        merge.merge()

    def _target_keys(self, summary: Mapping[str, Any]) -> Column:
        """The batch's keys as a target-only predicate (`change_summary.keys_of_batch`)."""
        return keys_of_batch(summary, self.table.key, self.columns)


def _last_per_key(flat: DataFrame, key: tuple[str, ...], s: str) -> DataFrame:
    """Each key's last change of `flat` by offset, cached: Delta reads a MERGE's source twice
    and does not copy it (`spark.DETERMINISTIC_MERGE_SOURCES`), and this one costs a shuffle and
    a sort to compute. An offset is unique per row change, so the last is always the same one."""
    latest = Window.partitionBy(*[F.col(column_name(s + k)) for k in key]).orderBy(
        F.col(column_name(s + OFFSET_COLUMN)).desc()
    )
    return flat.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n").persist()


def timed(step: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = step(*args)
    return result, time.monotonic() - started
