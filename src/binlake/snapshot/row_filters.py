"""Row filters (`source.row_filters`): only the rows a table's predicate holds land.

The predicate is Spark SQL over the table's columns, evaluated by Spark on typed values, so the
snapshot and the stream judge a row the same way: a chunk's rows are filtered after its binlog
window is replayed onto them (the chunk stays exact at its high watermark, then keeps the rows
the predicate holds), and each binlog change is judged on both its images. An update whose row
leaves the filter is a delete (of its before image), one whose row enters it is an insert, one
outside before and after is dropped; a row the predicate cannot judge (NULL) is outside. Exact
under racing writes for the same reason the snapshot is: every change after a chunk's high
watermark reaches silver, now as what it does to the filtered table. The filter names columns,
and follows no rename: a DDL that drops or renames a column it reads stops the stream
(`silver.schema_follow`, which asks `columns_read`).
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config.settings import Config
from binlake.errors import ConfigError
from binlake.lake.tables import column_name, source_prefix
from binlake.model.schema import TableSchema
from binlake.model.typemap import spark_schema


def holds(predicate: str) -> Column:
    """Whether a row is inside the filter: NULL (a value it cannot judge) is outside."""
    return F.coalesce(F.expr(predicate), F.lit(False))


def filtered_rows(rows: DataFrame, config: Config, table: str) -> DataFrame:
    """`rows` (the table's columns by name, and others) without those `table`'s filter drops."""
    predicate = config.source.row_filter_of(table)
    return rows if predicate is None else rows.where(holds(predicate))


def filtered_changes(typed: DataFrame, columns: T.StructType, predicate: str) -> DataFrame:
    """Typed change records (see `silver.typed_changes`) as changes of the filtered table: each
    image judged by `predicate`, the operation rewritten by where the row was and went, and an
    image outside the filter left out (NULL)."""
    names = columns.fieldNames()
    s = source_prefix([*names, *typed.columns])

    def own(name: str) -> Column:
        return F.col(column_name(s + name))

    judged = typed.select(*[F.col(column_name(c)).alias(s + c) for c in typed.columns])
    for image in ("_before", "_after"):
        fields = [own(image)[n].alias(n) for n in names]
        inside = own(image).isNotNull() & holds(predicate)
        judged = judged.select("*", *fields).withColumn(s + "in" + image, inside).drop(*names)
    was, now = own("in_before"), own("in_after")
    rewritten = {
        "_op": F.when(was & now, own("_op")).when(was, F.lit("delete")).otherwise(F.lit("insert")),
        "_before": F.when(was, own("_before")),
        "_after": F.when(now, own("_after")),
    }
    return judged.where(was | now).select(
        *[rewritten.get(c, own(c)).alias(c) for c in typed.columns]
    )


def check_row_filters(spark: SparkSession, config: Config, tables: list[TableSchema]) -> None:
    """Refuse a predicate Spark cannot evaluate on its table's columns (a misspelt column, a
    syntax error, a value of the wrong kind, a column the table has lost), before any work."""
    for table in tables:
        predicate = config.source.row_filter_of(table.qualified)
        if predicate is None:
            continue
        refusal = _refusal(spark, spark_schema(table), predicate)
        if refusal is not None:
            raise ConfigError(
                f"source.row_filters of {table.qualified}: {predicate!r} is not a predicate on "
                f"its columns ({refusal}). Renamed or dropped since? Name the columns it has "
                "now (or drop the filter), then snapshot the table again under the new filter: "
                f"`binlake snapshot --tables {table.name} --reset`"
            )


def columns_read(
    spark: SparkSession, predicate: str, table: TableSchema, names: Iterable[str]
) -> list[str]:
    """Those of `names` (columns of `table`) that `predicate` reads: the ones without which
    Spark's analysis of it fails. Spark's own resolution, not a parse of the text: a name in a
    string literal, a function of the same name or a column of another case is judged as the
    stream's filter judges it."""
    schema = spark_schema(table)
    return [
        name for name in names
        if _refusal(
            spark,
            T.StructType([f for f in schema.fields if f.name.lower() != name.lower()]),
            predicate,
        ) is not None
    ]  # fmt: skip


def _refusal(spark: SparkSession, columns: T.StructType, predicate: str) -> str | None:
    """Why Spark cannot evaluate `predicate` on rows of `columns` (the first line of its
    analysis error); None: it can."""
    try:
        # `.schema` asks for the analysis, which Spark Connect runs lazily.
        _ = spark.createDataFrame([], columns).where(holds(predicate)).schema
    except PySparkException as exc:
        return str(exc).strip().splitlines()[0]
    return None
