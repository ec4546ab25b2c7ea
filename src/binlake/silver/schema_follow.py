"""Silver follows a table's DDL: `stream.schema_changes` decides how (the table of
docs/schema-changes.md#what-silver-does-with-each-change).

`lenient` never loses a column: an added column is added, a dropped one stays (NULL in rows
written from then on), a renamed one is added under its new name (filled from the old one) and the
old one stays. `evolve` mirrors the source: drops and renames become Delta column-mapping drops
and renames. Both widen a column in place (Delta type widening). A change silver cannot follow (a
new row key, a narrowed or incompatible type), or any change under `stop`, stops the stream
before the DDL with a `SchemaChangeError` that names the table, the change, the binlog offset and
the remedy; so does, in every mode, a DDL that drops or renames a column the table's row filter
reads, or gives it a column named like one of binlake's own in silver. The changelog only grows:
new columns join its images (`mergeSchema` on append).
Under `evolve` too, a routed table's DDL changes its route's silver as `lenient` does (the other
members may hold a column it drops or renames), and only its own rows (see `routes`).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config.settings import Config
from binlake.errors import SchemaChangeError, UnfollowableChange
from binlake.lake.paths import meta_columns
from binlake.lake.tables import (
    LakeTable,
    column_mapping,
    column_name,
    create_schemas,
    enable_column_mapping,
    widen,
)
from binlake.model.offsets import position_token
from binlake.model.schema import TableSchema
from binlake.model.typemap import spark_schema
from binlake.mysql.column_rules import lake_view, renamed_into_rule
from binlake.mysql.ddl import parse_ddl
from binlake.mysql.schema_changes import ColumnChange, column_changes, literal_default, unapplicable
from binlake.mysql.schema_history import SchemaChange
from binlake.silver.history import end_current
from binlake.silver.merge import (
    changelog_table,
    data_columns,
    ensure_silver,
    keeps_history,
    silver_table,
)
from binlake.silver.routes import Member, member_of, reconcile
from binlake.snapshot.row_filters import columns_read

log = logging.getLogger(__name__)


#: Silver's table property holding the position of the last DDL applied to it in full.
APPLIED_PROPERTY = "binlake.ddlApplied"
#: Silver's table property holding the position of the DDL whose columns renamed at once are
#: parked (see `_rename_at_once`).
RENAMING_PROPERTY = "binlake.ddlRenaming"


def apply_schema_change(spark: SparkSession, config: Config, change: SchemaChange) -> None:
    """Change silver as `change` and `stream.schema_changes` say (or raise before changing it).

    Exactly once across replays: a batch replayed after a crash meets its DDL again, possibly
    after later rows of the batch were merged. Silver records the last DDL it took in full
    (`APPLIED_PROPERTY`) and a DDL at or before it is skipped; a DDL cut short by a crash is
    redone, each step tolerating the part already done (no later rows were merged yet)."""
    arrival = renamed_into_rule(config.source, change)  # read on the source's names
    change = _as_landed(config, change)
    after = change.after
    if after is None:
        _gone(change)
        return
    if change.kind == "shadow":
        return  # only the table's shadow changed: silver follows at the cut-over
    _require_own_columns_free(config, change, after)
    if change.kind == "unfollowable":
        removed = getattr(parse_ddl(change.statement), "removes_rows", "a statement")
        raise UnfollowableChange(
            f"{change.table} changed {change.where()}: {removed} removes or replaces rows with no "
            "row events in the binlog, which silver cannot follow. The stream stopped before it: "
            f"{_remedy(change)}"
        )
    silver = silver_table(config, after)
    if silver.exists(spark) and _applied(spark, config, silver, change):
        log.info("%s %s: already in silver (a replayed batch)", change.table, change.where())
        return
    if change.kind == "truncate":
        _empty(spark, config, silver, change)
        log.info("%s truncated %s: silver emptied", change.table, change.where())
    elif change.before is None:
        _bring_in(spark, config, change, after)
    else:
        _alter(spark, config, change, change.before, after, arrival)
    if silver.exists(spark):
        token = position_token(change.offset, 0)
        key = _applied_property(config, change.table)
        spark.sql(f"ALTER TABLE {silver.sql} SET TBLPROPERTIES ('{key}' = '{token}')")


def _as_landed(config: Config, change: SchemaChange) -> SchemaChange:
    """The change as the lake sees it: its schemas through the table's column rules."""
    before, after = change.before, change.after
    return replace(
        change,
        before=None if before is None else lake_view(config.source, before),
        after=None if after is None else lake_view(config.source, after),
    )


