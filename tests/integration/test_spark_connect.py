"""binlake as a Spark Connect client, as on Databricks serverless and standard access mode: the
CLI runs with `SPARK_REMOTE=sc://...` against a separate Spark Connect server, so its process
has no JVM, SparkContext, RDD, accumulator or py4j gateway at all. A snapshot with writers
racing, then the continuous stream as serverless runs it (`stream.trigger: available_now`: a
catch-up every interval) through a schema change, then `verify`; silver then equals the source
and the changelog holds each change once."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from binlake.lake.tables import lake_table

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .child_runs import write_config
from .connect_server import client_command, client_env, run_remote, server_log
from .items import Racer, logged_events, seed_items
from .replay import ROOT

#: What the stream logs as each catch-up run starts.
RUN_STARTS = "stream silver: starting at"


@contextlib.contextmanager
def _streaming(remote: tuple[str, Path], config_file: Path, log: Path) -> Iterator[None]:
    """A continuous `binlake stream` as a Spark Connect client, stopped on exit."""
    with log.open("w") as output:
        env = {**client_env(remote), "PYTHONUNBUFFERED": "1"}  # its log, line by line
        stream = subprocess.Popen(
            client_command(config_file, "stream"), env=env, stdout=output, stderr=subprocess.STDOUT,
            cwd=ROOT,
        )  # fmt: skip
    try:
        yield
        assert stream.poll() is None, log.read_text()[-3000:] + server_log(remote)
    finally:
        stream.terminate()
        stream.wait(timeout=60)


def _wait_for_runs(log: Path, runs: int, timeout: float = 240.0) -> None:
    """Until the stream has started `runs` more catch-up runs (read from its log, so the test
    leaves the two cores to the stream)."""

    def started() -> int:
        return log.read_text().count(RUN_STARTS)

    goal = started() + runs
    deadline = time.monotonic() + timeout
    while started() < goal:
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(1)


def test_snapshot_stream_schema_change_and_verify_through_spark_connect(
    spark: Any,
    sql: Callable[..., Any],
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    spark_remote: tuple[str, Path],
    tmp_path: Path,
) -> None:
    seed_items(sql, 600)
    config = make_config(
        snapshot={"chunk_size": 100, "parallelism": 2},
        stream={"trigger": "available_now", "trigger_interval": "1s"},
        lake={"event_log": True},
    )
    config_file = write_config(config, tmp_path / "binlake.yml")
    with contextlib.ExitStack() as racing:
        racing.enter_context(Racer(db_env, database))
        run_remote(spark_remote, config_file, "snapshot")
        with _streaming(spark_remote, config_file, tmp_path / "stream.log"):
            time.sleep(4)
            sql("ALTER TABLE items ADD COLUMN grade INT NOT NULL DEFAULT 3")
            time.sleep(4)
            racing.close()  # the writers stop
            # A catch-up run began after them and ended: runs follow one another, each a query
            # of its own over the same checkpoint.
            _wait_for_runs(tmp_path / "stream.log", 2)
    verified = run_remote(spark_remote, config_file, "verify")

    assert "grade" in assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
    assert "items" in verified
    # The event log, written over Connect: a batch's events by the server's foreachBatch worker.
    (ddl,) = logged_events(spark, config, "ddl_applied")
    assert "ADD COLUMN grade" in ddl.message
    assert len(logged_events(spark, config, "stream_start")) >= 2
    batches = logged_events(spark, config, "stream_batch")
    assert (
        sum(b.rows for b in batches)
        == lake_table(config.lake, "bronze", database, "items__changelog").read(spark).count()
    )
