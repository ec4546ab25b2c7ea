"""Where bronze, the changelog and silver live, and the one way to reach them: `LakeTable`.

Without `lake.catalog`, each is a Delta table at a path under `lake.root` (`PathTable`). With
it, each is a managed table of that catalog (`CatalogTable`): bronze and the changelog
`<catalog>.<bronze_schema>_<db>.<table>` (and `<table>__changelog`), silver
`<catalog>.<silver_schema>_<db>.<table>`, every part backtick-quoted. The ledger stays a Delta
table at a path under `lake.root` either way.

Callers build their `DataFrameWriter` (mode, options, table properties as `delta.*` options)
and hand it to `LakeTable.save`: a path table saves it at its path, a catalog table as the table
(`saveAsTable`), which Delta's catalog runs with the same semantics: `ignore` and `error`
(Spark Connect knows no `errorifexists`) create, `overwrite` with `replaceWhere` replaces those
rows, `overwrite` with `overwriteSchema` is a `CREATE OR REPLACE` that keeps the table and its
properties, `append` honours `mergeSchema`.

MERGE, UPDATE and DELETE go through Spark's own `DataFrame.mergeInto` and SQL, never
delta-spark's `DeltaTable`, which needs a server plugin on Spark Connect (serverless, standard
access mode): `LakeTable.merge`, `update`, `delete`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from binlake.config.settings import Config, LakeConfig
from binlake.errors import ConfigError, LakeError
from binlake.lake.files import driver_files, join
from binlake.model.schema import TableSchema
from binlake.model.typemap import spark_schema

if TYPE_CHECKING:
    from pyspark.sql.merge import MergeIntoWriter

Layer = Literal["bronze", "silver"]
_Opened = TypeVar("_Opened")


class LakeTable(ABC):
    """One Delta table of the lake, by path or by catalog name."""

    @property
    @abstractmethod
    def sql(self) -> str:
        """The table in SQL text (`ALTER TABLE <sql> ...`), quoted."""

    @abstractmethod
    def schema(self, spark: SparkSession) -> StructType | None:
        """The table's schema now; None if there is no such table."""

    @abstractmethod
    def save(self, writer: DataFrameWriter) -> None:
        """Run `writer` (a Delta writer with its mode and options) into this table."""

    @abstractmethod
    def _read(self, spark: SparkSession, options: dict[str, str]) -> DataFrame: ...

    def exists(self, spark: SparkSession) -> bool:
        return self.schema(spark) is not None

    def read(self, spark: SparkSession, **options: str) -> DataFrame:
        """The table (its current version; Delta's reader `options` may ask for another, or for
        its Change Data Feed)."""
        return self._existing(spark, lambda session: self._read(session, options))

    @abstractmethod
    def replace_chunks(
        self,
        spark: SparkSession,
        rows: DataFrame,
        chunk_ids: list[int],
        options: dict[str, str],
        from_id: int | None = None,
    ) -> None:
        """Replace bronze's rows of `chunk_ids` (and of every chunk id from `from_id` up) with
        `rows` in one commit (a retried batch replaces, never duplicates); a missing table is
        created with `options`. Observations of `rows` (the chunk reports) are delivered: Spark
        delivers none from a create-as-select, nor from a catalog table's `saveAsTable`
        overwrite."""

    def replace_rows(self, rows: DataFrame, where: Column) -> None:
        """Replace the rows `where` holds (an expression of the table's columns and literals)
        with `rows`, in one commit (Spark's V2 overwrite-by-condition)."""
        rows.writeTo(self.sql).overwrite(where)

    def merge(self, source: DataFrame, on: Column) -> MergeIntoWriter:
        """A MERGE of `source` into this table. `on` and the clauses name this table's columns
        unqualified, so `source`'s columns must have other names (`source_prefix`)."""
        return source.mergeInto(self.sql, on)

    def update(
        self, spark: SparkSession, values: dict[str, Column], where: Column | None = None
    ) -> None:
        """Set columns of every row, or of the rows `where` holds (`values`: quoted column name
        → an expression of the row's own columns and literals). A MERGE of one row that matches
        them: Delta's SQL UPDATE takes no parameters, and a value (a column's DEFAULT) is never
        SQL text."""
        on = F.lit(True) if where is None else where
        self.merge(self._one_row(spark), on).whenMatched().update(values).merge()

    def delete(self, spark: SparkSession, where: Column | None = None) -> None:
        """Delete every row, or the rows `where` holds (an expression of the row's columns and
        literals)."""
        if where is None:
            spark.sql(f"DELETE FROM {self.sql}")
            return
        self.merge(self._one_row(spark), where).whenMatched().delete().merge()

    def _one_row(self, spark: SparkSession) -> DataFrame:
        """A MERGE source of one row, matching whatever the condition holds; its one column
        is named apart from this table's."""
        return spark.range(1).select(F.lit(None).alias(source_prefix(self.read(spark).columns)))

    def properties(self, spark: SparkSession) -> dict[str, str]:
        """The table's properties (`TBLPROPERTIES`)."""
        detail = spark.sql(f"DESCRIBE DETAIL {self.sql}").select("properties").first()
        return dict(detail[0] or {}) if detail else {}

    def size(self, spark: SparkSession) -> TableSize | None:
        """The table's current files, their bytes and count (Delta's own figures, from its log:
        no file is listed or read); None if there is no such Delta table."""
        try:
            detail = spark.sql(f"DESCRIBE DETAIL {self.sql}").first()
        except AnalysisException:
            return None
        if detail is None or detail["format"] != "delta" or detail["sizeInBytes"] is None:
            return None
        return TableSize(int(detail["sizeInBytes"]), int(detail["numFiles"] or 0))

    def _existing(self, spark: SparkSession, open_: Callable[[SparkSession], _Opened]) -> _Opened:
        """`open_(spark)`, or a `LakeError` that names the table if it does not exist (Spark's
        own error names a path or an identifier without saying what it is for)."""
        try:
            return open_(spark)
        except AnalysisException:
            if self.exists(spark):
                raise
        raise LakeError(
            f"{self} does not exist: `binlake snapshot` creates bronze, `binlake stream` "
            "silver and the changelog (was it dropped or moved?)"
        )


