"""`stream.*` of the burst: `BENCH_BURST` row changes made after the snapshot, caught up by
`jobs.stream(available_now=True)` (after a first catch-up of the same burst on a copy of the
lake, which pays the plans' compilation and the JIT's warm-up), checked against the source, and
held against its floors (`bench.floors`: the bare MERGE and the changelog's bare append)."""

from __future__ import annotations

import shutil
import time
from typing import Any

from bench.common import (
    Bench,
    CatchUp,
    create_silver,
    current_offset,
    latest_version,
    profiled_catch_up,
    say,
    silver_fingerprint,
)
from bench.floors import append_floor, merge_floor, silver_merge_metrics


def first_catch_up(bench: Bench, spark, monitor) -> float:
    """Seconds of the process's first catch-up of the burst, run on a copy of the kept lake
    (removed after): Spark compiles the batch's plans (the typing, the MERGE, the changelog
    append) and the JIT warms to them on the first large batch a stream applies, and a running
    stream pays that once. The measured catch-up and the floors, each run after a warm-up run of
    its own, are then all measured warm, so their ratios compare the work, not who ran first."""
    assert bench.kept_root is not None
    copy = bench.kept_root.with_name(f"{bench.kept_root.name}-first")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(bench.kept_root, copy)
    try:
        return profiled_catch_up(spark, bench.config(copy, 2), monitor, "stream_first").seconds
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def stream_burst(bench: Bench, spark, monitor) -> dict[str, Any]:
    """Silver created from bronze, the burst made and caught up (first on a copy, then
    measured), silver checked against the source, and the floors of the same changes."""
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate
    from binlake.silver.merge import changelog_table, silver_table

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    say("stream: creating silver from bronze (available-now run with nothing to catch up)")
    init_s = create_silver(spark, config, monitor, "stream_init")
    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    silver_before = latest_version(spark, silver_table(config, table))
    changelog = changelog_table(config, table)
    changelog_before = latest_version(spark, changelog) if changelog.exists(spark) else None
    say(f"stream: silver ready in {init_s:.1f} s; making a burst of {bench.burst:,} row changes")
    burst, start, end = make_burst(bench, monitor)
    cold_s = first_catch_up(bench, spark, monitor)
    say(
        f"stream: the process's first catch-up of the burst (on a copy of the lake) took "
        f"{cold_s:.1f} s = {burst.changes / cold_s:,.0f} changes/s: it compiles the batch's "
        "plans and warms the JIT; the measured catch-up follows"
    )
    catch_up = profiled_catch_up(spark, config, monitor, "stream_catch_up")
    after = silver_after(bench, spark, config, table, burst.changes, catch_up)
    silver_merges = silver_merge_metrics(spark, silver_table(config, table), silver_before)
    with monitor.phase("merge_floor"):
        first_merge = merge_floor(bench, spark, config, silver_before, start, end)
        floor = merge_floor(bench, spark, config, silver_before, start, end)
        floor["first_merge_s"] = first_merge["merge_s"]
    with monitor.phase("append_floor"):
        first_append = append_floor(bench, spark, config, changelog_before, start, end)
        append = append_floor(bench, spark, config, changelog_before, start, end)
        append["first_append_s"] = first_append["append_s"]
    return {
        **against_floors(burst.changes, catch_up.seconds, cold_s, floor, append),
        "silver_merges": silver_merges,
        "catch_up_phases": catch_up.phases,
        "catch_up_triggers": catch_up.triggers,
        "catch_up_log": [m for _, m in catch_up.log.matching("applied in")],
        "burst": {
            "inserts": burst.inserts,
            "updates": burst.updates,
            "deletes": burst.deletes,
            "statements": burst.statements,
            "make_s": round(burst.seconds, 2),
        },
        "batches": catch_up.summary.batches,
        "input_rows": catch_up.summary.changes,
        "silver_init_s": round(init_s, 2),
        **after,
        "binlog_range": [start.to_dict(), end.to_dict()],
        "_offsets": (start, end),
    }


