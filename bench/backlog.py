"""`backlog.*`: a stream started after a long pause drains its backlog in bounded batches with
steady memory: `BENCH_BACKLOG` changes to `bench.backlog`, drained by two lakes made the same
way, under binlake's default bounds and as one unbounded batch, each with its peak RSS and its
batches from binlake's event log."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from bench.common import (
    Bench,
    create_silver,
    current_offset,
    env_int,
    profiled_catch_up,
    say,
    silver_fingerprint,
)

#: The backlog scenario's table (customer-shaped) in database `bench`.
BACKLOG_TABLE = "backlog"


def backlog_drain(bench: Bench, spark, monitor) -> dict[str, Any]:
    """A stream started after a long pause (a weekend): `BENCH_BACKLOG` row changes made to
    `bench.backlog` while its stream was stopped, then drained by one
    `commands.stream(available_now=True)` under binlake's default `stream.max_bytes_per_batch`
    (`BENCH_BACKLOG_MAX_BYTES` to set another; a series of bounded batches), and, from the same
    starting point, with `max_bytes_per_batch: None` (one unbounded batch). The two lake roots
    (own job names) are made the same way before the backlog is written (snapshot, silver, then
    a warm-up drained by both), so both drains read the same binlog range. The bounded drain
    runs first: the JVM keeps much of the heap it has grown, so the drains' starting RSS is in
    the result beside their peaks."""
    from bench.data import create_and_load, drop_table, make_burst, table_fingerprint

    changes = env_int("BENCH_BACKLOG", 1_000_000)
    rows = env_int("BENCH_BACKLOG_ROWS", changes)
    password = bench.password or ""
    say(f"backlog: loading bench.{BACKLOG_TABLE} ({rows:,} rows)")
    with monitor.phase("backlog_load"):
        create_and_load(password, bench.port, rows, BACKLOG_TABLE)
    roots = {"": bench.fresh_root("backlog"), "unbounded_": bench.fresh_root("backlog-unbounded")}
    configs = lake_configs(bench, roots)
    result: dict[str, Any] = {"table_rows": rows}
    for prefix, config in configs.items():
        result.update(prepare_lake(spark, config, monitor, rows, prefix))
    warmup = env_int("BENCH_BACKLOG_WARMUP", max(changes // 10, 2000))
    if warmup:  # both lakes' first data-carrying batches (JIT, the JVM's heap), not measured
        say(f"backlog: warm-up, {warmup:,} changes drained by both lakes")
        make_burst(password, bench.port, warmup, table=BACKLOG_TABLE)
        for config in configs.values():
            profiled_catch_up(spark, config, monitor, "backlog_warmup")
    burst, written = write_backlog(bench, configs[""], monitor, changes, warmup)
    source_fp = table_fingerprint(password, bench.port, BACKLOG_TABLE)
    result.update(written)
    order = list(configs.items())
    if os.environ.get("BENCH_BACKLOG_UNBOUNDED_FIRST"):  # to see what the order does
        order.reverse()
    result["order"] = [config.stream.job_name for _, config in order]
    for prefix, config in order:
        result.update(_drain(spark, config, monitor, burst.changes, source_fp, prefix))
    for root in roots.values():
        shutil.rmtree(root, ignore_errors=True)
    drop_table(password, bench.port, BACKLOG_TABLE)
    result["memory_method"] = (
        "peak RSS sampled every 0.25 s during the drain (bench.monitor): driver = this Python + "
        "its JVM, workers = sum over pyspark.daemon and its forks; *start_* = RSS right before "
        "the drain"
    )
    return result


def lake_configs(bench: Bench, roots: dict[str, Any]) -> dict[str, Any]:
    """The two lakes' configs, by result prefix: "" under binlake's default bound (or
    `BENCH_BACKLOG_MAX_BYTES`), "unbounded_" with both bounds off."""
    bound = env_int("BENCH_BACKLOG_MAX_BYTES", 0)  # 0: binlake's default bound
    return {
        "": bench.config(
            roots[""], 2, job="bench_backlog", tables=[BACKLOG_TABLE],
            stream={"max_bytes_per_batch": bound} if bound else None,
        ),
        "unbounded_": bench.config(
            roots["unbounded_"], 2, job="bench_backlog_unbounded", tables=[BACKLOG_TABLE],
            stream={"max_bytes_per_batch": None, "max_changes_per_batch": None},
        ),
    }  # fmt: skip


def prepare_lake(spark, config, monitor, rows: int, prefix: str) -> dict[str, Any]:
    """A lake of the backlog table: its snapshot, then silver created; their seconds."""
    from binlake.jobs import commands

    out: dict[str, Any] = {}
    with monitor.phase("backlog_snapshot"):
        started = time.monotonic()
        snapshot = commands.snapshot(spark, config)
        out[f"{prefix}snapshot_s"] = round(time.monotonic() - started, 2)
    if snapshot.rows != rows:
        raise RuntimeError(f"the backlog snapshot read {snapshot.rows} rows, expected {rows}")
    init_s = create_silver(spark, config, monitor, "backlog_silver_init")
    out[f"{prefix}silver_init_s"] = round(init_s, 2)
    say(
        f"backlog: lake {config.stream.job_name}: snapshot "
        f"{out[f'{prefix}snapshot_s']} s, silver in {init_s:.1f} s"
    )
    return out


def write_backlog(
    bench: Bench, config, monitor, changes: int, warmup: int
) -> tuple[Any, dict[str, Any]]:
    """The backlog's `changes` made while the streams are stopped: the burst, and its figures
    (the binlog bytes it took, the bounds the bounded drain runs under, the warm-up's changes
    made before)."""
    from bench.data import make_burst
    from binlake.config.secrets import with_resolved_password
    from binlake.model.offsets import bytes_behind
    from binlake.mysql.connection import connection
    from binlake.mysql.server import binlog_sizes

    say(f"backlog: stream stopped; making {changes:,} row changes")
    start = current_offset(bench)
    with monitor.phase("backlog_write"):
        burst = make_burst(bench.password or "", bench.port, changes, table=BACKLOG_TABLE)
    end = current_offset(bench)
    with connection(with_resolved_password(config.source)) as conn:
        binlog_bytes = bytes_behind(start, end, binlog_sizes(conn))
    say(
        f"backlog: {burst.changes:,} changes ({burst.inserts:,} inserts, {burst.updates:,} "
        f"updates, {burst.deletes:,} deletes) in {burst.statements} statements, "
        f"{burst.seconds:.1f} s; {binlog_bytes / 2**20:,.1f} MiB of binlog {start} -> {end}"
    )
    return burst, {
        "changes": burst.changes,
        "binlog_bytes": binlog_bytes,
        "max_bytes_per_batch": config.stream.max_bytes_per_batch,
        # binlake's other bound, where it exists: left at its default in both drains
        "max_changes_per_batch": config.stream.max_changes_per_batch,
        "warmup_changes": warmup,
        "write": {
            "inserts": burst.inserts,
            "updates": burst.updates,
            "deletes": burst.deletes,
            "statements": burst.statements,
            "make_s": round(burst.seconds, 2),
        },
        "binlog_range": [start.to_dict(), end.to_dict()],
    }


def _drain(spark, config, monitor, changes: int, source_fp, prefix: str) -> dict[str, Any]:
    """One available-now drain of the backlog (`prefix`: "" bounded, "unbounded_"), its peak
    memory, its batches (from binlake's event log) and the check of silver against the
    source."""
    from datetime import UTC, datetime

    bound = config.stream.max_bytes_per_batch
    label = f"max_bytes_per_batch {bound:,}" if bound else "unbounded"
    phase = f"backlog_drain{'_' + prefix.rstrip('_') if prefix else ''}"
    say(f"backlog: draining ({label})")
    before = monitor.sample()
    since = datetime.now(UTC)
    catch_up = profiled_catch_up(spark, config, monitor, phase)
    peaks = monitor.phase_peak_mb.get(phase, {})
    batches = event_batches(spark, config, since)
    applied = [b for b in batches if b["rows"]]
    identical = silver_fingerprint(spark, config) == source_fp
    seconds = catch_up.seconds
    out = {
        "drain_s": round(seconds, 2),
        "changes_s": round(changes / seconds, 1),
        "batches": len(applied),
        "batches_progress": catch_up.summary.batches,
        "input_rows": catch_up.summary.changes,
        "batch_changes": [b["rows"] for b in applied],
        "batch_s": [round(b["duration_s"], 2) for b in applied],
        "peak_driver_mb": round(peaks.get("driver", 0.0), 1),
        "peak_workers_mb": round(peaks.get("workers", 0.0), 1),
        "peak_driver_python_mb": round(peaks.get("driver_python", 0.0), 1),
        "peak_driver_jvm_mb": round(peaks.get("driver_jvm", 0.0), 1),
        "peak_other_mb": round(peaks.get("other", 0.0), 1),
        "start_driver_mb": round(before["driver_python"] + before["driver_jvm"], 1),
        "start_driver_jvm_mb": round(before["driver_jvm"], 1),
        "start_workers_mb": round(before["workers"], 1),
        "silver_matches_source": identical,
        "phases": catch_up.phases,
    }
    say(
        f"backlog: drained {changes:,} changes ({label}) in {seconds:.1f} s = "
        f"{changes / seconds:,.0f} changes/s, {len(applied)} batches "
        f"({', '.join(f'{n:,}' for n in out['batch_changes'])}); peak RSS driver "
        f"{out['peak_driver_mb']:,.0f} MB (from {out['start_driver_mb']:,.0f}), workers "
        f"{out['peak_workers_mb']:,.0f} MB; silver {'matches' if identical else 'DIFFERS FROM'} "
        "the source"
    )
    return {f"{prefix}{k}": v for k, v in out.items()}


def event_batches(spark, config, since) -> list[dict[str, Any]]:
    """The stream batches binlake's event log (`_system/events`) holds for `config`'s job since
    `since` (a UTC datetime), oldest first: rows (changes), duration_s, lag_bytes."""
    from pyspark.sql import functions as F

    from binlake.lake.event_log import event_table

    return [
        r.asDict()
        for r in event_table(config)
        .read(spark)
        .where(F.col("kind") == "stream_batch")
        .where(F.col("job") == config.stream.job_name)
        .where(F.col("ts") >= F.lit(since))
        .orderBy("ts")
        .select("rows", "duration_s", "lag_bytes")
        .collect()
    ]
