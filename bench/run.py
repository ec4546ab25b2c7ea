"""`make bench` / `python -m bench.run`: binlake's snapshot and stream throughput, measured in
one run on one data set against two baselines (the C client and Spark's JDBC reader), plus
end-to-end latency, the stream's MERGE floor, many small tables against one table of the same
rows, a backlog drained in bounded batches against one batch, peak memory and Python-side
profiles. See bench/README.md.

Environment: BENCH_ROWS (1,000,000), BENCH_REPS (3), BENCH_CHUNK_SIZE (8096),
BENCH_CHUNKS_PER_COMMIT (0 = binlake's default, 4 × parallelism), BENCH_BURST (200,000 row
changes), BENCH_UPDATE_RATE (500/s), BENCH_LATENCY_MARKERS (30), BENCH_PROFILE_CHUNKS (8),
BENCH_PROFILE_CHANGES (60,000), BENCH_SKIP_PROFILE, BENCH_TABLES (200; 0 skips the many-tables
scenario), BENCH_TABLE_ROWS (1,000), BENCH_TOUCHED_TABLES (50), BENCH_TOUCHED_ROWS (2),
BENCH_BACKLOG (1,000,000 row changes; 0 skips the backlog drain), BENCH_BACKLOG_ROWS
(= BENCH_BACKLOG), BENCH_STARTUP_ROUNDS (5; 0 skips the start-up figure), BENCH_ONLY
(stream | many_tables | backlog | startup | merge_source | small_merges | insert_merges |
rewrite_drift | history_reads | scale | rate_cap),
BENCH_MERGE_SOURCE_ROUNDS (3), BENCH_MERGE_SOURCE_BEFORE (reads: the batch's reads alone;
spread: the shuffle of a table's changes alone),
BENCH_SMALL_MERGE_ROUNDS (4), BENCH_SMALL_MERGE_BATCHES (6), BENCH_SMALL_MERGE_BEFORE
(compiled | interpreted), BENCH_SMALL_MERGE_KEYS (1,2: keys per batch, in turn),
BENCH_INSERT_MERGE_KEYS (1,1000: inserts per batch, in turn), BENCH_CODEGEN
(compiled: the stream never interprets nor rewrites, as before
`batch_settings.SMALL_SILVER_BYTES` and `batch_settings.REWRITE_BYTES`), BENCH_REWRITE_BYTES
(the sink's `REWRITE_BYTES` for the run),
BENCH_SILVER_FILE_ROWS (`file_sizes.SILVER_FILE_ROWS` for the run),
BENCH_DRIFT_BATCHES (60), BENCH_DRIFT_KEYS (3: keys per batch), BENCH_HISTORY_DELAYS_MS
(5,20), BENCH_HISTORY_ROUNDS (5), BENCH_SCALE_ROWS (1000000,5000000,20000000),
BENCH_SCALE_BATCHES (5), BENCH_SCALE_WARMUP (2), BENCH_SCALE_STARTS (3),
BENCH_SCALE_MANY_CHUNKS (1; 0 skips the ~20,000-chunk lake), BENCH_RATE_CAP (6,000 rows/s),
BENCH_RATE_SECONDS (90: each capped snapshot's length at the cap), BENCH_TAG (suffix of the
result files), BINLAKE_DB_PORT / BINLAKE_SOURCE_PASSWORD (from
`scripts/db.sh env`).

The scenarios live in their own modules (`bench.snapshot`, `bench.stream`, `bench.latency`,
`bench.decode`, `bench.many_tables`, `bench.backlog`, `bench.profile`, `bench.startup`,
`bench.scale` and the `BENCH_ONLY` before/now scenarios), what they share in `bench.common`;
this module runs them.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import date
from typing import Any

from bench import snapshot
from bench.archive_reads import archive_reads, archive_reads_markdown
from bench.backlog import backlog_drain
from bench.common import RESULTS, ROOT, WORK, Bench, env_int, say, start_spark
from bench.decode import decode_speed
from bench.history_reads import history_reads, history_reads_markdown
from bench.insert_merges import insert_merges, insert_merges_markdown
from bench.latency import stream_latency
from bench.many_tables import many_tables
from bench.merge_source import merge_source, merge_source_markdown
from bench.rate_cap import rate_cap, rate_cap_markdown
from bench.rewrite_drift import rewrite_drift, rewrite_drift_markdown
from bench.scale import scale, scale_chart, scale_markdown, scale_rows
from bench.small_merges import small_merges, small_merges_markdown
from bench.stream import stream_burst

#: `BENCH_ONLY`'s values: each runs one scenario alone.
ALONE = (
    "stream", "many_tables", "backlog", "startup", "merge_source", "small_merges",
    "insert_merges", "rewrite_drift", "history_reads", "scale", "rate_cap", "archive_reads",
)  # fmt: skip


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its callback server's INFO lines
    if os.environ.get("BENCH_VERBOSE"):
        logging.getLogger("binlake").setLevel(logging.INFO)
    bench = Bench()
    override_settings()
    only = os.environ.get("BENCH_ONLY", "")
    if only not in ("", *ALONE):
        sys.exit(f"BENCH_ONLY={only!r}: expected one of {', '.join(ALONE)}")
    stamp = date.today().isoformat() + (
        f"-{os.environ['BENCH_TAG']}" if os.environ.get("BENCH_TAG") else ""
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    if only not in ("", "stream"):
        return main_alone(bench, only, stamp)
    return main_all(bench, only, stamp)


def override_settings() -> None:
    """binlake's module settings the run moves: `BENCH_CODEGEN=compiled`,
    `BENCH_REWRITE_BYTES`, `BENCH_SILVER_FILE_ROWS`."""
    if os.environ.get("BENCH_CODEGEN") == "compiled":
        from binlake.stream import batch_settings

        batch_settings.SMALL_SILVER_BYTES = -1  # no silver is that small: every batch compiles...
        batch_settings.REWRITE_BYTES = -1  # ...and writes deletion vectors
    if os.environ.get("BENCH_REWRITE_BYTES"):
        from binlake.stream import batch_settings

        batch_settings.REWRITE_BYTES = env_int("BENCH_REWRITE_BYTES", batch_settings.REWRITE_BYTES)
    if os.environ.get("BENCH_SILVER_FILE_ROWS"):
        from binlake.silver import file_sizes

        file_sizes.SILVER_FILE_ROWS = env_int("BENCH_SILVER_FILE_ROWS", file_sizes.SILVER_FILE_ROWS)


def main_alone(bench: Bench, only: str, stamp: str) -> int:
    """`BENCH_ONLY=<only>` (not `stream`): that scenario alone, in its own result files."""
    if only == "many_tables":
        return main_many_tables(bench, f"many-tables-{stamp}")
    if only == "backlog":
        return main_backlog(bench, f"backlog-{stamp}")
    if only == "startup":
        return main_startup(f"startup-{stamp}")
    if only == "merge_source":
        return main_merge_source(bench, f"merge-source-{stamp}")
    if only == "small_merges":
        return main_small_merges(bench, f"small-merges-{stamp}")
    if only == "insert_merges":
        return main_insert_merges(bench, f"insert-merges-{stamp}")
    if only == "rewrite_drift":
        return main_rewrite_drift(bench, f"rewrite-drift-{stamp}")
    if only == "scale":
        return main_scale(bench, f"{stamp}-scale")
    if only == "rate_cap":
        return main_rate_cap(bench, f"rate-cap-{stamp}")
    if only == "archive_reads":
        return main_archive_reads(bench, f"archive-reads-{stamp}")
    assert only == "history_reads", only
    return main_history_reads(f"history-reads-{stamp}")


def main_all(bench: Bench, only: str, stamp: str) -> int:
    """The whole run (or `BENCH_ONLY=stream`: one snapshot, then the stream's figures)."""
    from bench import report
    from bench.data import create_and_load
    from bench.monitor import Monitor

    say(
        f"{bench.rows:,} rows, {bench.reps} repetitions, chunk_size {bench.chunk_size}, "
        f"burst {bench.burst:,}, results bench/results/{stamp}.*"
    )
    monitor = Monitor().start()

    with monitor.phase("load"):
        say(f"loading bench.customer ({bench.rows:,} rows) with LOAD DATA LOCAL INFILE")
        started = time.monotonic()
        load_s = create_and_load(bench.password or "", bench.port, bench.rows)
    say(
        f"loaded in {time.monotonic() - started:.1f} s "
        f"(LOAD DATA {bench.rows / load_s:,.0f} rows/s)"
    )
    startup = measure_startup(monitor) if only != "stream" else None
    spark, info = start_spark(bench, monitor)
    snapshot.rounds(bench, spark, monitor, only)
    stream = stream_burst(bench, spark, monitor)
    offsets = stream.pop("_offsets")
    latency = stream_latency(bench, spark, monitor)
    stream.update(latency)
    with monitor.phase("decode"):
        stream["decode"] = decode_speed(bench, offsets)

    if only == "stream":
        monitor.stop()
        spark.stop()
        print(json.dumps({"stream": stream, "memory": memory(monitor)}, indent=2, default=str))
        print("\n".join(report.targets_markdown(report.targets({"stream": stream}))), flush=True)
        return 0
    many = many_tables(bench, spark, monitor) if env_int("BENCH_TABLES", 200) > 0 else None
    backlog = backlog_drain(bench, spark, monitor) if env_int("BENCH_BACKLOG", 1) > 0 else None
    results = summarise(bench, stamp, load_s, stream, monitor, info)
    if many is not None:
        results["many_tables"] = many
    if backlog is not None:
        results["backlog"] = backlog
    if startup is not None:
        results["startup"] = startup
    finish(bench, spark, monitor, stamp, results, offsets)
    return 0


def finish(bench: Bench, spark, monitor, stamp: str, results: dict[str, Any], offsets) -> None:
    """The targets, the result files (written before the profiles too: a failing profile loses
    nothing), the profiles, and the report printed."""
    from bench import report

    results["targets"] = report.targets(results)
    report.write(RESULTS, stamp, results, "")  # written now: a failing profile loses nothing
    if not os.environ.get("BENCH_SKIP_PROFILE"):
        from bench.profile import profiles

        with monitor.phase("profile"):
            profile_text, results["profile"] = profiles(bench, spark, offsets)
    else:
        profile_text = ""
    monitor.stop()
    spark.stop()
    results["memory"] = memory(monitor)
    results["cpu_by_phase"] = monitor.phase_cpu
    paths = report.write(RESULTS, stamp, results, profile_text)
    for p in paths:
        say(f"wrote {p.relative_to(ROOT)}")
    print(report.markdown(results), flush=True)


def main_many_tables(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=many_tables`: the many-tables scenario alone (no customer table, no
    baselines, no stream burst), written to bench/results/many-tables-<date>[-tag].json/.md."""
    from bench import report

    tables, per = env_int("BENCH_TABLES", 200), env_int("BENCH_TABLE_ROWS", 1000)
    say(f"many tables only: {tables} × {per:,} rows, results bench/results/{stamp}.*")
    results = run_alone(bench, stamp, "many_tables", many_tables)
    results["targets"] = report.targets(results)
    for p in report.write_many_tables(RESULTS, stamp, results):
        say(f"wrote {p.relative_to(ROOT)}")
    print(report.many_tables_markdown(results), flush=True)
    return 0


def run_alone(bench: Bench, stamp: str, key: str, scenario: Any) -> dict[str, Any]:
    """One scenario (`BENCH_ONLY`) in a Spark session of its own: its figures under `key`, the
    memory and CPU of the run and the machine."""
    from bench.monitor import Monitor

    monitor = Monitor().start()
    spark, info = start_spark(bench, monitor)
    figures = scenario(bench, spark, monitor)
    monitor.stop()
    spark.stop()
    info["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "date": stamp,
        key: figures,
        "memory": memory(monitor),
        "cpu_by_phase": monitor.phase_cpu,
        "machine": info,
    }


def main_backlog(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=backlog`: the backlog drain alone (no customer table, no baselines), written
    to bench/results/backlog-<date>[-tag].json/.md."""
    from bench import report

    say(f"backlog only: {env_int('BENCH_BACKLOG', 1_000_000):,} changes, results "
        f"bench/results/{stamp}.*")  # fmt: skip
    results = run_alone(bench, stamp, "backlog", backlog_drain)
    for p in report.write_alone(RESULTS, stamp, results, report.backlog_markdown(results)):
        say(f"wrote {p.relative_to(ROOT)}")
    print(report.backlog_markdown(results), flush=True)
    return 0


def main_merge_source(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=merge_source`: silver's MERGE source as built now against before
    (bench/merge_source.py), written to bench/results/merge-source-<date>[-tag].json/.md."""
    return main_alternated(bench, stamp, "merge_source", merge_source, merge_source_markdown)


def main_small_merges(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=small_merges`: small batches of new keys applied with compiled code against
    interpreted (bench/small_merges.py), written to
    bench/results/small-merges-<date>[-tag].json/.md."""
    return main_alternated(bench, stamp, "small_merges", small_merges, small_merges_markdown)


def main_insert_merges(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=insert_merges`: batches of inserts alone applied with the MERGE's matched
    clauses against the insert-only MERGE (bench/insert_merges.py), written to
    bench/results/insert-merges-<date>[-tag].json/.md."""
    return main_alternated(bench, stamp, "insert_merges", insert_merges, insert_merges_markdown)


def main_rewrite_drift(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=rewrite_drift`: a long run of small batches into two copies of one silver,
    a MERGE's files as Delta writes them against `SILVER_FILE_ROWS` rows at most
    (bench/rewrite_drift.py), written to bench/results/rewrite-drift-<date>[-tag].json/.md."""
    return main_alternated(bench, stamp, "rewrite_drift", rewrite_drift, rewrite_drift_markdown)


def main_scale(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=scale`: the same figures at each of `BENCH_SCALE_ROWS` table sizes
    (bench/scale.py), written to bench/results/<date>[-tag]-scale.json/.md/.png."""
    from bench import report

    sizes = ", ".join(f"{n:,}" for n in scale_rows())
    say(f"scale only: {sizes} rows, results bench/results/{stamp}.*")
    results = run_alone(bench, stamp, "scale", scale)
    text = scale_markdown(results)
    paths = report.write_alone(RESULTS, stamp, results, text)
    paths.append(RESULTS / f"{stamp}.png")
    scale_chart(paths[-1], results)
    for p in paths:
        say(f"wrote {p.relative_to(ROOT)}")
    print(text, flush=True)
    return 0


def main_rate_cap(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=rate_cap`: snapshots under `snapshot.max_rows_per_second` (bench/rate_cap.py),
    written to bench/results/rate-cap-<date>[-tag].json/.md."""
    from bench import report

    say(f"rate cap only: results bench/results/{stamp}.*")
    results = run_alone(bench, stamp, "rate_cap", rate_cap)
    text = rate_cap_markdown(results)
    for p in report.write_alone(RESULTS, stamp, results, text):
        say(f"wrote {p.relative_to(ROOT)}")
    print(text, flush=True)
    return 0


def main_alternated(
    bench: Bench, stamp: str, key: str, scenario: Any, markdown: Callable[[dict[str, Any]], str]
) -> int:
    """A before/now scenario alternated in one process (`BENCH_ONLY`), run alone."""
    from bench import report

    say(f"{key} only: {bench.rows:,} rows, burst {bench.burst:,}, results "
        f"bench/results/{stamp}.*")  # fmt: skip
    results = run_alone(bench, stamp, key, scenario)
    text = markdown(results)
    for p in report.write_alone(RESULTS, stamp, results, text):
        say(f"wrote {p.relative_to(ROOT)}")
    print(text, flush=True)
    return 0


def measure_startup(monitor) -> dict[str, Any] | None:
    """`startup.*` (bench/startup.py), before the bench's own JVM starts; None when
    BENCH_STARTUP_ROUNDS is 0."""
    from bench.startup import startup

    rounds = env_int("BENCH_STARTUP_ROUNDS", 5)
    if rounds <= 0:
        return None
    with monitor.phase("startup"):
        say(f"local start-up, with and without the JVM class archive ({rounds} rounds)")
        figures = startup(rounds)
    say(
        f"first Delta write from a new process: {figures.get('with_archive_first_write_s')} s "
        f"with the class archive, {figures.get('without_archive_first_write_s')} s without"
    )
    return figures


def main_history_reads(stamp: str) -> int:
    """`BENCH_ONLY=history_reads`: a batch's schema-history reads, one after another against
    several at once (bench/history_reads.py), written to
    bench/results/history-reads-<date>[-tag].json/.md."""
    from bench import report

    results = {"date": stamp, **history_reads()}
    text = history_reads_markdown(results)
    for p in report.write_alone(RESULTS, stamp, results, text):
        say(f"wrote {p.relative_to(ROOT)}")
    print(text, flush=True)
    return 0


def main_archive_reads(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=archive_reads`: a binlog archive's read against the library's decoding of
    the same files (bench/archive_reads.py), written to
    bench/results/archive-reads-<date>[-tag].json/.md."""
    from bench import report

    results = {"date": stamp, "archive_reads": archive_reads(bench)}
    text = archive_reads_markdown(results)
    for p in report.write_alone(RESULTS, stamp, results, text):
        say(f"wrote {p.relative_to(ROOT)}")
    print(text, flush=True)
    return 0


def main_startup(stamp: str) -> int:
    """`BENCH_ONLY=startup`: the local start-up figure alone, written to
    bench/results/startup-<date>[-tag].json/.md."""
    from bench import report
    from bench.monitor import Monitor, machine

    monitor = Monitor().start()
    figures = measure_startup(monitor) or {"skipped": "BENCH_STARTUP_ROUNDS=0"}
    monitor.stop()
    import pyspark

    results = {"date": stamp, "startup": figures, "machine": machine("", pyspark.__version__)}
    text = report.startup_alone_markdown(results)
    for p in report.write_alone(RESULTS, stamp, results, text):
        say(f"wrote {p.relative_to(ROOT)}")
    print(text, flush=True)
    return 0


def memory(monitor) -> dict[str, Any]:
    return {
        "driver_peak_mb": round(monitor.peak_mb["driver"], 1),
        "worker_peak_mb": round(monitor.peak_mb["workers"], 1),
        "worker_single_peak_mb": round(monitor.peak_mb["worker_single"], 1),
        "method": "RSS sampled every 0.25 s; driver = this Python + its JVM; workers = sum over "
        "pyspark.daemon and its forked workers (pages shared after fork are counted in each "
        "process: an upper bound)",
        "by_phase": {
            k: {kk: round(vv, 1) for kk, vv in v.items()} for k, v in monitor.phase_peak_mb.items()
        },
    }


def summarise(bench, stamp, load_s, stream, monitor, info) -> dict[str, Any]:
    snap = snapshot.figures(bench)
    info["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results = {
        "date": stamp,
        "rows": bench.rows,
        "repetitions": bench.reps,
        "load_data_rows_s": round(bench.rows / load_s, 1),
        "snapshot": snap,
        "stream": stream,
        "memory": memory(monitor),
        "cpu_by_phase": monitor.phase_cpu,
        "profile": {},
        "machine": info,
    }
    return results


if __name__ == "__main__":
    sys.exit(main())
