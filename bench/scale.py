"""`scale.*` (`BENCH_ONLY=scale`): what grows with the table. `bench.customer` is loaded at each
of `BENCH_SCALE_ROWS` (1,000,000, 5,000,000, 20,000,000) rows, smallest first, and at each size
the same figures are taken, in the bench's one process and session but for one snapshot:

- the snapshot's rows/s, binlake p2 (`commands.snapshot`, timed by `bench.many_tables.
  profiled_snapshot`) and Spark's JDBC reader (`bench.snapshot.jdbc`, baseline B), `BENCH_REPS`
  interleaved rounds, medians, and each size's rate against the smallest size's;
- the peak RSS of binlake's snapshot: in a new process, as a local `binlake snapshot` runs it
  (`CHILD`; its tree sampled by a `bench.monitor.Monitor` rooted at it: driver = its Python + its
  JVM, workers = its `pyspark.daemon` and forks), and in the bench's own process (`bench.monitor`
  per phase, beside the RSS the snapshots started from: one JVM runs every size, smallest first,
  and keeps much of the heap it has grown);
- the chunks of the ledger, and the start of `stream --available-now` with that ledger: runs with
  no changes, each timed from the call to the query's start (binlake's `starting at` log line)
  and to its end (`BENCH_SCALE_STARTS` runs, medians);
- silver's MERGE of a one-row batch and of a 10,000-change batch: `BENCH_SCALE_BATCHES` batches
  each (after `BENCH_SCALE_WARMUP` untimed ones of each, 2 by default), each made of UPDATEs of
  random existing keys through pymysql and caught up by one available-now run; the MERGE is
  `TableApply.merge_silver` as `bench.phases` times it, beside the sink's batch and the whole
  run; p50 and p95;
- bronze and silver on disk (bytes of their folders, every Delta version and log) and silver's
  live bytes and files (Delta's own figures) after silver is created; silver and the changelog
  again after the batches.

At the smallest size, with `BENCH_SCALE_MANY_CHUNKS` (on by default), a second lake of the same
table is snapshotted with `snapshot.chunk_size` chosen for ~20,000 chunks and its silver
created; then starts of both lakes alternate (`BENCH_SCALE_STARTS` each, the order reversed
every round): the stream's start with a 20,000-chunk ledger against the default's (124 chunks at
1,000,000 rows).

The issue's targets are ratios within the run: the largest size against the smallest (the
snapshot's rows/s ≥ 0.9×, the new process's peak memory ≤ 1.2×, the one-row MERGE's p95
≤ 1.5×, the 10,000-change MERGE's p95 ≤ 2×) and the 20,000-chunk start against the default's
(≤ 2×).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    ROOT,
    Bench,
    alternated,
    create_silver,
    cursor,
    env_int,
    profiled_catch_up,
    say,
    silver_fingerprint,
)

#: The sizes the targets are set for (the smallest and the largest `BENCH_SCALE_ROWS`).
TARGET_SIZES = (1_000_000, 20_000_000)
#: The chunks the many-chunks lake's `snapshot.chunk_size` is chosen for.
MANY_CHUNKS = 20_000
#: Keys per UPDATE statement of a batch (each statement one autocommit transaction).
STATEMENT_KEYS = 1_000
#: The batches whose MERGE is timed: result key, changes per batch, label.
BATCH_KINDS = (("merge_one_row", 1, "one-row batch"), ("merge_10k", 10_000, "10,000-change batch"))
#: The issue whose targets these are (set with the scale scenario).
ISSUE = "issue 72"

#: A new process's snapshot of `bench.customer` into the lake root `argv[1]`, as the local
#: command `binlake snapshot` runs it (a session as binlake builds it, then `commands.snapshot`):
#: prints its figures, then holds its JVM and workers until its stdin ends, so the parent stops
#: sampling them before they exit.
CHILD = """
import json, sys, time
from pathlib import Path
from bench.common import Bench
from binlake.jobs import commands
from binlake.runtime.spark import local_session
spark = local_session("binlake-bench-scale", 2)
config = Bench().config(Path(sys.argv[1]), 2)
started = time.monotonic()
summary = commands.snapshot(spark, config)
seconds = time.monotonic() - started
print(json.dumps({"rows": summary.rows, "chunks": summary.chunks, "s": seconds}), flush=True)
sys.stdin.read()
spark.stop()
"""


def scale_rows() -> list[int]:
    """`BENCH_SCALE_ROWS`: the table's sizes, smallest first."""
    text = os.environ.get("BENCH_SCALE_ROWS", "") or "1000000,5000000,20000000"
    return sorted({int(part.strip().replace("_", "")) for part in text.split(",") if part.strip()})


