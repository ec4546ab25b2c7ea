"""Silver follows a table's DDL: `stream.schema_changes` decides how (see the README's table).

`lenient` never loses a column: an added column is added, a dropped one stays (NULL in rows
written from then on), a renamed one is added under its new name (filled from the old one) and the
old one stays. `evolve` mirrors the source: drops and renames become Delta column-mapping drops
and renames. Both widen a column in place (Delta type widening). A change silver cannot follow (a
new row key, a narrowed or incompatible type), or any change under `stop`, stops the stream
before the DDL with a `SchemaChangeError` that names the table, the change, the binlog offset and
the remedy. The changelog only grows: new columns join its images (`mergeSchema` on append).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config import Config
from binlake.errors import SchemaChangeError
from binlake.lake import LakeTable, column_mapping, column_name
from binlake.offsets import BinlogOffset
from binlake.schema_changes import ColumnChange, column_changes, unapplicable
from binlake.silver import changelog_table, data_columns, ensure_silver, silver_table
from binlake.source import TableSchema
from binlake.typemap import spark_schema

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaChangeRecord:
    """A DDL row of the change record (see `change_record`)."""

    table: str
    offset: BinlogOffset
    statement: str
    kind: str
    before: TableSchema | None
    after: TableSchema | None

    @property
    def name(self) -> str:
        return self.table.split(".", 1)[1]

    def where(self) -> str:
        return f"at {self.offset} ({' '.join(self.statement.split())[:160]})"


def apply_schema_change(spark: SparkSession, config: Config, change: SchemaChangeRecord) -> None:
    """Change silver as `change` and `stream.schema_changes` say (or raise before changing it)."""
    if change.kind == "truncate" and change.after is not None:
        silver_table(config, change.after).delta(spark).delete()
        log.info("%s truncated %s: silver emptied", change.table, change.where())
    elif change.kind == "park":
        log.info(
            "%s renamed to its shadow name %s (an online schema-change tool's cut-over): silver "
            "waits for the table that takes the name back",
            change.table, change.where(),
        )  # fmt: skip
    elif change.after is None:
        log.warning(
            "%s is gone %s: binlake stops capturing it; its silver table is kept",
            change.table, change.where(),
        )  # fmt: skip
    elif change.before is None:
        _bring_in(spark, config, change, change.after)
    else:
        _alter(spark, config, change, change.before, change.after)


def _remedy(change: SchemaChangeRecord) -> str:
    return f"re-snapshot it with `binlake snapshot --tables {change.name} --reset`"


def _alter(
    spark: SparkSession,
    config: Config,
    change: SchemaChangeRecord,
    before: TableSchema,
    after: TableSchema,
) -> None:
    changes = column_changes(before, after, change.statement)
    if not changes and before.key == after.key:
        return
    described = ", ".join(c.describe() for c in changes) or "a new row key"
    reason = unapplicable(before, after, changes)
    if reason:
        raise SchemaChangeError(
            f"{change.table} changed {change.where()}: {described}; silver cannot follow: "
            f"{reason}. The stream stopped before that change: {_remedy(change)}"
        )
    if config.stream.schema_changes == "stop":
        raise SchemaChangeError(
            f"{change.table} changed {change.where()}: {described}; stream.schema_changes is "
            "stop, so the stream stopped before that change: set it to lenient or evolve to "
            f"apply it, or {_remedy(change)}"
        )
    silver = silver_table(config, after)
    for column_change in changes:
        _apply_column_change(spark, config, silver, after, column_change)
    how = " (an online schema-change tool's cut-over)" if change.kind == "swap" else ""
    log.info("%s changed %s%s: silver applied %s", change.table, change.where(), how, described)


def _apply_column_change(
    spark: SparkSession, config: Config, silver: LakeTable, after: TableSchema, change: ColumnChange
) -> None:
    evolve = config.stream.schema_changes == "evolve"
    if change.kind == "add":
        _add_column(spark, silver, after, change.column, change.new_type)
    elif change.kind == "drop" and evolve:
        _enable_column_mapping(spark, silver)
        spark.sql(f"ALTER TABLE {silver.sql} DROP COLUMN {column_name(change.column)}")
    elif change.kind == "rename" and change.old_name is not None:
        if evolve:
            _enable_column_mapping(spark, silver)
            spark.sql(
                f"ALTER TABLE {silver.sql} RENAME COLUMN {column_name(change.old_name)} TO "
                f"{column_name(change.column)}"
            )
        else:
            _add_column(spark, silver, after, change.column, change.old_type)
            silver.delta(spark).update(
                set={column_name(change.column): F.col(column_name(change.old_name))}
            )
    elif change.kind == "retype" and change.new_type is not None:
        _widen(spark, silver, change.column, change.new_type)
        changelog = changelog_table(config, after)
        if changelog.exists(spark):
            for side in ("_before", "_after"):
                _widen(spark, changelog, f"{side}.{column_name(change.column)}", change.new_type)


def _add_column(
    spark: SparkSession, silver: LakeTable, after: TableSchema, column: str, kind: T.DataType | None
) -> None:
    """Add `column` unless silver has it; existing rows take the source's literal default."""
    columns = data_columns(spark, silver)
    if columns is None or column in columns.fieldNames() or kind is None:
        return
    if column_mapping([column]):  # a name Delta takes only with columns mapped by name
        _enable_column_mapping(spark, silver)
    spark.sql(f"ALTER TABLE {silver.sql} ADD COLUMNS ({column_name(column)} {kind.simpleString()})")
    default = _literal_default(after, column)
    if default is not None:
        silver.delta(spark).update(set={column_name(column): F.lit(default).cast(kind)})


def _literal_default(table: TableSchema, column: str) -> str | None:
    """The column's default as text Spark can cast, or None (no default, or an expression such
    as CURRENT_TIMESTAMP, whose value for existing rows the server does not report)."""
    try:
        text = table.column(column).default
    except KeyError:
        return None
    if text is None or text.upper() == "NULL":
        return None
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text):
        return text
    log.warning(
        "%s.%s defaults to the expression %s: rows that existed before it was added read NULL "
        "in silver",
        table.qualified, column, text,
    )  # fmt: skip
    return None


def _enable_column_mapping(spark: SparkSession, table: LakeTable) -> None:
    spark.sql(
        f"ALTER TABLE {table.sql} SET TBLPROPERTIES ("
        "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5')"
    )


def _widen(spark: SparkSession, table: LakeTable, column: str, kind: T.DataType) -> None:
    spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"ALTER TABLE {table.sql} ALTER COLUMN {column} TYPE {kind.simpleString()}")


def _bring_in(
    spark: SparkSession, config: Config, change: SchemaChangeRecord, after: TableSchema
) -> None:
    """A table created (or renamed in) while streaming: captured from its DDL on."""
    silver = silver_table(config, after)
    if change.kind == "rename":
        raise SchemaChangeError(
            f"{change.table} appeared {change.where()} by a rename: its rows are not in the "
            f"binlog. Snapshot it with `binlake snapshot --tables {change.name}`; the stream "
            "then captures it"
        )
    if silver.exists(spark):
        # Created again after a DROP: the new table starts empty.
        silver.delta(spark).delete()
        for field in spark_schema(after).fields:
            _add_column(spark, silver, after, field.name, field.dataType)
    else:
        ensure_silver(spark, config, after, from_bronze=False)
    log.info("%s created %s: captured from its first row", change.table, change.where())
