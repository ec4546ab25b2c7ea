"""Small helpers over Delta tables at lakehouse paths."""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession


def table_exists(spark: SparkSession, path: str) -> bool:
    """Is there a Delta table at `path` now?

    Not `DeltaTable.isDeltaTable`: it caches a negative answer per path for the session, so a
    table another process creates later (a snapshot job while `status` runs in a notebook) stays
    invisible. Resolving the schema re-lists the Delta log.
    """
    try:
        spark.read.format("delta").load(path).schema  # noqa: B018 (resolves the log)
    except AnalysisException:
        return False
    return True
