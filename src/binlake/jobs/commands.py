"""Job entry points: what the CLI commands and the bundle's tasks call.

Each takes a Spark session and the validated `Config`; `binlake.jobs.cli.main` is the one place that
builds both (on Databricks the session is the runtime's). The jobs that write the lake record
what they do in its event log (`binlake.lake.event_log`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from pyspark.sql import SparkSession

from binlake.config.settings import Config
from binlake.jobs.status import gather_status, render_status, stream_lag, wait_for_stream
from binlake.jobs.verify import lag_hint, render_report, verify_silver
from binlake.lake.event_log import StopHook, recording
from binlake.lake.files import driver_files
from binlake.snapshot.task import SnapshotSummary, run_snapshot
from binlake.stream.task import StreamSummary, run_stream

log = logging.getLogger(__name__)

#: The event log's job name for `binlake snapshot` (a stream's is its `stream.job_name`).
SNAPSHOT_JOB = "snapshot"


def snapshot(
    spark: SparkSession,
    config: Config,
    tables: list[str] | None = None,
    reset: bool = False,
    on_stop: StopHook | None = None,
) -> SnapshotSummary:
    """Bronze snapshot task: plan, read and commit every pending chunk (a no-op when done);
    `tables` limits it to those tables, `reset` snapshots them again from scratch. (`on_stop`,
    here and below: see `events.recording`.)"""
    with recording(spark, config, SNAPSHOT_JOB, on_stop):
        return run_snapshot(spark, config, tables, reset)


def stream(
    spark: SparkSession,
    config: Config,
    available_now: bool = False,
    on_stop: StopHook | None = None,
) -> StreamSummary:
    """Silver streaming task: continuous, or catch up to the binlog head and stop."""
    with recording(spark, config, config.stream.job_name, on_stop):
        return run_stream(spark, config, available_now=available_now)


def run(spark: SparkSession, config: Config, on_stop: StopHook | None = None) -> StreamSummary:
    """Snapshot, then stream with available-now: the whole pipeline once, end to end."""
    with recording(spark, config, config.stream.job_name, on_stop):
        if config.stream.startup_mode == "initial":
            run_snapshot(spark, config)
        return run_stream(spark, config, available_now=True)


def status(config: Config, spark: Callable[[], SparkSession], as_json: bool = False) -> str:
    """Chunks done/total, rows and the stream's lag per table, as a printable table or one
    JSON object; `spark` is called only if a catalog's silver tables must be counted (see
    `binlake.jobs.status`)."""
    gathered = gather_status(config, spark)
    return json.dumps(gathered.to_json()) if as_json else render_status(gathered)


def verify(
    spark: SparkSession, config: Config, tables: list[str] | None = None, wait_s: float = 0.0
) -> int:
    """Compare silver with the source (of `tables`, by `--tables`); print the report, and when
    silver differs while the stream is behind, that the difference may be the lag; 0 if
    identical, 1 otherwise. With `wait_s`, first wait that long at most for a stream running
    elsewhere to apply the binlog up to the source's head (`status.wait_for_stream`)."""
    if wait_s and not wait_for_stream(driver_files(spark), config, wait_s):
        log.warning("the stream did not catch up within %.0f s: verifying as it stands", wait_s)
    report = verify_silver(spark, config, tables)
    print(render_report(report))
    if not report.identical:
        print(lag_hint(stream_lag(driver_files(spark), config)))
    return 0 if report.identical else 1