def scale(bench: Bench, spark: Any, monitor: Any) -> dict[str, Any]:
    """Every size's figures (`sizes`, by rows), the many-chunks lake's start against the
    default's (`many_chunks`), and the targets."""
    from bench.data import drop_table

    sizes = scale_rows()
    batches = max(env_int("BENCH_SCALE_BATCHES", 5), 1)
    warmups = max(env_int("BENCH_SCALE_WARMUP", 2), 0)
    starts = max(env_int("BENCH_SCALE_STARTS", 3), 1)
    many_chunks_on = env_int("BENCH_SCALE_MANY_CHUNKS", 1) > 0
    rows_before = bench.rows
    by_size: dict[str, dict[str, Any]] = {}
    many: dict[str, Any] | None = None
    try:
        for rows in sizes:
            bench.rows = rows  # what `bench.snapshot.jdbc` reads and checks
            figures, config = one_size(bench, spark, monitor, rows, (warmups, batches), starts)
            by_size[str(rows)] = figures
            if rows == sizes[0] and many_chunks_on:
                many = many_chunks(bench, spark, monitor, config, figures, starts)
            shutil.rmtree(Path(config.lake.root), ignore_errors=True)
    finally:
        bench.rows = rows_before
    drop_table(bench.password or "", bench.port, "customer")
    relative_to_smallest(by_size)
    result: dict[str, Any] = {
        "sizes_rows": sizes,
        "chunk_size": bench.chunk_size,
        "repetitions": bench.reps,
        "batches": batches,
        "warmup_batches": warmups,
        "starts": starts,
        "sizes": by_size,
        "many_chunks": many,
    }
    result["targets"] = scale_targets(result)
    return result


def one_size(
    bench: Bench, spark: Any, monitor: Any, rows: int, batches: tuple[int, int], starts: int
) -> tuple[dict[str, Any], Any]:
    """`bench.customer` loaded with `rows` rows, snapshotted (binlake and the JDBC baseline, and
    binlake in a new process), its silver created, the stream's starts and MERGEs timed
    (`batches`: untimed warm-ups and timed batches of each kind): the size's figures, and the
    config of the lake kept (the last binlake snapshot's)."""
    from bench.data import create_and_load, table_fingerprint
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate

    tag = f"scale_{rows}"
    say(f"scale: {rows:,} rows: loading bench.customer with LOAD DATA LOCAL INFILE")
    with monitor.phase(f"{tag}_load"):
        started = time.monotonic()
        load_data_s = create_and_load(bench.password or "", bench.port, rows)
        load_s = time.monotonic() - started
    figures: dict[str, Any] = {
        "rows": rows,
        "load_s": round(load_s, 2),
        "load_data_rows_s": round(rows / load_data_s, 1),
    }
    snapshots, config = snapshot_rates(bench, spark, monitor, rows)
    figures.update(snapshots)
    figures["process_snapshot"] = process_snapshot(bench, monitor, rows)
    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    figures["silver_init_s"] = round(create_silver(spark, config, monitor, f"{tag}_silver_init"), 2)
    figures["disk"] = on_disk(spark, config, table)
    say(
        f"scale: {rows:,} rows: silver created in {figures['silver_init_s']} s; on disk bronze "
        f"{figures['disk']['bronze_bytes']:,} bytes, silver {figures['disk']['silver_bytes']:,}"
    )
    figures["start"] = stream_starts(spark, {"default": config}, monitor, tag, starts)["default"]
    say(
        f"scale: {rows:,} rows: stream start with {figures['ledger_chunks']:,} ledger chunks: "
        f"{figures['start']['s']} s to its end, {figures['start']['to_query_s']} s to its query"
    )
    rnd = random.Random(rows)
    for key, changes, label in BATCH_KINDS:
        figures[key] = merge_batches(bench, spark, monitor, config, rnd, changes, batches, tag)
        say(
            f"scale: {rows:,} rows: {label}: MERGE p50 {figures[key]['merge_p50_s']} s, p95 "
            f"{figures[key]['merge_p95_s']} s (sink batch p95 {figures[key]['batch_p95_s']} s)"
        )
    source = table_fingerprint(bench.password or "", bench.port)
    figures["silver_matches_source"] = silver_fingerprint(spark, config) == source
    figures["disk_after_batches"] = on_disk(spark, config, table)
    if not figures["silver_matches_source"]:
        say(f"scale: {rows:,} rows: silver DIFFERS FROM the source")
    return figures, config


