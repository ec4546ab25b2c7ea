"""The one Spark session factory: local mode with Delta configured, or the runtime's session.

`main()` of each entry point is the only caller; everything else receives the session as a
parameter. On Databricks the runtime already has a session with Delta, which `get_or_create`
returns unchanged.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

_DEFAULT_IVY = Path(__file__).resolve().parents[2] / ".cache" / "ivy"


def local_session(
    app_name: str = "binlake", cores: int | None = None, extra_jars: Sequence[str] = ()
) -> SparkSession:
    """A tuned local session: few shuffle partitions, UI off, UTC, Delta from Maven Central.

    Delta's jars are resolved by Spark's package resolution into `BINLAKE_IVY_DIR` (the Makefile
    points it at `.cache/ivy`), so the second start needs no network. `extra_jars` (local paths)
    join the classpath, e.g. a JDBC driver for the benchmark's baseline.
    """
    from delta import configure_spark_with_delta_pip

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run the interpreter that has binlake installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    ivy = os.environ.get("BINLAKE_IVY_DIR", str(_DEFAULT_IVY))
    master = f"local[{cores}]" if cores else "local[*]"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.jars.ivy", ivy)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("BINLAKE_DRIVER_MEMORY", "4g"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.databricks.delta.properties.defaults.enableChangeDataFeed", "false")
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
    )
    cached = sorted(str(jar) for jar in Path(ivy, "jars").glob("*.jar"))
    if any(Path(jar).name.startswith("io.delta_delta-spark") for jar in cached):
        # Resolved before (make setup): load the cached jars, skipping Ivy's resolution report.
        builder = builder.config("spark.jars", ",".join([*cached, *extra_jars]))
    else:
        if extra_jars:
            builder = builder.config("spark.jars", ",".join(extra_jars))
        builder = configure_spark_with_delta_pip(builder)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def get_or_create(app_name: str = "binlake") -> SparkSession:
    """The active session (Databricks runtime) or a new local one."""
    active = SparkSession.getActiveSession()
    return active if active is not None else local_session(app_name)


if __name__ == "__main__":
    # `make setup` runs this once to resolve and cache Delta's jars.
    spark = local_session("binlake-setup", cores=1)
    cache = os.environ.get("BINLAKE_IVY_DIR", _DEFAULT_IVY)
    print(f"Spark {spark.version} with Delta ready (jars cached in {cache})")
    spark.stop()
