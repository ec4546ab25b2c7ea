"""`stream.latency_*`: end-to-end latency of a continuous stream (`BENCH_TRIGGER`) over
`BENCH_LATENCY_MARKERS` single-row marker updates, read from silver's Change Data Feed after the
run, with the run's per-phase timings and Spark's split of its triggers, and beside it the floor
of a one-change batch's MERGE (`point_merge_floor`)."""

from __future__ import annotations

import json
import random
import shutil
import statistics
import threading
import time
from typing import Any

from bench.common import Bench, current_offset, cursor, latest_version, say
from bench.floors import FloorMerge, silver_merge_metrics, silver_path


def stream_latency(bench: Bench, spark, monitor) -> dict[str, Any]:
    """Continuous mode (`BENCH_TRIGGER`, 1 s by default) in a thread; single-row updates set
    markers; latency = the silver Delta commit that made the marker visible − the MariaDB commit
    (same clock), read from silver's Change Data Feed afterwards. Nothing polls silver while the
    stream runs (a poller's Spark jobs would compete for the two cores): the end is found from
    the query's progress (no Spark job). Beside it, the point-MERGE floor of the same run: a bare
    MERGE of one marker's change into a copy of silver as it was before the run."""
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate
    from binlake.silver.merge import silver_table

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2, stream={"trigger_interval": bench.trigger})
    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    silver = silver_table(config, table)
    version0 = latest_version(spark, silver)
    committed, phases, progress = continuous_run(bench, spark, monitor, config)
    latencies = sorted(latencies_of(spark, silver, version0, committed))
    missing = len(committed) - len(latencies)
    silver_merges = silver_merge_metrics(spark, silver, version0)
    floor = point_merge_floor(bench, spark, config, table, version0)
    result = {
        "latency_p50_s": percentile(latencies, 50),
        "latency_p95_s": percentile(latencies, 95),
        "latency_max_s": round(max(latencies), 2) if latencies else None,
        "latency_markers": len(committed),
        "latency_markers_missing": missing,
        "trigger_interval": config.stream.trigger_interval,
        "latency_phases": phases,
        "latency_trigger_ms": trigger_medians(progress),
        "point_merge_floor_s": floor,
        "latency_silver_merges": silver_merges,
    }
    say(
        "latency: a batch's steps, mean s per call: "
        + ", ".join(
            f"{name} {p['mean_s']}"
            for name, p in result["latency_phases"].items()
            if name.startswith("batch") and p.get("mean_s") is not None
        )
    )
    say(f"latency: a trigger's parts, median ms: {result['latency_trigger_ms']}")
    say(
        f"latency: p50 {result['latency_p50_s']} s, p95 {result['latency_p95_s']} s at a "
        f"{bench.trigger} trigger, {missing} markers missing; a bare one-row MERGE into the "
        f"same silver: median {floor['median_s']} s"
    )
    return result


def continuous_run(
    bench: Bench, spark, monitor, config
) -> tuple[dict[str, float], dict[str, Any], list[dict[str, Any]]]:
    """The continuous stream in a thread while the markers are committed, stopped once it has
    read past them: the markers' commit times, the run's phases and its triggers' progress."""
    from bench.phases import STREAM_PHASES, PhaseTimer, QueryProgress
    from binlake.jobs import commands

    failure: list[BaseException] = []

    def run() -> None:
        try:
            commands.stream(spark, config)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="bench-stream", daemon=True)
    with (
        monitor.phase("latency"),
        PhaseTimer(STREAM_PHASES) as timer,
        QueryProgress(spark) as progress,
    ):
        thread.start()
        deadline = time.monotonic() + 120
        while not spark.streams.active and time.monotonic() < deadline and not failure:
            time.sleep(0.2)
        if failure:
            raise failure[0]
        time.sleep(6)  # let the first (empty) trigger pass
        committed = commit_markers(bench)
        _await_stream_at(spark, current_offset(bench), failure, timeout_s=90)
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=60)
    if failure:
        raise failure[0]
    return committed, timer.result(), progress.progress