def snapshot_rates(bench: Bench, spark: Any, monitor: Any, rows: int) -> tuple[dict[str, Any], Any]:
    """binlake's p2 snapshot and the JDBC baseline, `BENCH_REPS` rounds, the order reversed every
    round; binlake's last snapshot is kept (the lake the stream runs on). Medians, samples, the
    ledger's chunks, and the peak RSS of binlake's snapshots."""
    from bench.many_tables import profiled_snapshot
    from bench.snapshot import jdbc, median_of

    tag = f"scale_{rows}"
    samples: dict[str, list[float]] = {"binlake_p2_rows_s": [], "jdbc_p2_rows_s": []}
    seconds: list[float] = []
    at_start = monitor.sample()
    kept = None
    for rep in range(bench.reps):
        order = ("binlake", "jdbc") if rep % 2 == 0 else ("jdbc", "binlake")
        for kind in order:
            if kind == "jdbc":
                with monitor.phase(f"{tag}_jdbc"):
                    samples["jdbc_p2_rows_s"].append(jdbc(bench, spark, rep))
                continue
            last = rep == bench.reps - 1
            name = f"scale-{rows}" if last else f"scale-{rows}-{rep}"
            config = bench.config(bench.fresh_root(name), 2)
            with monitor.phase(f"{tag}_binlake_snapshot"):
                summary, snapshot_s, profile = profiled_snapshot(spark, config, rows)
            samples["binlake_p2_rows_s"].append(rows / snapshot_s)
            seconds.append(snapshot_s)
            if last:
                kept = (config, summary, profile)
            else:
                shutil.rmtree(Path(config.lake.root), ignore_errors=True)
        say(
            f"scale: {rows:,} rows, round {rep + 1}/{bench.reps}: binlake p2 "
            f"{samples['binlake_p2_rows_s'][-1]:,.0f} rows/s, Spark JDBC p2 "
            f"{samples['jdbc_p2_rows_s'][-1]:,.0f} rows/s"
        )
    assert kept is not None
    config, summary, profile = kept
    peaks = monitor.phase_peak_mb.get(f"{tag}_binlake_snapshot", {})
    binlake = median_of(samples["binlake_p2_rows_s"])
    baseline = median_of(samples["jdbc_p2_rows_s"])
    return {
        "binlake_p2_rows_s": binlake,
        "jdbc_p2_rows_s": baseline,
        "binlake_vs_jdbc": round(binlake / baseline, 3),
        "snapshot_s": round(statistics.median(seconds), 2),
        "ledger_chunks": summary.chunks,
        "memory": {
            "driver_peak_mb": round(peaks.get("driver", 0.0), 1),
            "driver_jvm_peak_mb": round(peaks.get("driver_jvm", 0.0), 1),
            "driver_python_peak_mb": round(peaks.get("driver_python", 0.0), 1),
            "workers_peak_mb": round(peaks.get("workers", 0.0), 1),
            "driver_start_mb": round(at_start["driver_python"] + at_start["driver_jvm"], 1),
            "workers_start_mb": round(at_start["workers"], 1),
        },
        "snapshot_samples": {k: [round(x, 1) for x in v] for k, v in samples.items()},
        "snapshot_phases": profile["breakdown"],
    }, config


def process_snapshot(bench: Bench, monitor: Any, rows: int) -> dict[str, Any]:
    """binlake's snapshot in a new process (`CHILD`), as a local `binlake snapshot` runs it: its
    rows/s (the JVM's start excluded, its JIT cold) and the peak RSS of its process tree, sampled
    by a `bench.monitor.Monitor` rooted at the child (driver = the child's Python + its JVM,
    workers = its `pyspark.daemon` and forks): memory a size needs, apart from what the bench's
    own JVM kept from the sizes before."""
    from bench.monitor import Monitor

    root = bench.fresh_root(f"scale-{rows}-process")
    with (
        monitor.phase(f"scale_{rows}_process_snapshot"),
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
    ):
        command = [sys.executable, "-c", CHILD, str(root)]
        child = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=out, stderr=err)
        watch = Monitor()
        watch.me = child.pid  # the child's tree, not this process's
        watch.start()
        try:
            line = None
            while line is None and not _exited(child.pid):
                time.sleep(0.5)
                out.seek(0)
                line = next((x for x in out.read().splitlines() if x.startswith("{")), None)
        finally:
            watch.stop()  # before the child exits: the sampler's root must stay alive
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=300)
        err.seek(0)
        errors = err.read()
    shutil.rmtree(root, ignore_errors=True)
    if line is None:
        raise RuntimeError(f"the new process's snapshot failed: {errors[-3000:]}")
    done = json.loads(line)
    if done["rows"] != rows:
        raise RuntimeError(f"the new process's snapshot read {done['rows']} rows, expected {rows}")
    figures = {
        "rows_s": round(rows / done["s"], 1),
        "s": round(done["s"], 2),
        "chunks": done["chunks"],
        "driver_peak_mb": round(watch.peak_mb["driver"], 1),
        "workers_peak_mb": round(watch.peak_mb["workers"], 1),
        "worker_single_peak_mb": round(watch.peak_mb["worker_single"], 1),
    }
    say(
        f"scale: {rows:,} rows: a new process's snapshot {figures['rows_s']:,.0f} rows/s, peak "
        f"RSS driver {figures['driver_peak_mb']:,.0f} MB, workers "
        f"{figures['workers_peak_mb']:,.0f} MB"
    )
    return figures