@dataclass(frozen=True)
class TableSize:
    """A Delta table's current data files: their bytes and how many there are."""

    bytes: int
    files: int

    def rewritten(self, changes: int) -> int:
        """About the bytes a MERGE of `changes` row changes rewrites if it rewrites the files it
        touches: a key's row lives in one file, so each change touches at most one, taken at
        the table's average file size (one far larger than the rest makes this low)."""
        if self.files == 0:
            return 0
        return min(self.bytes, changes * -(-self.bytes // self.files))


@dataclass(frozen=True)
class PathTable(LakeTable):
    """A Delta table at a path or URI."""

    path: str

    def __str__(self) -> str:
        return f"the Delta table at {self.path}"

    @property
    def sql(self) -> str:
        return "delta.`" + self.path.replace("`", "``") + "`"

    def schema(self, spark: SparkSession) -> StructType | None:
        """Not `DeltaTable.isDeltaTable`: it caches a negative answer per path for the session,
        so a table another process creates later (a snapshot job while `status` runs in a
        notebook) stays invisible. Resolving the schema re-lists the Delta log.

        A path without a Delta log is answered without asking Delta where the file system can
        say so (`LakeFiles.surely_absent`): on a classic driver, Spark's error for it is
        classified by PySpark through py4j, which is slow enough to matter on a snapshot's or a
        stream's first look at each of many tables."""
        if driver_files(spark).surely_absent(join(self.path, "_delta_log")):
            return None
        try:
            return self._read(spark, {}).schema
        except AnalysisException:
            return None

    def save(self, writer: DataFrameWriter) -> None:
        writer.save(self.path)

    def _read(self, spark: SparkSession, options: dict[str, str]) -> DataFrame:
        return spark.read.format("delta").options(**options).load(self.path)

    def replace_chunks(
        self,
        spark: SparkSession,
        rows: DataFrame,
        chunk_ids: list[int],
        options: dict[str, str],
        from_id: int | None = None,
    ) -> None:
        writer = rows.write.format("delta")
        if self.exists(spark):
            where = _chunks_where(chunk_ids, from_id)
            writer = writer.mode("overwrite").option("replaceWhere", where)
        else:
            # The table's first commit creates it, holding its first batch: an empty table
            # first would cost a second Delta commit per table, which dominates small tables.
            # Nothing of this table has committed yet (one thread writes a table), and `error`
            # refuses to replace one that appeared meanwhile.
            writer = writer.mode("error").options(**options)
        writer.save(self.path)


@dataclass(frozen=True)
class CatalogTable(LakeTable):
    """A managed Delta table of a catalog: `catalog.schema.name`."""

    catalog: str
    schema_name: str
    name: str

    def __str__(self) -> str:
        return f"the table {self.sql}"

    @property
    def sql(self) -> str:
        return ".".join(column_name(part) for part in (self.catalog, self.schema_name, self.name))

    def schema(self, spark: SparkSession) -> StructType | None:
        """Asks the catalog first: reading a missing table by name raises after a slow
        analysis, and the catalog answers for tables other sessions created too."""
        if not spark.catalog.tableExists(self.sql):
            return None
        try:
            return self._read(spark, {}).schema
        except AnalysisException:  # dropped in between
            return None

    def save(self, writer: DataFrameWriter) -> None:
        writer.saveAsTable(self.sql)

    def _read(self, spark: SparkSession, options: dict[str, str]) -> DataFrame:
        return spark.read.format("delta").options(**options).table(self.sql)

    def replace_chunks(
        self,
        spark: SparkSession,
        rows: DataFrame,
        chunk_ids: list[int],
        options: dict[str, str],
        from_id: int | None = None,
    ) -> None:
        """Created empty first, then written with Spark's V2 overwrite-by-condition: the only
        catalog writes whose observations Spark delivers."""
        if not self.exists(spark):
            empty = local_frame(spark, [], rows.schema).write.format("delta")
            self.save(empty.mode("ignore").options(**options))
        rows.writeTo(self.sql).overwrite(F.expr(_chunks_where(chunk_ids, from_id)))


def _chunks_where(chunk_ids: list[int], from_id: int | None) -> str:
    """`replace_chunks`' condition as SQL text: it holds integers only, never user values."""
    where = f"_chunk_id IN ({', '.join(str(int(i)) for i in chunk_ids)})"
    return where if from_id is None else f"{where} OR _chunk_id >= {int(from_id)}"


#: How `to_arrow_schema` is asked for UTC timestamps: Spark 4.2 takes a `timezone`, Spark 4.0 (the
#: LTS runtime) has none and gives UTC already.
_UTC_ARROW: dict[str, Any] = (
    {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters else {}
)


def local_frame(
    spark: SparkSession, rows: Sequence[Sequence[object]], schema: StructType
) -> DataFrame:
    """`rows` (tuples in `schema`'s column order, made on the driver; none for an empty table)
    as a DataFrame of `schema`, handed to Spark as one Arrow table.

    Not `createDataFrame(rows)`: on a classic driver that is a Python RDD, and every job over it
    runs Python workers to unpickle the rows, one task per default partition: a small append
    (a ledger mark, an event) costs less than half as much through Arrow
    (docs/performance.md#measured-constants).
    A Spark Connect client sends Arrow either way."""
    arrow = to_arrow_schema(schema, **_UTC_ARROW)
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(arrow)
    table = pa.Table.from_arrays(
        [pa.array(values, field.type) for values, field in zip(columns, arrow, strict=True)],
        schema=arrow,
    )
    return spark.createDataFrame(table, schema)


def enable_column_mapping(spark: SparkSession, table: LakeTable) -> None:
    """Columns mapped by name: what Delta needs to drop or rename a column, or to take a name
    Parquet cannot hold."""
    spark.sql(
        f"ALTER TABLE {table.sql} SET TBLPROPERTIES ("
        "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5')"
    )


def widen(spark: SparkSession, table: LakeTable, column: str, kind: T.DataType) -> None:
    """Widen `column` (quoted, or a quoted path into a struct) to `kind` in place (Delta type
    widening: no file is rewritten)."""
    spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"ALTER TABLE {table.sql} ALTER COLUMN {column} TYPE {kind.simpleString()}")


def source_prefix(target_columns: Iterable[str]) -> str:
    """A prefix for a MERGE source's column names that no target column starts with: the
    target's columns are named unqualified in `LakeTable.merge`, so no name may be both."""
    prefix = "_s_"
    while any(name.startswith(prefix) for name in target_columns):
        prefix = "_" + prefix
    return prefix


def lake_table(lake: LakeConfig, layer: Layer, database: str, name: str) -> LakeTable:
    """Table `name` of source database `database` in the lake's `layer` (the changelog is a
    bronze table, `<table>__changelog`)."""
    if lake.catalog is None:
        return PathTable(lake.path(layer, database, name))
    problem = LakeConfig.name_problem(name)
    if problem:
        raise ConfigError(
            f"lake.catalog is set, but {database}.{name} cannot be a catalog table: its name "
            f"{problem}"
        )
    return CatalogTable(lake.catalog, lake.catalog_schema(layer, database), name)


#: Bronze's own columns after the table's: the chunk a row was read in and that chunk's HW.
BRONZE_COLUMNS = T.StructType(
    [
        T.StructField("_chunk_id", T.IntegerType(), True),
        T.StructField("_hw_file", T.StringType(), True),
        T.StructField("_hw_pos", T.LongType(), True),
    ]
)


def bronze_table(config: Config, table: TableSchema) -> LakeTable:
    return lake_table(config.lake, "bronze", table.database, table.name)


def bronze_schema(table: TableSchema) -> T.StructType:
    return T.StructType(spark_schema(table).fields + BRONZE_COLUMNS.fields)


def create_schemas(spark: SparkSession, config: Config, databases: Iterable[str]) -> None:
    """With `lake.catalog`, the bronze and silver schemas of `databases` (and the event log's)
    unless they exist (managed by the catalog: no location); nothing to create for path tables.
    An existing schema is not created again, so a job whose schemas were made for it (the
    bundle's) needs no CREATE SCHEMA on the catalog."""
    lake = config.lake
    if lake.catalog is None:
        return
    layers: tuple[Layer, ...] = ("bronze", "silver")
    schemas = {lake.catalog_schema(layer, d) for d in databases for layer in layers}
    if lake.event_log:
        schemas.add(events_schema(config))
    for schema in sorted(schemas):
        name = f"{column_name(lake.catalog)}.{column_name(schema)}"
        if not spark.catalog.databaseExists(name):
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {name}")


def events_schema(config: Config) -> str:
    """The catalog schema of the event log: `source.database`'s silver schema, or with several
    databases `lake.silver_schema` itself."""
    database = config.source.database
    lake = config.lake
    return lake.silver_schema if database is None else lake.catalog_schema("silver", database)


def column_name(name: str) -> str:
    """A name as Spark parses it (`F.col`, MERGE assignments, SQL text): backtick-quoted,
    backticks doubled, so a dot or a space stays part of the name instead of reaching into a
    struct or ending it."""
    return "`" + name.replace("`", "``") + "`"


#: Characters Delta refuses in column names unless the table maps its columns by name.
_UNMAPPED_FORBIDDEN = frozenset(" ,;{}()\n\t=")


#: Table properties silver and the changelog are created with: the tables a stream commits to in
#: every batch. Delta writes a checkpoint every `checkpointInterval` commits, in the thread that
#: committed, and at its default (10) every tenth batch paid for one, which showed in the stream's
#: p95 latency (docs/performance.md#measured-constants). The price is a cold start's log replay of
#: up to 99 small JSON commits instead of 9. A table's `lake.table_layout` properties, set after
#: creation, take precedence.
STREAMED_TABLE_PROPERTIES = {"delta.checkpointInterval": "100"}

#: The Delta table property naming the columns whose statistics each new file's entry holds.
STATS_COLUMNS = "delta.dataSkippingStatsColumns"

#: The statistics bronze keeps. By default Delta gathers the min, max and null count of a new
#: file's first 32 columns as it writes it, a large share of a wide snapshot's write (1M rows of
#: 18 columns, 2 cores: binlake p2 1.22x faster, a plain Spark JDBC copy 1.41x, with one column's
#: statistics). Bronze is filtered by `_chunk_id` alone (a chunk batch's replace, a DDL's rewrite
#: of the finished chunks): binlake's own column, whose name no DDL changes. A source column
#: named here would be one a DDL mid-snapshot may rename or drop, after which Delta refuses the
#: table's next overwrite. A table's `lake.table_layout` may set the property (it takes
#: precedence); its clustering columns join this list (Delta clusters by columns it has
#: statistics of).
BRONZE_STATS_COLUMNS = "_chunk_id"


def column_mapping(names: Iterable[str]) -> dict[str, str]:
    """Writer options for a new Delta table holding columns of these names: Delta refuses a
    space and `,;{}()=` (tabs, newlines) in a column name unless columns are mapped by name.
    Only such tables get the mapping (and its newer Delta protocol); on an existing table the
    options change nothing."""
    if any(_UNMAPPED_FORBIDDEN.intersection(name) for name in names):
        return {"delta.columnMapping.mode": "name"}
    return {}