def _empty(spark: SparkSession, config: Config, silver: LakeTable, change: SchemaChange) -> None:
    """The source's rows are gone at `change` (a TRUNCATE, the table created again): silver's
    rows are deleted, or an scd2 silver's current versions end there."""
    if keeps_history(config, change.table):
        end_current(spark, silver, position_token(change.offset, 0), change.ts)
    else:
        member = member_of(config, change.table)
        silver.delete(spark, None if member is None else member.rows)


def _gone(change: SchemaChange) -> None:
    if change.kind == "park":
        log.info(
            "%s renamed to its shadow name %s (an online schema-change tool's cut-over): silver "
            "waits for the table that takes the name back",
            change.table, change.where(),
        )  # fmt: skip
    else:
        log.warning(
            "%s is gone %s: binlake stops capturing it; its silver table is kept",
            change.table, change.where(),
        )  # fmt: skip


def _applied(spark: SparkSession, config: Config, silver: LakeTable, change: SchemaChange) -> bool:
    applied = applied_through(spark, config, silver, change.table)
    return applied is not None and applied >= position_token(change.offset, 0)


def applied_through(
    spark: SparkSession, config: Config, silver: LakeTable, table: str
) -> str | None:
    """The position token of the last DDL of `table` ("db.table") that `silver` took in full;
    None where it took none. Every row change of `table` before that DDL is in silver already:
    a batch's rows before its DDL are applied before the DDL is (`APPLIED_PROPERTY`)."""
    return silver.properties(spark).get(_applied_property(config, table))


def _applied_property(config: Config, table: str) -> str:
    """The property holding the last DDL of `table` ("db.table") silver took: a route's silver
    keeps one per member, whose DDLs are applied in each member's binlog order, not in one."""
    if member_of(config, table) is None:
        return APPLIED_PROPERTY
    return f"{APPLIED_PROPERTY}.{hashlib.sha256(table.encode()).hexdigest()[:16]}"


def _remedy(change: SchemaChange) -> str:
    return f"re-snapshot it with `binlake snapshot --tables {change.name} --reset`"


def _alter(
    spark: SparkSession,
    config: Config,
    change: SchemaChange,
    before: TableSchema,
    after: TableSchema,
    arrival: str | None = None,
) -> None:
    """Silver's columns follow `change`, or it raises before changing any. `arrival`: why the
    change cannot be followed under the column rules (`renamed_into_rule`): the table is read
    again through its rules rather than its raw column renamed onto a ruled name."""
    changes = column_changes(before, after, change.statement, *change.shadow)
    if arrival is None and not changes and before.key == after.key:
        return
    _require_filter_unmoved(spark, config, change, before, changes)
    described = ", ".join(c.describe() for c in changes) or "a new row key"
    if config.stream.schema_changes == "stop":
        raise SchemaChangeError(
            f"{change.table} changed {change.where()}: {described}; stream.schema_changes is "
            "stop, so the stream stopped before that change: set it to lenient or evolve to "
            f"apply it, or {_remedy(change)}"
        )
    if arrival is not None:
        raise UnfollowableChange(
            f"{change.table} changed {change.where()}: {arrival}. The stream stopped before "
            "that change, with silver unchanged"
        )
    reason = unapplicable(before, after, changes)
    if reason:
        raise UnfollowableChange(
            f"{change.table} changed {change.where()}: {described}; silver cannot follow: "
            f"{reason}. The stream stopped before that change: {_remedy(change)}"
        )
    moves = _interlocked(changes)
    if moves and member_of(config, after.qualified) is not None:
        raise UnfollowableChange(
            f"{change.table} changed {change.where()}: {described}; silver cannot follow: a "
            "route's silver is shared by its members, whose columns keep their names. The "
            f"stream stopped before that change: {_remedy(change)}"
        )
    silver = silver_table(config, after)
    if moves:
        _rename_at_once(spark, config, silver, change, after, moves)
    for column_change in changes:
        if column_change in moves:
            _follow_in_changelog(spark, config, after, column_change)
        else:
            _apply_column_change(spark, config, silver, after, column_change)
    how = " (an online schema-change tool's cut-over)" if change.kind == "swap" else ""
    log.info("%s changed %s%s: silver applied %s", change.table, change.where(), how, described)