def _exited(pid: int) -> bool:
    """Whether child `pid` has ended, without reaping it."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def stream_starts(
    spark: Any, configs: dict[str, Any], monitor: Any, tag: str, runs: int
) -> dict[str, dict[str, Any]]:
    """`runs` available-now runs with nothing to catch up of each lake of `configs` (by name),
    alternated when there are two (`bench.common.alternated`, the order reversed each round):
    per lake the medians of the seconds from the call to the query's start (binlake's
    `stream …: starting at` line: validation, the ledger's read, silver's checks) and to the
    run's end, and of the ledger's read (`bench.phases`), with the samples."""
    names = list(configs)
    plan = alternated(runs, ()) if len(names) == 2 else [names[0]] * runs
    kinds = dict(zip(("before", "now"), names, strict=False)) if len(names) == 2 else {}
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for kind in plan:
        name = kinds.get(kind, kind)
        began = time.time()
        run = profiled_catch_up(spark, configs[name], monitor, f"{tag}_start_{name}")
        query_at = next((t for t, _ in run.log.matching("starting at")), None)
        ledger = run.phases.get("ledger_read", {})
        samples[name].append(
            {
                "s": run.seconds,
                "to_query_s": query_at - began if query_at is not None else float("nan"),
                "ledger_read_s": ledger.get("s") or 0.0,
                "changes": run.summary.changes,
            }
        )
    return {
        name: {
            "s": round(statistics.median(r["s"] for r in done), 2),
            "to_query_s": round(statistics.median(r["to_query_s"] for r in done), 2),
            "ledger_read_s": round(statistics.median(r["ledger_read_s"] for r in done), 2),
            "samples": [{k: round(v, 3) for k, v in r.items()} for r in done],
        }
        for name, done in samples.items()
    }


def update_random_keys(bench: Bench, rnd: random.Random, rows: int, keys: int, mark: str) -> int:
    """`keys` distinct random keys of `bench.customer` (keys 1..`rows`) updated through pymysql
    (`c_birth_day` moved, `c_login` set to `mark`), in autocommit statements of at most
    `STATEMENT_KEYS` keys: the rows changed."""
    chosen = rnd.sample(range(1, rows + 1), keys)
    changed = 0
    with cursor(bench) as cur:
        for at in range(0, len(chosen), STATEMENT_KEYS):
            part = chosen[at : at + STATEMENT_KEYS]
            cur.execute(
                "UPDATE customer SET c_birth_day = 1 + (c_birth_day + 1) %% 28, c_login = %s "
                f"WHERE c_customer_sk IN ({', '.join(['%s'] * len(part))})",
                [mark, *part],
            )
            changed += cur.rowcount
    return changed


def merge_batches(
    bench: Bench,
    spark: Any,
    monitor: Any,
    config: Any,
    rnd: random.Random,
    changes: int,
    batches: tuple[int, int],
    tag: str,
) -> dict[str, Any]:
    """`batches` = (warm-ups, timed): batches of `changes` updated random keys, each caught up
    by one available-now run; of the timed ones, p50 and p95 of silver's MERGE
    (`batch.table.merge`), of the sink's batch (`batch`) and of the whole run, with the
    samples."""
    from bench.latency import percentile

    phase = f"{tag}_merge_{changes}"
    done: list[dict[str, Any]] = []
    warmups, timed = batches
    for index in range(warmups + timed):
        mark = f"scale{rnd.randrange(10**8):08d}"
        changed = update_random_keys(bench, rnd, bench.rows, changes, mark)
        run = profiled_catch_up(spark, config, monitor, phase)
        merge, batch = run.phases.get("batch.table.merge", {}), run.phases.get("batch", {})
        if index < warmups:  # the first MERGEs into this silver: not timed
            continue
        done.append(
            {
                "merge_s": merge.get("s"),
                "merges": merge.get("calls"),
                "batch_s": batch.get("s"),
                "run_s": round(run.seconds, 3),
                "changes": changed,
                "changes_read": run.summary.changes,
                "batches": run.summary.batches,
            }
        )

    def of(key: str, q: int) -> float | None:
        values = [d[key] for d in done if d[key] is not None]
        return percentile(values, q) if len(values) == len(done) else None

    return {
        "changes_per_batch": changes,
        "merge_p50_s": of("merge_s", 50),
        "merge_p95_s": of("merge_s", 95),
        "batch_p50_s": of("batch_s", 50),
        "batch_p95_s": of("batch_s", 95),
        "run_p50_s": of("run_s", 50),
        "run_p95_s": of("run_s", 95),
        "all_read": all(d["changes_read"] == d["changes"] for d in done),
        "samples": done,
    }


def folder_bytes(path: str) -> int:
    """Bytes of every file under `path` (every Delta version's files and its log)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def on_disk(spark: Any, config: Any, table: Any) -> dict[str, Any]:
    """Bronze, silver and the changelog on disk (their folders; binlake creates the changelog
    with a batch's first changes), and silver's live bytes and files (Delta's `sizeInBytes`,
    `numFiles`)."""
    from bench.floors import changelog_path, silver_path
    from binlake.lake.tables import bronze_table
    from binlake.silver.merge import silver_table

    changelog = changelog_path(config, table)
    live = silver_table(config, table).size(spark)
    return {
        "bronze_bytes": folder_bytes(bronze_table(config, table).path),
        "silver_bytes": folder_bytes(silver_path(config, table)),
        "changelog_bytes": folder_bytes(changelog) if Path(changelog).exists() else 0,
        "silver_live_bytes": live.bytes if live else None,
        "silver_live_files": live.files if live else None,
    }


def many_chunks(
    bench: Bench, spark: Any, monitor: Any, default: Any, figures: dict[str, Any], starts: int
) -> dict[str, Any]:
    """A second lake of the same table, snapshotted with `snapshot.chunk_size` chosen for
    ~`MANY_CHUNKS` chunks and its silver created; then the stream's starts of both lakes
    alternated: the many-chunks start against the default's."""
    from bench.many_tables import profiled_snapshot

    rows = bench.rows
    chunk_size = max(rows // MANY_CHUNKS, 1)
    saved = bench.chunk_size
    bench.chunk_size = chunk_size
    try:
        config = bench.config(bench.fresh_root(f"scale-{rows}-many-chunks"), 2)
    finally:
        bench.chunk_size = saved
    say(f"scale: many chunks: snapshot of {rows:,} rows at chunk_size {chunk_size}")
    with monitor.phase("scale_many_chunks_snapshot"):
        summary, snapshot_s, profile = profiled_snapshot(spark, config, rows)
    init_s = create_silver(spark, config, monitor, "scale_many_chunks_silver_init")
    say(
        f"scale: many chunks: {summary.chunks:,} chunks snapshotted in {snapshot_s:.1f} s, "
        f"silver in {init_s:.1f} s; starts of both lakes, alternated"
    )
    both = stream_starts(
        spark, {"default": default, "many_chunks": config}, monitor, "scale_many_chunks", starts
    )
    shutil.rmtree(Path(config.lake.root), ignore_errors=True)
    ratio = both["many_chunks"]["s"] / both["default"]["s"]
    say(
        f"scale: stream start with {summary.chunks:,} ledger chunks {both['many_chunks']['s']} s, "
        f"with {figures['ledger_chunks']:,} {both['default']['s']} s: {ratio:.2f}×"
    )
    return {
        "rows": rows,
        "chunk_size": chunk_size,
        "chunks": summary.chunks,
        "snapshot_s": round(snapshot_s, 2),
        "snapshot_rows_s": round(rows / snapshot_s, 1),
        "snapshot_phases": profile["breakdown"],
        "silver_init_s": round(init_s, 2),
        "default_chunk_size": bench.chunk_size,
        "default_chunks": figures["ledger_chunks"],
        "start": both["many_chunks"],
        "default_start": both["default"],
        "start_vs_default": round(ratio, 3),
    }


# --------------------------------------------------------------------------- ratios and targets


def relative_to_smallest(by_size: dict[str, dict[str, Any]]) -> None:
    """Each size's figures against the smallest size's (`*_vs_smallest`)."""
    if not by_size:
        return
    base = next(iter(by_size.values()))
    for figures in by_size.values():
        vs: dict[str, float | None] = {}
        for name, get in _SCALED.items():
            mine, theirs = get(figures), get(base)
            vs[name] = round(mine / theirs, 3) if mine is not None and theirs else None
        figures["vs_smallest"] = vs


#: The figures compared across sizes, by name: how to read each from a size's figures.
_SCALED = {
    "binlake_p2_rows_s": lambda f: f["binlake_p2_rows_s"],
    "jdbc_p2_rows_s": lambda f: f["jdbc_p2_rows_s"],
    "driver_peak_mb": lambda f: f["process_snapshot"]["driver_peak_mb"],
    "workers_peak_mb": lambda f: f["process_snapshot"]["workers_peak_mb"],
    "in_process_driver_peak_mb": lambda f: f["memory"]["driver_peak_mb"],
    "in_process_workers_peak_mb": lambda f: f["memory"]["workers_peak_mb"],
    "process_rows_s": lambda f: f["process_snapshot"]["rows_s"],
    "start_s": lambda f: f["start"]["s"],
    "merge_one_row_p95_s": lambda f: f["merge_one_row"]["merge_p95_s"],
    "merge_10k_p95_s": lambda f: f["merge_10k"]["merge_p95_s"],
    "silver_bytes": lambda f: f["disk"]["silver_bytes"],
}

#: The issue's targets across sizes: (figure in `_SCALED`, what, op, factor of the smallest's).
_SIZE_TARGETS = (
    ("binlake_p2_rows_s", "binlake p2 snapshot rows/s", ">=", 0.9),
    (
        "driver_peak_mb",
        "peak RSS of the driver (Python + JVM), a new process's snapshot",
        "<=",
        1.2,
    ),
    ("workers_peak_mb", "peak RSS of the Python workers, a new process's snapshot", "<=", 1.2),
    ("merge_one_row_p95_s", "silver MERGE of a one-row batch, p95", "<=", 1.5),
    ("merge_10k_p95_s", "silver MERGE of a 10,000-change batch, p95", "<=", 2.0),
)


def _met(ratio: float | None, op: str, bound: float, correct: bool = True) -> bool | None:
    if ratio is None:
        return None
    return bool(ratio >= bound if op == ">=" else ratio <= bound) and correct


def scale_targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each a ratio measured in the run (the largest size against the
    smallest; the many-chunks start against the default's) with its bound and met / missed
    (`met`: None = not measured)."""
    sizes = list(r["sizes"].values())
    out: list[dict[str, Any]] = []
    smallest, largest = (sizes[0], sizes[-1]) if sizes else ({}, {})
    note = ""
    if (smallest.get("rows"), largest.get("rows")) != TARGET_SIZES:
        note = (
            f"measured on {smallest.get('rows', 0):,} → {largest.get('rows', 0):,} rows; the "
            f"target is set for {TARGET_SIZES[0]:,} → {TARGET_SIZES[1]:,}"
        )
    correct = all(s["silver_matches_source"] for s in sizes)
    for name, what, op, bound in _SIZE_TARGETS:
        ratio = largest["vs_smallest"][name] if len(sizes) > 1 else None
        merge = name.startswith("merge_")
        notes = [note] if note else []
        if merge and not correct:
            notes.append("result not correct: silver differs from the source")
        out.append(
            {
                "key": name,
                "what": what,
                "base": _SCALED[name](smallest) if sizes else None,
                "figure": _SCALED[name](largest) if len(sizes) > 1 else None,
                "ratio": ratio,
                "op": op,
                "bound": bound,
                "met": _met(ratio, op, bound, correct or not merge),
                "note": "; ".join(notes) if len(sizes) > 1 else "one size only",
            }
        )
    many = r.get("many_chunks")
    out.append(
        {
            "key": "many_chunks.start_s",
            "what": f"stream start (available-now, no changes) with a ~{MANY_CHUNKS:,}-chunk "
            "ledger, against the default chunk_size's",
            "base": many["default_start"]["s"] if many else None,
            "figure": many["start"]["s"] if many else None,
            "ratio": many["start_vs_default"] if many else None,
            "op": "<=",
            "bound": 2.0,
            "met": _met(many["start_vs_default"], "<=", 2.0) if many else None,
            "note": (
                f"{many['chunks']:,} chunks against {many['default_chunks']:,}, "
                f"{many['rows']:,} rows"
                if many
                else "BENCH_SCALE_MANY_CHUNKS=0"
            ),
        }
    )
    return out


# --------------------------------------------------------------------------- the result files


def scale_markdown(results: dict[str, Any]) -> str:
    """The scenario's Markdown: the targets, then a table per figure."""
    from bench import report

    fmt = report._fmt
    r, mc, m = results["scale"], results["machine"], results["memory"]
    sizes = list(r["sizes"].values())
    lines = [
        f"# binlake benchmark {results['date']}: scale",
        "",
        f"`bench.customer` at {', '.join(f'{n:,}' for n in r['sizes_rows'])} rows, smallest "
        f"first, in one process (bench/scale.py); snapshots: median of {r['repetitions']} "
        f"interleaved round(s), chunk_size {r['chunk_size']}; MERGEs: {r['batches']} batches "
        f"of each kind after {r['warmup_batches']} untimed; starts: median of {r['starts']}. "
        f"{mc['cores']} cores, "
        f"{mc['ram_gb']} GB, {mc['cpu_model']}; MariaDB {mc['mariadb_version']}; Spark "
        f"{mc['spark_version']} local[2]; load average {mc['loadavg_at_start']} → "
        f"{mc['loadavg_at_end']}.",
        "",
        f"| target ({ISSUE}) | base | figure | figure / base | bound | result | note |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for t in r["targets"]:
        lines.append(
            f"| {t['what']} | {report._digits(t['base'])} | {report._digits(t['figure'])} | "
            f"{fmt(t['ratio'], 2)}× | {'≥' if t['op'] == '>=' else '≤'} {t['bound']}× | "
            f"{_result(t['met'])} | {t['note']} |"
        )
    lines += [
        "",
        "base: the smallest size's figure (for the start, the default chunk_size's ledger); "
        f"figure: the largest size's (the ~{MANY_CHUNKS:,}-chunk ledger's).",
    ]

    def target(name: str, f: dict[str, Any]) -> str:
        """The size's ratio against the bound of `name`'s target (the smallest: the base)."""
        if f is sizes[0]:
            return "base"
        op, bound = next((op, b) for key, _, op, b in _SIZE_TARGETS if key == name)
        ratio = f["vs_smallest"][name]
        sign = "≥" if op == ">=" else "≤"
        return f"{sign} {bound}×: {_result(_met(ratio, op, bound))}"

    lines += [
        "",
        "## Snapshot",
        "",
        "| rows | binlake p2 rows/s | vs smallest | target | Spark JDBC p2 rows/s | vs smallest "
        "| binlake / JDBC | binlake s | ledger chunks | binlake p2 in a new process rows/s |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {f['rows']:,} | {fmt(f['binlake_p2_rows_s'])} | "
            f"{fmt(f['vs_smallest']['binlake_p2_rows_s'], 2)} | {target('binlake_p2_rows_s', f)} | "
            f"{fmt(f['jdbc_p2_rows_s'])} | {fmt(f['vs_smallest']['jdbc_p2_rows_s'], 2)} | "
            f"{fmt(f['binlake_vs_jdbc'], 2)} | {f['snapshot_s']} | {f['ledger_chunks']:,} | "
            f"{fmt(f['process_snapshot']['rows_s'])} |"
            for f in sizes
        ],
        "",
        "binlake p2 and the JDBC baseline (`bench.snapshot.jdbc`) in the bench's process, warm, "
        "median of the rounds; the new process's snapshot (JVM start excluded, JIT cold) is the "
        "one its memory is taken from.",
        "",
        "## Peak memory of binlake's snapshot (RSS, MB)",
        "",
        "A new process per size, as a local `binlake snapshot` runs (the targets), and the "
        "bench's own process (its snapshots of the size; the sizes run smallest first in one "
        "JVM, which keeps much of the heap it has grown, so its figures are held beside the RSS "
        "they started from):",
        "",
        "| rows | new process: driver (Python + JVM) | vs smallest | target | Python workers "
        "(sum) | vs smallest | target | largest worker | bench's process: driver | ↳ JVM | "
        "driver at start | workers |",
        "|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|",
        *[
            f"| {f['rows']:,} | {fmt(f['process_snapshot']['driver_peak_mb'])} | "
            f"{fmt(f['vs_smallest']['driver_peak_mb'], 2)} | {target('driver_peak_mb', f)} | "
            f"{fmt(f['process_snapshot']['workers_peak_mb'])} | "
            f"{fmt(f['vs_smallest']['workers_peak_mb'], 2)} | {target('workers_peak_mb', f)} | "
            f"{fmt(f['process_snapshot']['worker_single_peak_mb'])} | "
            f"{fmt(f['memory']['driver_peak_mb'])} | {fmt(f['memory']['driver_jvm_peak_mb'])} | "
            f"{fmt(f['memory']['driver_start_mb'])} | {fmt(f['memory']['workers_peak_mb'])} |"
            for f in sizes
        ],
        "",
        "## Stream start (available-now, nothing to catch up)",
        "",
        "| rows | ledger chunks | to its end s | to its query s | ledger read s | silver "
        "created s |",
        "|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {f['rows']:,} | {f['ledger_chunks']:,} | {f['start']['s']} | "
            f"{f['start']['to_query_s']} | {f['start']['ledger_read_s']} | {f['silver_init_s']} |"
            for f in sizes
        ],
        "",
        *_many_chunks_table(r.get("many_chunks")),
    ]
    for key, _, label in BATCH_KINDS:
        name = f"{key}_p95_s"
        lines += [
            f"## Silver MERGE of a {label} (random existing keys updated)",
            "",
            "| rows | MERGE p50 s | MERGE p95 s | p95 vs smallest | target | sink batch p50 / p95 "
            "s | available-now run p50 / p95 s | all changes read |",
            "|---:|---:|---:|---:|---|---:|---:|---|",
            *[
                f"| {f['rows']:,} | {fmt(f[key]['merge_p50_s'], 2)} | "
                f"{fmt(f[key]['merge_p95_s'], 2)} | {fmt(f['vs_smallest'][name], 2)} | "
                f"{target(name, f)} | {fmt(f[key]['batch_p50_s'], 2)} / "
                f"{fmt(f[key]['batch_p95_s'], 2)} | {fmt(f[key]['run_p50_s'], 2)} / "
                f"{fmt(f[key]['run_p95_s'], 2)} | {f[key]['all_read']} |"
                for f in sizes
            ],
            "",
        ]
    lines += [
        "## On disk",
        "",
        "Folders' bytes (every Delta version and log) after silver is created, and after the "
        "MERGE batches (bronze is the snapshot's alone: the stream writes silver and the "
        "changelog):",
        "",
        "| rows | bronze bytes | silver bytes | silver live bytes / files | bytes per row: "
        "bronze / silver | after the batches: silver / changelog bytes | silver matches "
        "source |",
        "|---:|---:|---:|---:|---:|---:|---|",
        *[
            f"| {f['rows']:,} | {fmt(f['disk']['bronze_bytes'])} | "
            f"{fmt(f['disk']['silver_bytes'])} | "
            f"{fmt(f['disk']['silver_live_bytes'])} / {f['disk']['silver_live_files']} | "
            f"{f['disk']['bronze_bytes'] / f['rows']:.1f} / "
            f"{f['disk']['silver_bytes'] / f['rows']:.1f} | "
            f"{fmt(f['disk_after_batches']['silver_bytes'])} / "
            f"{fmt(f['disk_after_batches']['changelog_bytes'])} | {f['silver_matches_source']} |"
            for f in sizes
        ],
        "",
        f"Peak RSS of the whole run: driver (Python + JVM) {fmt(m['driver_peak_mb'])} MB, Python "
        f"workers (sum) {fmt(m['worker_peak_mb'])} MB (the new processes' JVMs and workers "
        "count there too while they run: the bench samples its whole process tree).",
        "",
        "| phase | wall s | machine busy CPU s | JVM CPU s | driver Python CPU s | workers CPU s | mariadbd CPU s |",  # noqa: E501
        "|---|---:|---:|---:|---:|---:|---:|",
        *report._cpu_rows(results),
    ]
    return "\n".join(lines) + "\n"


def _many_chunks_table(many: dict[str, Any] | None) -> list[str]:
    if not many:
        return []
    met = _result(_met(many["start_vs_default"], "<=", 2.0))
    return [
        f"Many chunks, {many['rows']:,} rows: the same table snapshotted again at chunk_size "
        f"{many['chunk_size']} ({many['snapshot_s']} s, silver in {many['silver_init_s']} s); "
        "the starts of both lakes alternated:",
        "",
        "| ledger | chunks | to its end s | to its query s | ledger read s | vs default | target |",
        "|---|---:|---:|---:|---:|---:|---|",
        f"| chunk_size {many['default_chunk_size']} | {many['default_chunks']:,} | "
        f"{many['default_start']['s']} | {many['default_start']['to_query_s']} | "
        f"{many['default_start']['ledger_read_s']} | base | |",
        f"| chunk_size {many['chunk_size']} | {many['chunks']:,} | {many['start']['s']} | "
        f"{many['start']['to_query_s']} | {many['start']['ledger_read_s']} | "
        f"{many['start_vs_default']:.2f} | ≤ 2×: {met} |",
        "",
    ]


def _result(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def scale_chart(path: Path, results: dict[str, Any]) -> None:
    """Each figure against the table's rows (log scale), one panel per figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = results["scale"]
    sizes = list(r["sizes"].values())
    x = [f["rows"] for f in sizes]
    panels = [
        ("snapshot rows/s", [("binlake p2", _SCALED["binlake_p2_rows_s"]),
                             ("Spark JDBC p2", _SCALED["jdbc_p2_rows_s"])]),
        ("peak RSS of binlake's snapshot, MB", [
            ("new process: driver (Python + JVM)", _SCALED["driver_peak_mb"]),
            ("new process: Python workers (sum)", _SCALED["workers_peak_mb"]),
            ("bench's process: driver", _SCALED["in_process_driver_peak_mb"])]),
        ("stream start (no changes), s", [
            ("to its end", _SCALED["start_s"]),
            ("to its query", lambda f: f["start"]["to_query_s"])]),
        ("silver MERGE, one-row batch, s", [
            ("p50", lambda f: f["merge_one_row"]["merge_p50_s"]),
            ("p95", _SCALED["merge_one_row_p95_s"])]),
        ("silver MERGE, 10,000-change batch, s", [
            ("p50", lambda f: f["merge_10k"]["merge_p50_s"]),
            ("p95", _SCALED["merge_10k_p95_s"])]),
        ("on disk after silver's creation, bytes", [
            ("bronze", lambda f: f["disk"]["bronze_bytes"]),
            ("silver", _SCALED["silver_bytes"])]),
    ]  # fmt: skip
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), dpi=110)
    for ax, (title, series) in zip(axes.flat, panels, strict=True):
        for label, get in series:
            ax.plot(x, [get(f) for f in sizes], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{n:,}" for n in x], fontsize=7)
        ax.minorticks_off()
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("table rows", fontsize=8)
        ax.grid(alpha=0.3)
    many = r.get("many_chunks")
    if many:  # the many-chunks lake's start beside the default's, at the smallest size
        axes.flat[2].scatter([many["rows"]], [many["start"]["s"]], marker="x", color="crimson",
                             zorder=3, label=f"to its end, {many['chunks']:,} chunks")  # fmt: skip
    for ax in axes.flat:
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"binlake {results['date']}: scale ({', '.join(f'{n:,}' for n in x)} rows), "
        f"{results['machine']['cores']} cores",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
