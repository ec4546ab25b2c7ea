"""Job entry points: what the CLI commands and the bundle's tasks call.

Each takes the validated `Config` and a Spark session; `binlake.cli.main` is the one place that
builds both.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from binlake.config import Config
from binlake.snapshot import SnapshotSummary, run_snapshot
from binlake.status import render_status

log = logging.getLogger(__name__)


def snapshot(spark: SparkSession, config: Config) -> SnapshotSummary:
    """Bronze snapshot task: plan, read and commit every pending chunk."""
    return run_snapshot(spark, config)


def status(spark: SparkSession, config: Config) -> str:
    """Chunks done/total, rows and stream lag per table, as a printable table."""
    return render_status(spark, config)