def _require_own_columns_free(config: Config, change: SchemaChange, after: TableSchema) -> None:
    """Stop before a DDL that gives the table a column named like one of binlake's own in its
    silver (`meta_columns`: `_binlake_offset`, `_deleted_at`, ...), whose values would have
    nowhere to land (a table that has one is refused before any work: `prerequisites`)."""
    own = {c.lower() for c in meta_columns(config, change.table)}
    clash = [n for n in after.column_names if n.lower() in own]
    if clash:
        raise SchemaChangeError(
            f"{change.table} changed {change.where()}: it gives the table a column "
            f"{clash[0]!r}, a column binlake keeps in its silver table. The stream stopped "
            "before that change, with silver unchanged: rename or drop the column on the "
            f"source, then {_remedy(change)}"
        )


def _require_filter_unmoved(
    spark: SparkSession,
    config: Config,
    change: SchemaChange,
    before: TableSchema,
    changes: list[ColumnChange],
) -> None:
    """Stop before a DDL that drops or renames a column the table's row filter reads, in every
    `stream.schema_changes` mode. Silver holds the rows that column put inside the filter; read
    by name after the DDL (NULL under `lenient`, missing under `evolve`) it would judge every
    later change outside, or fail, and a filter renamed along with it would still be judged
    against the config's text at the next start. The filter is the user's to name anew."""
    predicate = config.source.row_filter_of(change.table)
    if predicate is None:
        return
    moved: dict[str, str] = {}  # the column's name before the DDL: what the DDL does to it
    for c in changes:
        if c.kind == "drop":
            moved[c.column] = "drops"
        elif c.kind == "rename" and c.old_name is not None:
            moved[c.old_name] = "renames"
    for name in columns_read(spark, predicate, before, moved):
        how = moved[name]
        raise SchemaChangeError(
            f"{change.table} changed {change.where()}: it {how} {name!r}, which its row filter "
            f"{predicate!r} (source.row_filters) reads. The stream stopped before that change, "
            "with silver unchanged: name the table's columns in the filter now (or drop it), "
            f"then {_remedy(change)}"
        )


def _interlocked(changes: list[ColumnChange]) -> list[ColumnChange]:
    """The renames that take a name another rename frees (a swap, a cycle or a chain of names
    in one ALTER): silver renames them at once (`_rename_at_once`), not one by one."""
    renames = [c for c in changes if c.kind == "rename" and c.old_name is not None]
    sources = {c.old_name.lower() for c in renames if c.old_name is not None}
    targets = {c.column.lower() for c in renames}
    return [
        c for c in renames
        if c.column.lower() in sources or (c.old_name or "").lower() in targets
    ]  # fmt: skip