def make_burst(bench: Bench, monitor) -> tuple[Any, Any, Any]:
    """The burst (`bench.data.make_burst`) and the binlog head before and after it."""
    from bench.data import make_burst as burst_of

    start = current_offset(bench)
    with monitor.phase("burst"):
        burst = burst_of(bench.password or "", bench.port, bench.burst)
    end = current_offset(bench)
    say(
        f"stream: burst of {burst.changes:,} changes ({burst.inserts:,} inserts, "
        f"{burst.updates:,} updates, {burst.deletes:,} deletes) in {burst.statements} statements "
        f"took {burst.seconds:.1f} s; binlog {start} -> {end}"
    )
    return burst, start, end


def silver_after(
    bench: Bench, spark, config, table, changes: int, catch_up: CatchUp
) -> dict[str, Any]:
    """Silver after the catch-up: a reader's full scan of it (timed) against the source, and its
    files and bytes."""
    from bench.data import table_fingerprint
    from binlake.silver.file_sizes import SILVER_FILE_ROWS
    from binlake.silver.merge import silver_table

    summary, seconds = catch_up.summary, catch_up.seconds
    source_fp = table_fingerprint(bench.password or "", bench.port)
    read_started = time.monotonic()
    silver_fp = silver_fingerprint(spark, config)  # a reader's full scan, timed
    read_s = time.monotonic() - read_started
    identical = source_fp == silver_fp
    size = silver_table(config, table).size(spark)
    say(
        f"stream: silver after the burst: {size.files if size else 0} files, "
        f"{size.bytes if size else 0:,} bytes; a full scan of it (count, sums, key range) took "
        f"{read_s:.2f} s"
    )
    say(
        f"stream: {changes:,} changes applied in {seconds:.1f} s = "
        f"{changes / seconds:,.0f} changes/s ({summary.batches} batches, "
        f"{summary.changes:,} rows in); silver {'matches' if identical else 'DIFFERS FROM'} "
        f"the source {'' if identical else f'{silver_fp} vs {source_fp}'}"
    )
    return {
        "silver_file_rows": SILVER_FILE_ROWS,
        "silver_files_after": size.files if size else None,
        "silver_bytes_after": size.bytes if size else None,
        "silver_scan_s": round(read_s, 2),
        "silver_matches_source": identical,
    }


def against_floors(
    changes: int, seconds: float, cold_s: float, floor: dict[str, Any], append: dict[str, Any]
) -> dict[str, Any]:
    """The catch-up's changes/s (and the first catch-up's, `cold_s`), its ratios to the merge
    floor and to the merge floor plus the changelog's append."""
    changes_s = changes / seconds
    floor_s = changes / floor["merge_s"]
    both_s = changes / (floor["merge_s"] + append["append_s"])
    say(
        f"stream: merge floor {floor_s:,.0f} changes/s (one bare MERGE of {floor['rows']:,} "
        f"collapsed changes in {floor['merge_s']:.1f} s; result "
        f"{'matches' if floor['matches_silver'] else 'DIFFERS FROM'} binlake's silver); "
        f"binlake at {changes_s / floor_s:.2f}× the floor; with the changelog's bare append "
        f"({append['append_s']:.1f} s) {both_s:,.0f} changes/s, binlake at "
        f"{changes_s / both_s:.2f}×"
    )
    return {
        "changes": changes,
        "changes_s": round(changes_s, 1),
        "seconds": round(seconds, 2),
        "merge_floor_changes_s": round(floor_s, 1),
        "changes_vs_merge_floor": round(changes_s / floor_s, 3),
        "first_catch_up_s": round(cold_s, 2),
        "first_catch_up_changes_s": round(changes / cold_s, 1),
        "merge_floor": floor,
        "append_floor": append,
        "merge_and_append_floor_changes_s": round(both_s, 1),
        "changes_vs_merge_and_append_floor": round(changes_s / both_s, 3),
    }
