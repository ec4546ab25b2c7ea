"""Small helpers over Delta tables at lakehouse paths."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType


def table_schema(spark: SparkSession, path: str) -> StructType | None:
    """The schema of the Delta table at `path` now (None: there is none).

    Not `DeltaTable.isDeltaTable`: it caches a negative answer per path for the session, so a
    table another process creates later (a snapshot job while `status` runs in a notebook) stays
    invisible. Resolving the schema re-lists the Delta log.
    """
    try:
        return spark.read.format("delta").load(path).schema
    except AnalysisException:
        return None


def table_exists(spark: SparkSession, path: str) -> bool:
    return table_schema(spark, path) is not None


def column_name(name: str) -> str:
    """A source column's name as Spark parses it (`F.col`, MERGE assignments, SQL text):
    backtick-quoted, backticks doubled, so a dot or a space stays part of the name instead of
    reaching into a struct or ending it."""
    return "`" + name.replace("`", "``") + "`"


#: Characters Delta refuses in column names unless the table maps its columns by name.
_UNMAPPED_FORBIDDEN = frozenset(" ,;{}()\n\t=")


def column_mapping(names: Iterable[str]) -> dict[str, str]:
    """Writer options for a new Delta table holding columns of these names: Delta refuses a
    space and `,;{}()=` (tabs, newlines) in a column name unless columns are mapped by name.
    Only such tables get the mapping (and its newer Delta protocol); on an existing table the
    options change nothing."""
    if any(_UNMAPPED_FORBIDDEN.intersection(name) for name in names):
        return {"delta.columnMapping.mode": "name"}
    return {}