def _rename_at_once(
    spark: SparkSession,
    config: Config,
    silver: LakeTable,
    change: SchemaChange,
    after: TableSchema,
    moves: list[ColumnChange],
) -> None:
    """Rename silver's columns as `moves` say, all at once, as the source did (Delta column
    mapping renames, in every mode: the values move with their names): each column first takes
    a parking name (`_parked`), then its new one. Under `lenient` a name the moves free and
    none takes (the `a` of `a` → `b`, `b` → `c`) stays, holding its values as before.

    A run cut short converges: the parking names show the first step's progress and a table
    property (`RENAMING_PROPERTY`), set once every column is parked, marks it done; no rows
    were merged after the DDL yet."""
    enable_column_mapping(spark, silver)
    marker = _renaming_property(config, change.table)
    token = position_token(change.offset, 0)
    if silver.properties(spark).get(marker) != token:
        held = data_columns(spark, silver, config, after.qualified) or T.StructType([])
        for move in moves:
            assert move.old_name is not None
            if _field(held, move.old_name) is not None and _field(held, _parked(move)) is None:
                _rename_column(spark, silver, move.old_name, _parked(move))
        spark.sql(f"ALTER TABLE {silver.sql} SET TBLPROPERTIES ('{marker}' = '{token}')")
    for move in moves:
        held = data_columns(spark, silver, config, after.qualified) or T.StructType([])
        if _field(held, _parked(move)) is None:
            continue  # renamed by a run cut short
        if _field(held, move.column) is not None:  # a lenient silver's dropped column
            _set_aside(spark, silver, "", move.column, held)
        _rename_column(spark, silver, _parked(move), move.column)
    if config.stream.schema_changes != "evolve":
        _keep_freed_names(spark, config, silver, after, moves)


def _keep_freed_names(
    spark: SparkSession,
    config: Config,
    silver: LakeTable,
    after: TableSchema,
    moves: list[ColumnChange],
) -> None:
    """`lenient` keeps a renamed column's old name: one no move took is added again, holding
    the values it held (now under the new name)."""
    taken = {move.column.lower() for move in moves}
    for move in moves:
        assert move.old_name is not None
        if move.old_name.lower() not in taken:
            _add_column(spark, config, silver, after, move.old_name, move.old_type)
            silver.update(spark, {column_name(move.old_name): F.col(column_name(move.column))})


def _parked(move: ColumnChange) -> str:
    """The name a column renamed at once with others holds between its two renames."""
    return f"{move.old_name}__renaming"


def _rename_column(spark: SparkSession, table: LakeTable, old: str, new: str) -> None:
    spark.sql(f"ALTER TABLE {table.sql} RENAME COLUMN {column_name(old)} TO {column_name(new)}")


def _renaming_property(config: Config, table: str) -> str:
    """The property marking the columns of `table`'s DDL at a position parked (see
    `_rename_at_once`); per member, like `_applied_property`."""
    return _applied_property(config, table).replace(APPLIED_PROPERTY, RENAMING_PROPERTY)


def _apply_column_change(
    spark: SparkSession, config: Config, silver: LakeTable, after: TableSchema, change: ColumnChange
) -> None:
    member = member_of(config, after.qualified)
    if member is not None:
        _apply_to_member(spark, config, silver, after, change, member)
        return
    evolve = config.stream.schema_changes == "evolve"
    held = data_columns(spark, silver, config, after.qualified) or T.StructType([])
    if change.kind == "add":
        _make_room(spark, silver, "", change.column, change.new_type, held)
        _add_column(spark, config, silver, after, change.column, change.new_type)
    elif change.kind == "drop" and evolve:
        if _field(held, change.column) is not None:  # else dropped by a run cut short
            enable_column_mapping(spark, silver)
            spark.sql(f"ALTER TABLE {silver.sql} DROP COLUMN {column_name(change.column)}")
    elif change.kind == "rename" and change.old_name is not None:
        if evolve:
            if _field(held, change.old_name) is not None:  # else renamed by a run cut short
                enable_column_mapping(spark, silver)
                spark.sql(
                    f"ALTER TABLE {silver.sql} RENAME COLUMN {column_name(change.old_name)} TO "
                    f"{column_name(change.column)}"
                )
        else:
            _make_room(spark, silver, "", change.column, change.old_type, held)
            _add_column(spark, config, silver, after, change.column, change.old_type)
            silver.update(spark, {column_name(change.column): F.col(column_name(change.old_name))})
    elif change.kind == "retype" and change.new_type is not None:
        held_type = _field(held, change.column)
        if held_type is not None and held_type.dataType != change.new_type:
            widen(spark, silver, column_name(change.column), change.new_type)
    _follow_in_changelog(spark, config, after, change)


