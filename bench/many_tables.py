"""`many_tables.*`: hundreds of small tables against one table of the same rows, in the bench's
one process and session: the snapshot of `BENCH_TABLES` tables of `BENCH_TABLE_ROWS` rows and of
one table holding all those rows, silver created, and silver's catch-up after updates touching
`BENCH_TOUCHED_TABLES` of them, each held against its floor (bare Delta writes of the same rows
and changes), with per-phase timings from `bench.phases`."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import (
    Bench,
    current_offset,
    env_int,
    profiled_catch_up,
    say,
    silver_fingerprint,
)
from bench.floors import FloorAppend, FloorMerge, changelog_path, silver_path


def many_tables(bench: Bench, spark, monitor) -> dict[str, Any]:
    """Hundreds of small tables against one table of the same rows, same process and session:
    the snapshot of `BENCH_TABLES` tables of `BENCH_TABLE_ROWS` rows, the snapshot of one table
    holding all those rows, then silver's catch-up after a batch of updates touching
    `BENCH_TOUCHED_TABLES` of the tables (`BENCH_TOUCHED_ROWS` rows each). Per-phase timings
    come from `bench.phases` (binlake's functions timed from outside, its log lines, Spark's
    per-trigger durations)."""
    from bench.data import MANY_DATABASE, create_many_tables, drop_many_tables
    from bench.phases import STREAM_PHASES, PhaseTimer
    from binlake.jobs import commands

    n = env_int("BENCH_TABLES", 200)
    per = env_int("BENCH_TABLE_ROWS", 1000)
    rows = n * per
    password = bench.password or ""
    say(f"many tables: creating {MANY_DATABASE}: {n} tables × {per:,} rows + one of {rows:,}")
    with monitor.phase("many_tables_load"):
        load = create_many_tables(password, bench.port, n, per)
    say(f"many tables: created in {load['many_s']} s + {load['single_s']} s")
    root = bench.fresh_root("many-tables")
    config = bench.config(root, 2, job="bench_many", database=MANY_DATABASE, tables=[r"t\d{4}"])
    snapshots, snapshot_profiles = snapshot_figures(bench, spark, monitor, config, n, rows)
    say("many tables: creating silver from bronze (available-now run)")
    with monitor.phase("many_tables_silver_init"), PhaseTimer(STREAM_PHASES) as init_timer:
        started = time.monotonic()
        commands.stream(spark, config, available_now=True)
        init_s = time.monotonic() - started
    say(f"many tables: silver ready in {init_s:.1f} s ({init_s / n:.2f} s per table)")
    catch_up, catch_up_profile = catch_up_figures(bench, spark, monitor, root, config, n)
    shutil.rmtree(root, ignore_errors=True)
    drop_many_tables(password, bench.port)
    return {
        "tables": n,
        "rows_per_table": per,
        "rows": rows,
        "create_s": load,
        **snapshots,
        "silver_init_s": round(init_s, 2),
        **catch_up,
        "profile": {
            **snapshot_profiles,
            "silver_init": {"phases": init_timer.result()},
            "catchup": catch_up_profile,
        },
    }


def profiled_snapshot(spark, config, rows: int) -> tuple[Any, float, dict[str, Any]]:
    """`commands.snapshot` timed, with its per-phase timings and its log's windows."""
    from bench.phases import (
        SNAPSHOT_PHASES,
        SNAPSHOT_TOP,
        LogCapture,
        PhaseTimer,
        breakdown,
        snapshot_log_windows,
    )
    from binlake.jobs import commands

    verbose = bool(os.environ.get("BENCH_VERBOSE"))
    with PhaseTimer(SNAPSHOT_PHASES) as timer, LogCapture(echo=verbose) as capture:
        started_wall = time.time()
        started = time.monotonic()
        summary = commands.snapshot(spark, config)
        seconds = time.monotonic() - started
    phases = timer.result()
    if summary.rows != rows:
        raise RuntimeError(f"the snapshot read {summary.rows} rows, expected {rows}")
    return (
        summary,
        seconds,
        {
            "phases": phases,
            "breakdown": breakdown(phases, SNAPSHOT_TOP, seconds, summary.tables),
            "log": snapshot_log_windows(capture, started_wall),
        },
    )


