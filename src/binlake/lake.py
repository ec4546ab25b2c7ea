"""Small helpers over Delta tables at lakehouse paths."""

from __future__ import annotations

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