def _apply_to_member(
    spark: SparkSession,
    config: Config,
    silver: LakeTable,
    after: TableSchema,
    change: ColumnChange,
    member: Member,
) -> None:
    """A routed table's column change, in its route's silver (see `routes`): a column is added
    or widened for every member, and only this member's rows take its default or a renamed
    column's values; a dropped column stays, the other members may hold it."""
    kind = change.old_type if change.kind == "rename" else change.new_type
    if change.kind != "drop" and kind is not None:
        held = data_columns(spark, silver, config, after.qualified) or T.StructType([])
        reconcile(spark, silver, held, after.qualified, [T.StructField(change.column, kind)])
    if change.kind == "add":
        _add_column(spark, config, silver, after, change.column, kind, member.rows)
    elif change.kind == "rename" and change.old_name is not None:
        moved = {column_name(change.column): F.col(column_name(change.old_name))}
        silver.update(spark, moved, where=member.rows)
    _follow_in_changelog(spark, config, after, change)


def _follow_in_changelog(
    spark: SparkSession, config: Config, after: TableSchema, change: ColumnChange
) -> None:
    """The changelog's images take a retyped column's new type, and room for an added or
    renamed one (the column itself joins them at its first append)."""
    if change.kind == "retype" and change.new_type is not None:
        changelog = changelog_table(config, after)
        for side in _image_sides_holding(spark, changelog, change.column):
            widen(spark, changelog, f"{side}.{column_name(change.column)}", change.new_type)
    if change.kind in ("add", "rename"):
        kind = change.new_type if change.kind == "add" else change.old_type
        _make_room_in_changelog(spark, config, after, change.column, kind)


def _make_room_in_changelog(
    spark: SparkSession, config: Config, after: TableSchema, column: str, kind: T.DataType | None
) -> None:
    """`_make_room` in the changelog's images, which keep every column they ever held."""
    changelog = changelog_table(config, after)
    for side in _image_sides_holding(spark, changelog, column):
        images = changelog.schema(spark)
        assert images is not None
        image = images[side].dataType
        assert isinstance(image, T.StructType)
        _make_room(spark, changelog, f"{side}.", column, kind, image)


def _field(columns: T.StructType, name: str) -> T.StructField | None:
    """The field named `name`, compared case-insensitively as Spark and MySQL do."""
    return next((f for f in columns.fields if f.name.lower() == name.lower()), None)


def _make_room(
    spark: SparkSession,
    table: LakeTable,
    prefix: str,
    column: str,
    kind: T.DataType | None,
    held: T.StructType,
) -> None:
    """A column the source adds under a name the table still holds with another type (dropped
    earlier and kept: by lenient silver, by the changelog's images) cannot take the new values:
    the old one is renamed `<name>__dropped_<n>`, keeping its values, and the name is free."""
    old = _field(held, column)
    if old is None or kind is None or old.dataType == kind:
        return  # free, or the same type: the column takes the new values (and its default)
    _set_aside(spark, table, prefix, column, held)


def _set_aside(
    spark: SparkSession, table: LakeTable, prefix: str, column: str, held: T.StructType
) -> None:
    """Rename the column `held` holds as `column` to `<name>__dropped_<n>` (the first free
    `n`), keeping its values: the name is free for another column."""
    old = _field(held, column)
    if old is None:
        return
    taken = {f.name.lower() for f in held.fields}
    aside = next(
        f"{old.name}__dropped_{n}" for n in range(1, 10_000)
        if f"{old.name}__dropped_{n}".lower() not in taken
    )  # fmt: skip
    enable_column_mapping(spark, table)
    spark.sql(
        f"ALTER TABLE {table.sql} RENAME COLUMN {prefix}{column_name(old.name)} TO "
        f"{column_name(aside)}"
    )
    log.info("%s: %s%s kept as %s (the source added a new %s)", table.sql, prefix, old.name,
             aside, old.name)  # fmt: skip