def snapshot_figures(
    bench: Bench, spark, monitor, config, n: int, rows: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The snapshot of the `n` small tables, its floor (`bronze_floor`) and the snapshot of one
    table of the same rows: their figures and their profiles."""
    from bench.data import MANY_DATABASE, SINGLE_TABLE
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate

    say(f"many tables: snapshot of the {n} tables (p2)")
    with monitor.phase("many_tables_snapshot"):
        summary, snapshot_s, snap_profile = profiled_snapshot(spark, config, rows)
    if summary.tables != n:
        raise RuntimeError(f"the snapshot captured {summary.tables} tables, expected {n}")
    say(
        f"many tables: {n} tables snapshotted in {snapshot_s:.1f} s "
        f"({snapshot_s / n:.2f} s per table, {rows / snapshot_s:,.0f} rows/s)"
    )
    with connection(config.source) as conn:
        all_schemas = validate(conn, config)
    with monitor.phase("many_tables_bronze_floor"):
        bronze_floor_s = bronze_floor(spark, config, all_schemas, bench.fresh_root("bronze-floor"))
    say(
        f"many tables: floor, the same rows, held in memory, written into {n} new Delta tables "
        f"({config.table_slots} at once): {bronze_floor_s:.1f} s"
    )
    single_root = bench.fresh_root("many-tables-single")
    single_config = bench.config(
        single_root, 2, job="bench_single", database=MANY_DATABASE, tables=[SINGLE_TABLE]
    )
    say(f"many tables: snapshot of {SINGLE_TABLE}, the same {rows:,} rows in one table (p2)")
    with monitor.phase("many_tables_single_snapshot"):
        single, single_s, single_profile = profiled_snapshot(spark, single_config, rows)
    shutil.rmtree(single_root, ignore_errors=True)
    say(
        f"many tables: one table snapshotted in {single_s:.1f} s ({single.chunks} chunks); "
        f"many / one = {snapshot_s / single_s:.2f}"
    )
    figures = {
        "snapshot_s": round(snapshot_s, 2),
        "snapshot_rows_s": round(rows / snapshot_s, 1),
        "snapshot_per_table_s": round(snapshot_s / n, 3),
        "chunks": summary.chunks,
        "single_table_snapshot_s": round(single_s, 2),
        "single_table_rows_s": round(rows / single_s, 1),
        "single_table_chunks": single.chunks,
        "snapshot_vs_single": round(snapshot_s / single_s, 3),
        "bronze_floor_s": round(bronze_floor_s, 2),
        "snapshot_vs_bronze_floor": round(snapshot_s / bronze_floor_s, 3),
    }
    return figures, {"snapshot": snap_profile, "single_table_snapshot": single_profile}


def catch_up_figures(
    bench: Bench, spark, monitor, root: Path, config, n: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Silver's catch-up after `BENCH_TOUCHED_ROWS` rows of `BENCH_TOUCHED_TABLES` tables were
    updated, its floors, and the touched tables' silver checked against the source: its figures
    and its profile."""
    from bench.data import MANY_DATABASE, many_table_names, touch_tables
    from bench.phases import breakdown
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate
    from binlake.stream.side_by_side import APPLY_THREADS

    touched_n = min(env_int("BENCH_TOUCHED_TABLES", 50), n)
    touched_rows = env_int("BENCH_TOUCHED_ROWS", 2)
    touched = many_table_names(n)[:: max(n // touched_n, 1)][:touched_n]
    check = bench.config(root, 2, job="bench_many", database=MANY_DATABASE, tables=touched)
    with connection(check.source) as conn:
        schemas = validate(conn, check)
    floor_root = bench.fresh_root("catchup-floor")
    for table in schemas:  # silver and the changelog as the catch-up will find them
        shutil.copytree(silver_path(config, table), floor_root / "silver" / table.name)
        if Path(changelog_path(config, table)).exists():
            shutil.copytree(changelog_path(config, table), floor_root / "changelog" / table.name)
    start = current_offset(bench, MANY_DATABASE)
    changed = touch_tables(bench.password or "", bench.port, touched, touched_rows)
    end = current_offset(bench, MANY_DATABASE)
    say(f"many tables: updated {changed} rows in {len(touched)} tables; catching up")
    catch_up = profiled_catch_up(spark, config, monitor, "many_tables_catchup")
    caught, catchup_s = catch_up.summary, catch_up.seconds
    with monitor.phase("many_tables_catchup_floor"):
        merge_s, append_s = catchup_floor(spark, config, schemas, floor_root, start, end)
    say(
        f"many tables: floor, bare MERGEs of the same changes into the {len(schemas)} silver "
        f"tables ({APPLY_THREADS} at once): {merge_s:.1f} s; the changelogs' bare "
        f"appends beside it: {append_s:.1f} s"
    )
    mismatched = mismatched_tables(bench, spark, check, schemas)
    identical = not mismatched and len(schemas) == len(touched) and caught.changes == changed
    say(
        f"many tables: catch-up of {changed} changes in {len(touched)} tables took "
        f"{catchup_s:.1f} s ({caught.batches} batches, {caught.changes} rows in); silver "
        f"{'matches' if identical else 'DIFFERS FROM'} the source"
        + (f" in {', '.join(mismatched)}" if mismatched else "")
    )
    stream_top = (
        "startup.validate", "ledger_read", "startup.check_available", "startup.ensure_silver",
        "startup.join_ready_tables", "batch",
    )  # fmt: skip
    figures = {
        "catchup_s": round(catchup_s, 2),
        "catchup_merge_floor_s": round(merge_s, 2),
        "catchup_vs_merge_floor": round(catchup_s / merge_s, 3),
        "catchup_append_floor_s": round(append_s, 2),
        "catchup_merge_and_append_floor_s": round(merge_s + append_s, 2),
        "catchup_vs_merge_and_append_floor": round(catchup_s / (merge_s + append_s), 3),
        "catchup_tables": len(touched),
        "catchup_changes": changed,
        "catchup_batches": caught.batches,
        "catchup_input_rows": caught.changes,
        "catchup_binlog_range": [start.to_dict(), end.to_dict()],
        "silver_matches_source": identical,
        "mismatched_tables": mismatched,
    }
    return figures, {
        "phases": catch_up.phases,
        "breakdown": breakdown(catch_up.phases, stream_top, catchup_s, n),
        "triggers": catch_up.triggers,
        "log": [m for _, m in catch_up.log.matching("applied in", "starting at")],
    }


def mismatched_tables(bench: Bench, spark, check, schemas) -> list[str]:
    """The touched tables whose silver differs from the source (count, sums, key range)."""
    from bench.data import MANY_DATABASE, table_fingerprint

    return [
        t.name
        for t in schemas
        if silver_fingerprint(spark, check, t)
        != table_fingerprint(bench.password or "", bench.port, t.name, MANY_DATABASE)
    ]


def bronze_floor(spark, config, tables, root: Path) -> float:
    """The floor of the many-tables snapshot: each table's rows, read back from its bronze
    table into the driver's memory beforehand (untimed), written by Spark alone into a new
    Delta table, as many tables at once as binlake's snapshot ran (`Config.table_slots`). No
    MySQL, no watermarks, no ledger, no Delta read: what Delta's per-table write costs in this
    session."""
    from binlake.lake.tables import bronze_table

    rows = {t.name: bronze_table(config, t).read(spark).toArrow() for t in tables}

    def write(name: str) -> None:
        spark.createDataFrame(rows[name]).write.format("delta").save(str(root / name))

    started = time.monotonic()
    with ThreadPoolExecutor(config.table_slots) as pool:
        list(pool.map(write, rows))
    seconds = time.monotonic() - started
    shutil.rmtree(root, ignore_errors=True)
    return seconds


def catchup_floor(spark, config, tables, root: Path, start, end) -> tuple[float, float]:
    """The floors of the many-tables catch-up, as many tables at once as binlake's sink applies
    (`side_by_side.APPLY_THREADS`): seconds of one bare MERGE per touched table of its collapsed
    changes (`FloorMerge`) into a copy of its silver taken before the updates, then seconds of the
    bare appends of its changelog rows (`FloorAppend`) to a copy of its changelog taken then (or
    to a new one): binlake writes both for every table a batch touches. Both run with the
    settings the sink chooses for these tables and changes (`batch_settings.settings_for`:
    interpreted queries where their silver tables are small, MERGEs that rewrite files where the
    changes are few), so a setting that lowers binlake's cost lowers its floor too."""
    from binlake.stream.batch_settings import settings_for
    from binlake.stream.side_by_side import APPLY_THREADS

    def each(step: Callable[[Any], Any], floors: list[Any]) -> float:
        started = time.monotonic()
        with ThreadPoolExecutor(APPLY_THREADS) as pool:
            list(pool.map(step, floors))
        return time.monotonic() - started

    merges = [
        FloorMerge(
            spark, config, table, str(root / "silver" / table.name),
            str(root / "changes" / table.name), start, end,
        )
        for table in tables
    ]  # fmt: skip
    appends = [
        FloorAppend(
            spark, config, table, root / "changelog" / table.name,
            root / "changelog-rows" / table.name, start, end,
        )
        for table in tables
    ]  # fmt: skip
    schemas = {table.qualified: table for table in tables}
    changes = {merge.table: merge.changelog_rows for merge in merges}
    with settings_for(spark, config, schemas, changes):
        merge_s, append_s = each(FloorMerge.merge, merges), each(FloorAppend.append, appends)
    shutil.rmtree(root, ignore_errors=True)
    return merge_s, append_s