def commit_markers(bench: Bench) -> dict[str, float]:
    """`bench.markers` single-row updates of random customers, ~1 per second, each writing a
    marker: the client's clock right after each commit, by marker."""
    with cursor(bench) as cur:
        cur.execute(
            "SELECT c_customer_sk FROM customer ORDER BY RAND(7) LIMIT %s", (bench.markers,)
        )
        keys = [k for (k,) in cur.fetchall()]
        committed: dict[str, float] = {}
        rnd = random.Random(11)
        say(f"latency: committing {len(keys)} single-row marker updates, ~1 every 0.5-1.5 s "
            f"(trigger {bench.trigger})")  # fmt: skip
        for i, key in enumerate(keys):
            marker = f"lat:{i}:{time.time_ns()}"
            cur.execute(
                "UPDATE customer SET c_email_address = %s WHERE c_customer_sk = %s",
                (marker, key),
            )
            committed[marker] = time.time()
            time.sleep(rnd.uniform(0.5, 1.5))
    return committed


def latencies_of(spark, silver, version0: int, committed: dict[str, float]) -> list[float]:
    """Per marker silver shows: the `_commit_timestamp` of the first silver commit that made it
    visible (its Change Data Feed since `version0`) − its MariaDB commit."""
    from pyspark.sql import functions as F

    changes = (
        silver.read(spark, readChangeFeed="true", startingVersion=str(version0 + 1))
        .where(F.col("_change_type").isin("update_postimage", "insert"))
        .where(F.col("c_email_address").startswith("lat:"))
        .select("c_email_address", F.unix_micros("_commit_timestamp").alias("us"))
        .collect()
    )
    visible = {}
    for r in changes:
        marker = r["c_email_address"].rstrip()
        visible[marker] = min(visible.get(marker, float("inf")), r["us"] / 1e6)
    return [visible[m] - t for m, t in committed.items() if m in visible]


def percentile(values: list[float], q: int) -> float | None:
    if not values:
        return None
    return (
        round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)
        if len(values) > 1
        else round(values[0], 2)
    )


def trigger_medians(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the triggers that applied changes: how many, and the median milliseconds of each
    part of Spark's own split of a trigger (`QueryProgress`), the sink's `addBatch` among them."""
    busy = [p["duration_ms"] for p in progress if p["input_rows"]]
    parts = sorted({part for durations in busy for part in durations})
    return {
        "triggers": len(busy),
        **{part: statistics.median(d.get(part, 0) for d in busy) for part in parts},
    }


def _await_stream_at(spark, head, failure: list[BaseException], timeout_s: float) -> None:
    """Wait until the running stream's last batch ended at or past `head` (its progress, read
    without a Spark job) or failed."""
    from binlake.model.offsets import BinlogOffset

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not failure:
        for query in spark.streams.active:
            progress = query.lastProgress or {}
            ends = [
                json.loads(s["endOffset"])
                for s in progress.get("sources", [])
                if s.get("endOffset")
            ]
            if any(BinlogOffset.from_dict(e) >= head for e in ends):
                return
        time.sleep(0.5)
    say(f"latency: the stream did not reach {head} within {timeout_s:.0f} s")


def point_merge_floor(bench: Bench, spark, config, table, version0: int, samples: int = 7):
    """Seconds of a bare MERGE of one marker's change (`FloorMerge`, read back from binlake's
    changelog) into a copy of silver restored to its version before the latency run: the floor
    of a one-change batch's MERGE, in the same session, with the settings the sink chooses for
    such a batch (`batch_settings.settings_for`)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from binlake.model.offsets import BinlogOffset
    from binlake.silver.merge import changelog_table
    from binlake.stream.batch_settings import settings_for

    marks = (
        changelog_table(config, table).read(spark)
        .where(F.col("_after.c_email_address").startswith("lat:"))
        .select("_file", "_pos").orderBy("_file", "_pos").limit(samples).collect()
    )  # fmt: skip
    root = bench.fresh_root("point-merge-floor")
    target = str(root / "silver")
    shutil.copytree(silver_path(config, table), target)
    DeltaTable.forPath(spark, target).restoreToVersion(version0)
    seconds = []
    with settings_for(spark, config, {table.qualified: table}, {table.qualified: 1}):
        for i, mark in enumerate(marks):
            at = BinlogOffset(mark["_file"], mark["_pos"])
            floor = FloorMerge(spark, config, table, target, str(root / f"changes{i}"), at, at)
            started = time.monotonic()
            floor.merge()
            seconds.append(time.monotonic() - started)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "median_s": round(statistics.median(seconds), 2) if seconds else None,
        "samples_s": [round(s, 2) for s in seconds],
    }