def _image_sides_holding(spark: SparkSession, changelog: LakeTable, column: str) -> list[str]:
    """The changelog's image structs that hold `column`: none before a row with it was appended
    (a column added, or renamed to, in this batch joins them at its first append)."""
    schema = changelog.schema(spark)
    return [
        field.name
        for field in (schema.fields if schema is not None else [])
        if field.name in ("_before", "_after")
        and isinstance(field.dataType, T.StructType)
        and any(f.name.lower() == column.lower() for f in field.dataType.fields)
    ]


def _add_column(
    spark: SparkSession,
    config: Config,
    silver: LakeTable,
    after: TableSchema,
    column: str,
    kind: T.DataType | None,
    rows: Column | None = None,
) -> None:
    """Add `column` unless silver has it; the rows silver holds (all written before the DDL:
    its later rows are merged after it) take the source's literal default, as the source's rows
    do. The default is set whether or not the column was just added, so a run cut short between
    the two converges; a column silver already held (a lenient drop, now added again) is set to
    the default or NULL, dropping the values of the column the source dropped. In a route's
    silver only the member's `rows` take the default."""
    columns = data_columns(spark, silver, config, after.qualified)
    if columns is None or kind is None:
        return
    held = _field(columns, column) is not None
    if not held:
        if column_mapping([column]):  # a name Delta takes only with columns mapped by name
            enable_column_mapping(spark, silver)
        kind_sql = kind.simpleString()
        spark.sql(f"ALTER TABLE {silver.sql} ADD COLUMNS ({column_name(column)} {kind_sql})")
    default = literal_default(after, column)
    if default is not None or held:
        if default is not None:
            log.warning(
                "silver %s: column %s takes the source's default %r in every row it holds: a "
                "rewrite of those rows, each recorded in its Change Data Feed as an update "
                "(pre- and post-image)", after.qualified, column, default,
            )  # fmt: skip
        value = F.lit(default).cast(kind)
        silver.update(spark, {column_name(column): value}, where=rows)


def _bring_in(
    spark: SparkSession, config: Config, change: SchemaChange, after: TableSchema
) -> None:
    """A table created (or renamed in) while streaming: captured from its DDL on."""
    silver = silver_table(config, after)
    if change.kind == "rename":
        raise UnfollowableChange(
            f"{change.table} appeared {change.where()} by a rename: its rows are not in the "
            f"binlog. Snapshot it with `binlake snapshot --tables {change.name}`; the stream "
            "then captures it"
        )
    if member_of(config, change.table) is not None:
        # A shard created (again): its rows in the route's silver are none from here on, and
        # its columns join silver's.
        ensure_silver(spark, config, after, from_bronze=False, replace=True)
        for field in spark_schema(after).fields:
            _make_room_in_changelog(spark, config, after, field.name, field.dataType)
    elif silver.exists(spark):
        # Created again (after a DROP, or by CREATE OR REPLACE): the new table starts empty, and
        # its Change Data Feed shows the old rows' deletes.
        _empty(spark, config, silver, change)
        held = data_columns(spark, silver, config, after.qualified) or T.StructType([])
        for field in spark_schema(after).fields:
            _make_room(spark, silver, "", field.name, field.dataType, held)
            _make_room_in_changelog(spark, config, after, field.name, field.dataType)
            same = _field(held, field.name)
            if same is None or same.dataType != field.dataType:
                _add_column(spark, config, silver, after, field.name, field.dataType)
    else:
        create_schemas(spark, config, [after.database])  # a database new to the job
        ensure_silver(spark, config, after, from_bronze=False)
    log.info("%s created %s: captured from its first row", change.table, change.where())
