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
rewrite_drift | history_reads),
BENCH_MERGE_SOURCE_ROUNDS (3), BENCH_MERGE_SOURCE_BEFORE (reads: the batch's reads alone;
spread: the shuffle of a table's changes alone),
BENCH_SMALL_MERGE_ROUNDS (4), BENCH_SMALL_MERGE_BATCHES (6), BENCH_SMALL_MERGE_BEFORE
(compiled | interpreted), BENCH_SMALL_MERGE_KEYS (1,2: keys per batch, in turn),
BENCH_INSERT_MERGE_KEYS (1,1000: inserts per batch, in turn), BENCH_CODEGEN
(compiled: the stream never interprets nor rewrites, as before `sink.SMALL_SILVER_BYTES` and
`sink.REWRITE_BYTES`), BENCH_REWRITE_BYTES (the sink's `REWRITE_BYTES` for the run),
BENCH_SILVER_FILE_ROWS (`merge.SILVER_FILE_ROWS` for the run),
BENCH_DRIFT_BATCHES (60), BENCH_DRIFT_KEYS (3: keys per batch), BENCH_HISTORY_DELAYS_MS
(5,20), BENCH_HISTORY_ROUNDS (5), BENCH_TAG (suffix of the
result files), BINLAKE_SOURCE_PORT / BINLAKE_SOURCE_PASSWORD (from
`scripts/db.sh env`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
WORK = ROOT / ".cache" / "bench"
JDBC_VERSION = "3.5.1"
JDBC_JAR = ROOT / ".cache" / "jars" / f"mariadb-java-client-{JDBC_VERSION}.jar"
SERVER_IDS = [7700, 7799]  # away from the tests' and the demo's replica ids

_T0 = time.monotonic()


def say(message: str) -> None:
    print(f"[bench {time.monotonic() - _T0:7.1f}s] {message}", flush=True)


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, "").replace("_", "") or default)


# --------------------------------------------------------------------------- Spark session


def jdbc_jar() -> str | None:
    """MariaDB Connector/J from Maven Central, cached in .cache/jars (None: use packages)."""
    if JDBC_JAR.exists():
        return str(JDBC_JAR)
    if shutil.which("mvn"):
        say(f"fetching org.mariadb.jdbc:mariadb-java-client:{JDBC_VERSION} with mvn")
        subprocess.run(
            [
                "mvn",
                "-q",
                "dependency:copy",
                f"-Dartifact=org.mariadb.jdbc:mariadb-java-client:{JDBC_VERSION}",
                f"-DoutputDirectory={JDBC_JAR.parent}",
            ],
            check=False,
            stdout=subprocess.DEVNULL,
        )
    return str(JDBC_JAR) if JDBC_JAR.exists() else None


def bench_session(cores: int = 2):
    """binlake's own local session, plus MariaDB Connector/J for baseline B."""
    from binlake.runtime.spark import local_session

    jar = jdbc_jar()
    if jar is None:
        raise SystemExit(f"bench: could not fetch mariadb-java-client {JDBC_VERSION} with mvn")
    return local_session("binlake-bench", cores, extra_jars=[jar])


# --------------------------------------------------------------------------- measurements


def median_of(values: list[float]) -> float:
    return round(statistics.median(values), 1) if values else float("nan")


class Bench:
    def __init__(self) -> None:
        self.rows = env_int("BENCH_ROWS", 1_000_000)
        self.reps = max(env_int("BENCH_REPS", 3), 1)
        self.chunk_size = env_int("BENCH_CHUNK_SIZE", 8096)
        self.chunks_per_commit = env_int("BENCH_CHUNKS_PER_COMMIT", 0)
        self.burst = env_int("BENCH_BURST", 200_000)
        self.update_rate = float(os.environ.get("BENCH_UPDATE_RATE", "500"))
        self.markers = env_int("BENCH_LATENCY_MARKERS", 30)
        self.trigger = os.environ.get("BENCH_TRIGGER", "1s")
        self.port = int(os.environ.get("BINLAKE_SOURCE_PORT", "13306"))
        self.password = os.environ.get("BINLAKE_SOURCE_PASSWORD")
        if self.password is None:
            sys.exit('BINLAKE_SOURCE_PASSWORD is not set: run eval "$(scripts/db.sh env)" first')
        self.samples: dict[str, list[float]] = {}
        self.extra: dict[str, Any] = {}
        self.kept_root: Path | None = None

    # ---- config and lake roots

    def config(
        self,
        root: Path,
        parallelism: int,
        job: str = "bench",
        database: str = "bench",
        tables: list[str] | None = None,
        stream: dict[str, Any] | None = None,
    ):
        """The bench's binlake config; `stream`: settings of its `stream` section besides the
        job name and trigger."""
        from binlake.config.settings import parse_config

        return parse_config(
            {
                "source": {
                    "host": "127.0.0.1",
                    "port": self.port,
                    "user": "binlake",
                    "password_env": "BINLAKE_SOURCE_PASSWORD",
                    "database": database,
                    "tables": tables or ["customer"],
                    "server_id_range": SERVER_IDS,
                },
                "snapshot": {
                    "chunk_size": self.chunk_size,
                    "parallelism": parallelism,
                    "chunks_per_commit": self.chunks_per_commit,
                },
                "lake": {"root": str(root)},
                "stream": {"job_name": job, "trigger_interval": "5s", **(stream or {})},
            }
        )

    @staticmethod
    def fresh_root(name: str) -> Path:
        root = WORK / name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        return root

    def record(self, key: str, rows_s: float) -> None:
        self.samples.setdefault(key, []).append(rows_s)

    # ---- systems

    def client(self) -> float:
        """Baseline A: the C client streaming the table to /dev/null (password via MYSQL_PWD)."""
        env = dict(os.environ, MYSQL_PWD=self.password or "")
        cmd = [
            "mariadb",
            "--quick",
            "-h127.0.0.1",
            f"-P{self.port}",
            "-ubinlake",
            "-e",
            "SELECT * FROM bench.customer",
        ]
        started = time.monotonic()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
        return self.rows / (time.monotonic() - started)

    def jdbc(self, spark, rep: int, stats: dict[str, str] | None = None) -> float:
        """Baseline B: Spark's JDBC reader, 2 partitions on c_customer_sk, into a Delta table
        (with `stats`, its statistics columns property: B' gathers one column's, as bronze
        does, the floor on equal terms)."""
        root = self.fresh_root(f"jdbc-{rep}")
        with _conn(self) as cur:
            cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
            low, high = cur.fetchone()
        started = time.monotonic()
        frame = (
            spark.read.format("jdbc")
            # jdbc:mysql selects Spark's MySQL dialect (backtick quoting; the generic dialect's
            # "double quotes" are string literals to MariaDB); permitMysqlScheme lets
            # Connector/J 3.x accept that scheme.
            .option("url", f"jdbc:mysql://127.0.0.1:{self.port}/bench?permitMysqlScheme")
            .option("driver", "org.mariadb.jdbc.Driver")
            .option("dbtable", "customer")
            .option("user", "binlake")
            .option("password", self.password)
            .option("partitionColumn", "c_customer_sk")
            .option("numPartitions", 2)
            .option("lowerBound", low)
            .option("upperBound", high)
            .load()
        )
        frame.write.format("delta").options(**(stats or {})).mode("overwrite").save(
            str(root / "customer")
        )
        seconds = time.monotonic() - started
        written = spark.read.format("delta").load(str(root / "customer")).count()
        if written != self.rows:
            raise RuntimeError(f"JDBC baseline wrote {written} rows, expected {self.rows}")
        shutil.rmtree(root, ignore_errors=True)
        return self.rows / seconds

    def binlake_snapshot(self, spark, parallelism: int, name: str, keep: bool = False) -> float:
        from binlake.jobs import commands

        root = self.fresh_root(name)
        config = self.config(root, parallelism)
        started = time.monotonic()
        summary = commands.snapshot(spark, config)
        seconds = time.monotonic() - started
        if summary.rows < self.rows * 0.99 or summary.rows > self.rows * 1.01:
            raise RuntimeError(f"binlake snapshot read {summary.rows} rows, expected {self.rows}")
        self.extra.setdefault("snapshot_chunks", summary.chunks)
        self.extra.setdefault("snapshot_commit_batch", config.snapshot.commit_batch)
        if keep:
            if self.kept_root and self.kept_root != root:
                shutil.rmtree(self.kept_root, ignore_errors=True)
            self.kept_root = root
        else:
            shutil.rmtree(root, ignore_errors=True)
        return summary.rows / seconds

    def reader(self, driver: str) -> float:
        """The chunk reader alone through bulk driver `driver`, in this process: every chunk of
        the table, one after another on one `ChunkReader` (its connections kept, as a snapshot
        task keeps them). The same data and process for both drivers, so their ratio is the
        fallback's cost without Spark, Delta or a second core in the way."""
        from binlake.mysql.prerequisites import validate
        from binlake.mysql.server import connection
        from binlake.snapshot.chunk_reader import ChunkReader
        from binlake.snapshot.chunks import ChunkRange
        from binlake.snapshot.task import with_resolved_password

        config = self.config(WORK, 1)
        source = with_resolved_password(config.source)
        with connection(source) as conn:
            (table,) = validate(conn, config)
        with _conn(self) as cur:
            cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
            low, high = cur.fetchone()
        rows = 0
        started = time.monotonic()
        with ChunkReader(source, table, SERVER_IDS[0] + 60, driver) as chunks:
            for chunk_id, start in enumerate(range(low, high + 1, self.chunk_size)):
                rows += chunks.read(chunk_id, ChunkRange(start, start + self.chunk_size)).rows
        seconds = time.monotonic() - started
        if rows != self.rows:
            raise RuntimeError(f"the {driver} chunk reader read {rows} rows, expected {self.rows}")
        return rows / seconds

    def under_load(self, copy: Callable[[], float]) -> float:
        """`copy()`'s rows/s while a thread with its own connection runs `update_rate`
        single-row updates/s (the rate achieved is kept with the samples)."""
        from bench.data import Updater

        with _conn(self) as cur:
            cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
            low, high = cur.fetchone()
        updater = Updater(self.password or "", self.port, low, high, rate=self.update_rate)
        updater.start()
        try:
            rows_s = copy()
        finally:
            achieved = updater.stop()
        self.samples.setdefault("_updater_rate", []).append(achieved)
        return rows_s


class _conn:
    """`with _conn(bench) as cur:` a cursor on a fresh autocommit connection to bench."""

    def __init__(self, bench: Bench) -> None:
        from bench.data import connect

        self.conn = connect(bench.password or "", bench.port)

    def __enter__(self):
        return self.conn.cursor()

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def timed(monitor, phase: str, fn: Callable[[], float]) -> float:
    with monitor.phase(phase):
        return fn()


# --------------------------------------------------------------------------- stream


def latest_version(spark, table) -> int:
    """The Delta version `table` (a LakeTable) is at."""
    return spark.sql(f"DESCRIBE HISTORY {table.sql} LIMIT 1").first()["version"]


def current_offset(bench: Bench, database: str = "bench"):
    from binlake.mysql.server import connection
    from binlake.mysql.server import current_offset as head
    from binlake.snapshot.task import with_resolved_password

    source = with_resolved_password(bench.config(WORK, 2, database=database).source)
    with connection(source) as conn:
        return head(conn)


def silver_fingerprint(spark, config, table=None) -> dict[str, int]:
    """Count, column sums and key range of silver's `table` (the config's only table if None):
    what `bench.data.table_fingerprint` computes on the source."""
    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection
    from binlake.silver.merge import silver_table

    if table is None:
        with connection(config.source) as conn:
            (table,) = validate(conn, config)
    return frame_fingerprint(silver_table(config, table).read(spark))


def frame_fingerprint(frame) -> dict[str, int]:
    from pyspark.sql import functions as F

    row = frame.agg(
        F.count("*").alias("rows"),
        F.coalesce(F.sum("c_birth_year"), F.lit(0)).alias("sum_birth_year"),
        F.coalesce(F.sum("c_birth_day"), F.lit(0)).alias("sum_birth_day"),
        F.min("c_customer_sk").alias("min_sk"),
        F.max("c_customer_sk").alias("max_sk"),
    ).collect()[0]
    return {k: int(v) for k, v in row.asDict().items()}


@dataclass
class CatchUp:
    """One profiled `stream --available-now` run."""

    summary: Any
    seconds: float
    phases: dict[str, Any]
    triggers: list[Any]
    log: Any


def profiled_catch_up(spark, config, monitor, phase: str) -> CatchUp:
    """`commands.stream(available_now=True)` timed, with binlake's per-phase timings, Spark's
    per-trigger durations and binlake's log lines (echoed with BENCH_VERBOSE)."""
    from bench.phases import STREAM_PHASES, LogCapture, PhaseTimer, QueryProgress
    from binlake.jobs import commands

    capture = LogCapture(echo=bool(os.environ.get("BENCH_VERBOSE")))
    with (
        monitor.phase(phase),
        PhaseTimer(STREAM_PHASES) as timer,
        QueryProgress(spark) as progress,
        capture,
    ):
        started = time.monotonic()
        summary = commands.stream(spark, config, available_now=True)
        seconds = time.monotonic() - started
    return CatchUp(summary, seconds, timer.result(), progress.progress, capture)


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


def create_silver(spark, config, monitor, phase: str) -> float:
    """Silver created from bronze: the first `commands.stream(available_now=True)` after a
    snapshot, with nothing to catch up. Returns its seconds."""
    from binlake.jobs import commands

    with monitor.phase(phase):
        started = time.monotonic()
        commands.stream(spark, config, available_now=True)
        return time.monotonic() - started


def stream_burst(bench: Bench, spark, monitor) -> dict[str, Any]:
    from bench.data import make_burst, table_fingerprint
    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection
    from binlake.silver.merge import SILVER_FILE_ROWS, changelog_table, silver_table

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
    start = current_offset(bench)
    with monitor.phase("burst"):
        burst = make_burst(bench.password or "", bench.port, bench.burst)
    end = current_offset(bench)
    say(
        f"stream: burst of {burst.changes:,} changes ({burst.inserts:,} inserts, "
        f"{burst.updates:,} updates, {burst.deletes:,} deletes) in {burst.statements} statements "
        f"took {burst.seconds:.1f} s; binlog {start} -> {end}"
    )
    cold_s = first_catch_up(bench, spark, monitor)
    say(
        f"stream: the process's first catch-up of the burst (on a copy of the lake) took "
        f"{cold_s:.1f} s = {burst.changes / cold_s:,.0f} changes/s: it compiles the batch's "
        "plans and warms the JIT; the measured catch-up follows"
    )
    catch_up = profiled_catch_up(spark, config, monitor, "stream_catch_up")
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
        f"stream: {burst.changes:,} changes applied in {seconds:.1f} s = "
        f"{burst.changes / seconds:,.0f} changes/s ({summary.batches} batches, "
        f"{summary.changes:,} rows in); silver {'matches' if identical else 'DIFFERS FROM'} "
        f"the source {'' if identical else f'{silver_fp} vs {source_fp}'}"
    )
    silver_merges = silver_merge_metrics(spark, silver_table(config, table), silver_before)
    with monitor.phase("merge_floor"):
        first_merge = merge_floor(bench, spark, config, silver_before, start, end)
        floor = merge_floor(bench, spark, config, silver_before, start, end)
        floor["first_merge_s"] = first_merge["merge_s"]
    with monitor.phase("append_floor"):
        first_append = append_floor(bench, spark, config, changelog_before, start, end)
        append = append_floor(bench, spark, config, changelog_before, start, end)
        append["first_append_s"] = first_append["append_s"]
    changes_s = burst.changes / seconds
    floor_s = burst.changes / floor["merge_s"]
    both_s = burst.changes / (floor["merge_s"] + append["append_s"])
    say(
        f"stream: merge floor {floor_s:,.0f} changes/s (one bare MERGE of {floor['rows']:,} "
        f"collapsed changes in {floor['merge_s']:.1f} s; result "
        f"{'matches' if floor['matches_silver'] else 'DIFFERS FROM'} binlake's silver); "
        f"binlake at {changes_s / floor_s:.2f}× the floor; with the changelog's bare append "
        f"({append['append_s']:.1f} s) {both_s:,.0f} changes/s, binlake at "
        f"{changes_s / both_s:.2f}×"
    )
    return {
        "changes": burst.changes,
        "changes_s": round(changes_s, 1),
        "seconds": round(seconds, 2),
        "merge_floor_changes_s": round(floor_s, 1),
        "changes_vs_merge_floor": round(changes_s / floor_s, 3),
        "first_catch_up_s": round(cold_s, 2),
        "first_catch_up_changes_s": round(burst.changes / cold_s, 1),
        "merge_floor": floor,
        "append_floor": append,
        "merge_and_append_floor_changes_s": round(both_s, 1),
        "changes_vs_merge_and_append_floor": round(changes_s / both_s, 3),
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
        "batches": summary.batches,
        "input_rows": summary.changes,
        "silver_init_s": round(init_s, 2),
        "silver_file_rows": SILVER_FILE_ROWS,
        "silver_files_after": size.files if size else None,
        "silver_bytes_after": size.bytes if size else None,
        "silver_scan_s": round(read_s, 2),
        "silver_matches_source": identical,
        "binlog_range": [start.to_dict(), end.to_dict()],
        "_offsets": (start, end),
    }


#: The MERGE's own metrics (Delta's operationMetrics) kept in the result.
MERGE_METRICS = (
    "numSourceRows",
    "materializeSourceTimeMs",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "numTargetFilesAdded",
    "numTargetFilesRemoved",
    "numTargetDeletionVectorsAdded",
    "numTargetChangeFilesAdded",
    "numTargetBytesAdded",
    "executionTimeMs",
    "scanTimeMs",
    "rewriteTimeMs",
)


def merge_floor(bench: Bench, spark, config, version_before: int, start, end) -> dict[str, Any]:
    """The floor of the stream's apply: one bare Delta MERGE of the burst's collapsed changes
    from a static Delta table into silver as it was before the burst, same table, same run.

    Silver's directory is copied and the copy restored (`RESTORE … TO VERSION AS OF`) to its
    version before the burst: the same files, layout, statistics and table properties (CDF,
    deletion vectors) binlake's MERGE met. The changes and the MERGE are `FloorMerge`'s.
    Afterwards the copy must equal binlake's silver (count, sums, key range): the floor did the
    same work."""
    from delta.tables import DeltaTable

    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection

    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    silver_path = _silver_path(config, table)
    root = bench.fresh_root("merge-floor")
    target_path = str(root / "silver")
    shutil.copytree(silver_path, target_path)
    DeltaTable.forPath(spark, target_path).restoreToVersion(version_before)
    properties = DeltaTable.forPath(spark, target_path).detail().collect()[0]["properties"] or {}
    floor = FloorMerge(spark, config, table, target_path, str(root / "changes"), start, end)
    started = time.monotonic()
    floor.merge()
    seconds = time.monotonic() - started
    metrics = DeltaTable.forPath(spark, target_path).history(1).collect()[0]["operationMetrics"]
    matches = frame_fingerprint(spark.read.format("delta").load(target_path)) == (
        silver_fingerprint(spark, config, table)
    )
    shutil.rmtree(root, ignore_errors=True)
    return {
        "merge_s": round(seconds, 2),
        "rows": floor.rows,
        "changelog_rows": floor.changelog_rows,
        "silver_version_before": version_before,
        "matches_silver": matches,
        "target_properties": {k: v for k, v in properties.items() if k.startswith("delta.")},
        "operation_metrics": {k: (metrics or {})[k] for k in MERGE_METRICS if k in (metrics or {})},
    }


def append_floor(
    bench: Bench, spark, config, version_before: int | None, start, end
) -> dict[str, Any]:
    """The floor of the changelog's share of the apply (`FloorAppend`): the burst's changelog
    rows appended by Delta alone to a copy of the changelog restored to its version before the
    burst (`version_before`; None: the burst's append created the changelog). binlake writes
    both the MERGE and this append for every batch; the bare MERGE floor holds only the first."""
    from delta.tables import DeltaTable

    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection

    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    root = bench.fresh_root("append-floor")
    target = root / "changelog"
    if version_before is not None:
        shutil.copytree(_changelog_path(config, table), target)
        DeltaTable.forPath(spark, str(target)).restoreToVersion(version_before)
    floor = FloorAppend(spark, config, table, target, root / "rows", start, end)
    seconds = floor.append()
    shutil.rmtree(root, ignore_errors=True)
    return {"append_s": round(seconds, 2), "rows": floor.rows, "changelog_before": version_before}


class FloorAppend:
    """A table's changelog rows of [start, end] (as binlake appended them, read back into a
    static Delta table at `rows_path`); `append()` is Delta's bare append of them to the Delta
    table at `target` (a copy of the changelog taken before the changes), or, where there is no
    copy (binlake's append created the changelog), to a new table with the changelog's
    properties. Everything but the append is done before it is timed."""

    def __init__(self, spark, config, table, target: Path, rows_path: Path, start, end):
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        from binlake.model.offsets import position_token
        from binlake.silver.merge import OFFSET_COLUMN

        changelog = _changelog_path(config, table)
        first, last = position_token(start, 0), position_token(end, 99_999_999)
        within = F.col(OFFSET_COLUMN).between(first, last)
        spark.read.format("delta").load(changelog).where(within).write.format("delta").save(
            str(rows_path)
        )
        self.target = str(target)
        self.options: dict[str, str] = {}
        if not target.exists():
            detail = DeltaTable.forPath(spark, changelog).detail().first()
            self.options = dict(detail["properties"] or {})
        self.source = spark.read.format("delta").load(str(rows_path))
        self.rows = self.source.count()

    def append(self) -> float:
        """Seconds of the append."""
        started = time.monotonic()
        self.source.write.format("delta").mode("append").options(**self.options).save(self.target)
        return time.monotonic() - started


def silver_merge_metrics(spark, silver, after_version: int) -> dict[str, Any]:
    """binlake's own MERGEs into `silver` since `after_version`, from Delta's history: how many,
    and per metric of `MERGE_METRICS` the median and the maximum over them (where the time of
    a MERGE goes: copying its source, finding the files, rewriting them)."""
    from pyspark.sql import functions as F

    merges = (
        spark.sql(f"DESCRIBE HISTORY {silver.sql}")
        .where((F.col("version") > after_version) & (F.col("operation") == "MERGE"))
        .select("operationMetrics")
        .collect()
    )
    metrics = [r["operationMetrics"] or {} for r in merges]
    out: dict[str, Any] = {"merges": len(metrics)}
    for name in MERGE_METRICS:
        values = [float(m[name]) for m in metrics if name in m]
        if values:
            out[name] = {"median": statistics.median(values), "max": max(values)}
    return out


def _silver_path(config, table) -> str:
    from binlake.silver.merge import silver_table

    return _table_path(silver_table(config, table), "merge")


def _changelog_path(config, table) -> str:
    from binlake.silver.merge import changelog_table

    return _table_path(changelog_table(config, table), "append")


def _table_path(lake_table, floor: str) -> str:
    path = getattr(lake_table, "path", None)
    if path is None:
        raise RuntimeError(f"the {floor} floor copies binlake's files: it needs a lake by path")
    return path


class FloorMerge:
    """A table's changes in [start, end], read back from binlake's changelog (the typed images
    binlake appended while applying them), collapsed to the last change per key by
    `_binlake_offset` and written to a static Delta table at `changes_path`; `merge()` is the
    bare MERGE of them into the Delta table at `target_path`, with the clauses of binlake's
    `merge.TableApply` (rewritten here, not imported): key equality plus the batch's key range
    on the target, delete when the change is a newer delete, update when newer, insert when not
    a delete. Everything but the MERGE itself (the key range too) is done before it is timed."""

    def __init__(self, spark, config, table, target_path: str, changes_path: str, start, end):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from binlake.lake.tables import column_name
        from binlake.model.offsets import position_token
        from binlake.silver.merge import OFFSET_COLUMN, changelog_table, data_columns, silver_table

        columns = data_columns(spark, silver_table(config, table), config, table.qualified)
        assert columns is not None
        self.spark, self.target_path, self.table = spark, target_path, table.qualified
        self.names = columns.fieldNames()
        self.key = [column_name(k) for k in table.key]
        offset = F.col(OFFSET_COLUMN)
        first, last = position_token(start, 0), position_token(end, 99_999_999)
        burst = changelog_table(config, table).read(spark).where(offset.between(first, last))
        image = F.when(F.col("_op") == "delete", F.col("_before")).otherwise(F.col("_after"))
        flat = burst.select("_op", OFFSET_COLUMN, image.alias("_image")).select(
            "_op", OFFSET_COLUMN,
            *[F.col(f"_image.{column_name(c)}").alias(c) for c in self.names],
        )  # fmt: skip
        latest = Window.partitionBy(*self.key).orderBy(offset.desc())
        collapsed = flat.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n")
        collapsed.write.format("delta").save(changes_path)
        self.changelog_rows = burst.count()
        self.source = spark.read.format("delta").load(changes_path)
        self.rows = self.source.count()
        self.bounds = self.source.agg(
            *[agg(F.col(k)).alias(f"{name}_{j}") for j, k in enumerate(self.key)
              for name, agg in (("lo", F.min), ("hi", F.max))]
        ).collect()[0]  # fmt: skip

    def merge(self) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        from binlake.lake.tables import column_name
        from binlake.silver.merge import OFFSET_COLUMN

        on = F.lit(True)
        for j, k in enumerate(self.key):
            on = on & (F.col(f"t.{k}") == F.col(f"s.{k}"))
            low, high = F.lit(self.bounds[f"lo_{j}"]), F.lit(self.bounds[f"hi_{j}"])
            on = on & F.col(f"t.{k}").between(low, high)
        values: dict[str, Any] = {
            column_name(c): f"s.{column_name(c)}" for c in (*self.names, OFFSET_COLUMN)
        }
        newer = f"t.{OFFSET_COLUMN} < s.{OFFSET_COLUMN}"
        (
            DeltaTable.forPath(self.spark, self.target_path)
            .alias("t")
            .merge(self.source.alias("s"), on)
            .whenMatchedDelete(condition=f"s._op = 'delete' AND {newer}")
            .whenMatchedUpdate(condition=f"s._op <> 'delete' AND {newer}", set=values)
            .whenNotMatchedInsert(condition="s._op <> 'delete'", values=values)
            .execute()
        )


def stream_latency(bench: Bench, spark, monitor) -> dict[str, Any]:
    """Continuous mode (`BENCH_TRIGGER`, 1 s by default) in a thread; single-row updates set
    markers; latency = the silver Delta commit that made the marker visible − the MariaDB commit
    (same clock), read from silver's Change Data Feed afterwards. Nothing polls silver while the
    stream runs (a poller's Spark jobs would compete for the two cores): the end is found from
    the query's progress (no Spark job). Beside it, the point-MERGE floor of the same run: a bare
    MERGE of one marker's change into a copy of silver as it was before the run."""
    from pyspark.sql import functions as F

    from binlake.jobs import commands
    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection
    from binlake.silver.merge import silver_table

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2, stream={"trigger_interval": bench.trigger})
    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    silver = silver_table(config, table)
    version0 = latest_version(spark, silver)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            commands.stream(spark, config)
        except BaseException as exc:
            failure.append(exc)

    from bench.phases import STREAM_PHASES, PhaseTimer, QueryProgress

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
        with _conn(bench) as cur:
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
        _await_stream_at(spark, current_offset(bench), failure, timeout_s=90)
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=60)
    if failure:
        raise failure[0]
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
    latencies = sorted(visible[m] - t for m, t in committed.items() if m in visible)
    missing = len(committed) - len(latencies)

    def pct(values: list[float], q: float) -> float | None:
        if not values:
            return None
        return (
            round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)
            if len(values) > 1
            else round(values[0], 2)
        )

    silver_merges = silver_merge_metrics(spark, silver, version0)
    floor = point_merge_floor(bench, spark, config, table, version0)
    result = {
        "latency_p50_s": pct(latencies, 50),
        "latency_p95_s": pct(latencies, 95),
        "latency_max_s": round(max(latencies), 2) if latencies else None,
        "latency_markers": len(committed),
        "latency_markers_missing": missing,
        "trigger_interval": config.stream.trigger_interval,
        "latency_phases": timer.result(),
        "latency_trigger_ms": trigger_medians(progress.progress),
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
    such a batch (`sink.settings_for`)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from binlake.model.offsets import BinlogOffset
    from binlake.silver.merge import changelog_table
    from binlake.stream.sink import settings_for

    marks = (
        changelog_table(config, table).read(spark)
        .where(F.col("_after.c_email_address").startswith("lat:"))
        .select("_file", "_pos").orderBy("_file", "_pos").limit(samples).collect()
    )  # fmt: skip
    root = bench.fresh_root("point-merge-floor")
    target = str(root / "silver")
    shutil.copytree(_silver_path(config, table), target)
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


# --------------------------------------------------------------------------- backlog

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
    from binlake.jobs import commands
    from binlake.model.offsets import bytes_behind
    from binlake.mysql.server import binlog_sizes, connection
    from binlake.snapshot.task import with_resolved_password

    changes = env_int("BENCH_BACKLOG", 1_000_000)
    rows = env_int("BENCH_BACKLOG_ROWS", changes)
    password = bench.password or ""
    say(f"backlog: loading bench.{BACKLOG_TABLE} ({rows:,} rows)")
    with monitor.phase("backlog_load"):
        create_and_load(password, bench.port, rows, BACKLOG_TABLE)
    bound = env_int("BENCH_BACKLOG_MAX_BYTES", 0)  # 0: binlake's default bound
    roots = {"": bench.fresh_root("backlog"), "unbounded_": bench.fresh_root("backlog-unbounded")}
    configs = {
        "": bench.config(
            roots[""], 2, job="bench_backlog", tables=[BACKLOG_TABLE],
            stream={"max_bytes_per_batch": bound} if bound else None,
        ),
        "unbounded_": bench.config(
            roots["unbounded_"], 2, job="bench_backlog_unbounded", tables=[BACKLOG_TABLE],
            stream={"max_bytes_per_batch": None, "max_changes_per_batch": None},
        ),
    }  # fmt: skip
    result: dict[str, Any] = {"table_rows": rows}
    for prefix, config in configs.items():
        with monitor.phase("backlog_snapshot"):
            started = time.monotonic()
            snapshot = commands.snapshot(spark, config)
            result[f"{prefix}snapshot_s"] = round(time.monotonic() - started, 2)
        if snapshot.rows != rows:
            raise RuntimeError(f"the backlog snapshot read {snapshot.rows} rows, expected {rows}")
        init_s = create_silver(spark, config, monitor, "backlog_silver_init")
        result[f"{prefix}silver_init_s"] = round(init_s, 2)
        say(
            f"backlog: lake {config.stream.job_name}: snapshot "
            f"{result[f'{prefix}snapshot_s']} s, silver in {init_s:.1f} s"
        )

    warmup = env_int("BENCH_BACKLOG_WARMUP", max(changes // 10, 2000))
    if warmup:  # both lakes' first data-carrying batches (JIT, the JVM's heap), not measured
        say(f"backlog: warm-up, {warmup:,} changes drained by both lakes")
        make_burst(password, bench.port, warmup, table=BACKLOG_TABLE)
        for config in configs.values():
            profiled_catch_up(spark, config, monitor, "backlog_warmup")
    say(f"backlog: stream stopped; making {changes:,} row changes")
    start = current_offset(bench)
    with monitor.phase("backlog_write"):
        burst = make_burst(password, bench.port, changes, table=BACKLOG_TABLE)
    end = current_offset(bench)
    with connection(with_resolved_password(configs[""].source)) as conn:
        binlog_bytes = bytes_behind(start, end, binlog_sizes(conn))
    source_fp = table_fingerprint(password, bench.port, BACKLOG_TABLE)
    say(
        f"backlog: {burst.changes:,} changes ({burst.inserts:,} inserts, {burst.updates:,} "
        f"updates, {burst.deletes:,} deletes) in {burst.statements} statements, "
        f"{burst.seconds:.1f} s; {binlog_bytes / 2**20:,.1f} MiB of binlog {start} -> {end}"
    )
    result.update(
        {
            "changes": burst.changes,
            "binlog_bytes": binlog_bytes,
            "max_bytes_per_batch": configs[""].stream.max_bytes_per_batch,
            # binlake's other bound, where it exists: left at its default in both drains
            "max_changes_per_batch": configs[""].stream.max_changes_per_batch,
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
    )
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


# --------------------------------------------------------------------------- many tables


def many_tables(bench: Bench, spark, monitor) -> dict[str, Any]:
    """Hundreds of small tables against one table of the same rows, same process and session:
    the snapshot of `BENCH_TABLES` tables of `BENCH_TABLE_ROWS` rows, the snapshot of one table
    holding all those rows, then silver's catch-up after a batch of updates touching
    `BENCH_TOUCHED_TABLES` of the tables (`BENCH_TOUCHED_ROWS` rows each). Per-phase timings
    come from `bench.phases` (binlake's functions timed from outside, its log lines, Spark's
    per-trigger durations)."""
    from bench.data import (
        MANY_DATABASE,
        SINGLE_TABLE,
        create_many_tables,
        drop_many_tables,
        many_table_names,
        table_fingerprint,
        touch_tables,
    )
    from bench.phases import (
        SNAPSHOT_PHASES,
        SNAPSHOT_TOP,
        STREAM_PHASES,
        LogCapture,
        PhaseTimer,
        breakdown,
        snapshot_log_windows,
    )
    from binlake.jobs import commands
    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection
    from binlake.stream.sink import APPLY_THREADS

    n = env_int("BENCH_TABLES", 200)
    per = env_int("BENCH_TABLE_ROWS", 1000)
    touched_n = min(env_int("BENCH_TOUCHED_TABLES", 50), n)
    touched_rows = env_int("BENCH_TOUCHED_ROWS", 2)
    rows = n * per
    password = bench.password or ""
    verbose = bool(os.environ.get("BENCH_VERBOSE"))
    names = many_table_names(n)
    say(f"many tables: creating {MANY_DATABASE}: {n} tables × {per:,} rows + one of {rows:,}")
    with monitor.phase("many_tables_load"):
        load = create_many_tables(password, bench.port, n, per)
    say(f"many tables: created in {load['many_s']} s + {load['single_s']} s")

    def snapshot(config) -> tuple[Any, float, dict[str, Any]]:
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

    root = bench.fresh_root("many-tables")
    config = bench.config(root, 2, job="bench_many", database=MANY_DATABASE, tables=[r"t\d{4}"])
    say(f"many tables: snapshot of the {n} tables (p2)")
    with monitor.phase("many_tables_snapshot"):
        summary, snapshot_s, snap_profile = snapshot(config)
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
        single, single_s, single_profile = snapshot(single_config)
    shutil.rmtree(single_root, ignore_errors=True)
    say(
        f"many tables: one table snapshotted in {single_s:.1f} s ({single.chunks} chunks); "
        f"many / one = {snapshot_s / single_s:.2f}"
    )

    say("many tables: creating silver from bronze (available-now run)")
    with monitor.phase("many_tables_silver_init"), PhaseTimer(STREAM_PHASES) as init_timer:
        started = time.monotonic()
        commands.stream(spark, config, available_now=True)
        init_s = time.monotonic() - started
    say(f"many tables: silver ready in {init_s:.1f} s ({init_s / n:.2f} s per table)")

    touched = names[:: max(n // touched_n, 1)][:touched_n]
    check = bench.config(root, 2, job="bench_many", database=MANY_DATABASE, tables=touched)
    with connection(check.source) as conn:
        schemas = validate(conn, check)
    floor_root = bench.fresh_root("catchup-floor")
    for table in schemas:  # silver and the changelog as the catch-up will find them
        shutil.copytree(_silver_path(config, table), floor_root / "silver" / table.name)
        if Path(_changelog_path(config, table)).exists():
            shutil.copytree(_changelog_path(config, table), floor_root / "changelog" / table.name)
    start = current_offset(bench, MANY_DATABASE)
    changed = touch_tables(password, bench.port, touched, touched_rows)
    end = current_offset(bench, MANY_DATABASE)
    say(f"many tables: updated {changed} rows in {len(touched)} tables; catching up")
    catch_up = profiled_catch_up(spark, config, monitor, "many_tables_catchup")
    caught, catchup_s = catch_up.summary, catch_up.seconds
    with monitor.phase("many_tables_catchup_floor"):
        catchup_floor_s, append_floor_s = catchup_floor(
            spark, config, schemas, floor_root, start, end
        )
    say(
        f"many tables: floor, bare MERGEs of the same changes into the {len(schemas)} silver "
        f"tables ({APPLY_THREADS} at once): {catchup_floor_s:.1f} s; the changelogs' bare "
        f"appends beside it: {append_floor_s:.1f} s"
    )
    mismatched = [
        t.name
        for t in schemas
        if silver_fingerprint(spark, check, t)
        != table_fingerprint(password, bench.port, t.name, MANY_DATABASE)
    ]
    identical = not mismatched and len(schemas) == len(touched) and caught.changes == changed
    say(
        f"many tables: catch-up of {changed} changes in {len(touched)} tables took "
        f"{catchup_s:.1f} s ({caught.batches} batches, {caught.changes} rows in); silver "
        f"{'matches' if identical else 'DIFFERS FROM'} the source"
        + (f" in {', '.join(mismatched)}" if mismatched else "")
    )
    shutil.rmtree(root, ignore_errors=True)
    drop_many_tables(password, bench.port)
    catch_phases = catch_up.phases
    stream_top = (
        "startup.validate", "ledger_read", "startup.check_available", "startup.ensure_silver",
        "startup.join_ready_tables", "batch",
    )  # fmt: skip
    return {
        "tables": n,
        "rows_per_table": per,
        "rows": rows,
        "create_s": load,
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
        "silver_init_s": round(init_s, 2),
        "catchup_s": round(catchup_s, 2),
        "catchup_merge_floor_s": round(catchup_floor_s, 2),
        "catchup_vs_merge_floor": round(catchup_s / catchup_floor_s, 3),
        "catchup_append_floor_s": round(append_floor_s, 2),
        "catchup_merge_and_append_floor_s": round(catchup_floor_s + append_floor_s, 2),
        "catchup_vs_merge_and_append_floor": round(
            catchup_s / (catchup_floor_s + append_floor_s), 3
        ),
        "catchup_tables": len(touched),
        "catchup_changes": changed,
        "catchup_batches": caught.batches,
        "catchup_input_rows": caught.changes,
        "catchup_binlog_range": [start.to_dict(), end.to_dict()],
        "silver_matches_source": identical,
        "mismatched_tables": mismatched,
        "profile": {
            "snapshot": snap_profile,
            "single_table_snapshot": single_profile,
            "silver_init": {"phases": init_timer.result()},
            "catchup": {
                "phases": catch_phases,
                "breakdown": breakdown(catch_phases, stream_top, catchup_s, n),
                "triggers": catch_up.triggers,
                "log": [m for _, m in catch_up.log.matching("applied in", "starting at")],
            },
        },
    }


def bronze_floor(spark, config, tables, root: Path) -> float:
    """The floor of the many-tables snapshot: each table's rows, read back from its bronze
    table into the driver's memory beforehand (untimed), written by Spark alone into a new
    Delta table, as many tables at once as binlake's snapshot ran (`config.table_slots`). No
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
    (`sink.APPLY_THREADS`): seconds of one bare MERGE per touched table of its collapsed changes
    (`FloorMerge`) into a copy of its silver taken before the updates, then seconds of the bare
    appends of its changelog rows (`FloorAppend`) to a copy of its changelog taken then (or to a
    new one): binlake writes both for every table a batch touches. Both run with the settings
    the sink chooses for these tables and changes (`sink.settings_for`: interpreted queries
    where their silver tables are small, MERGEs that rewrite files where the changes are few),
    so a setting that lowers binlake's cost lowers its floor too."""
    from binlake.stream.sink import APPLY_THREADS, settings_for

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


# --------------------------------------------------------------------------- decode


def decode_speed(bench: Bench, offsets) -> dict[str, Any]:
    """Row images/s, same process, same bytes: python-mysql-replication's own row decoding (the
    baseline, parsing every table map as the library does) against binlake's `read_changes`,
    over the burst's binlog range (multi-row statements) and, in `single_row`, over
    `BENCH_SINGLE_ROW` (20,000) single-row autocommit updates made now, the shape of most OLTP
    traffic: every transaction repeats its table map. There binlake is also timed parsing every
    table map anew as the library does (`binlake_parse_each_images_s`): its read before
    `binlog._table_map_once`."""
    from pymysqlreplication.row_event import (
        DeleteRowsEvent,
        TableMapEvent,
        UpdateRowsEvent,
        WriteRowsEvent,
    )

    from binlake.model.offsets import BinlogOffset
    from binlake.mysql import binlog
    from binlake.mysql.binlog import _open, read_changes
    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection
    from binlake.snapshot.task import with_resolved_password

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        tables = validate(conn, config)
    server_id = SERVER_IDS[0] + 50

    @contextlib.contextmanager
    def parsing_each_table_map():
        """The library's own TABLE_MAP parse for the block (binlake parses each map once)."""
        TableMapEvent.__init__ = binlog._parse_table_map
        try:
            yield
        finally:
            TableMapEvent.__init__ = binlog._table_map_once

    def library(start, end) -> int:
        with parsing_each_table_map():
            return library_images(start, end)

    def library_images(start, end) -> int:
        stream = _open(
            source, server_id, start,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
            only_schemas=["bench"], only_tables=["customer"],
        )  # fmt: skip
        images = 0
        try:
            for event in stream:
                if BinlogOffset(stream.log_file, stream.log_pos) > end:
                    break
                images += sum(2 if "after_values" in row else 1 for row in event.rows)
        finally:
            stream.close()
        return images

    def binlake(start, end) -> int:
        changes = read_changes(source, server_id, tables, start, end)
        return sum(2 if c.before is not None and c.after is not None else 1 for c in changes)

    def binlake_parse_each(start, end) -> int:
        with parsing_each_table_map():
            return binlake(start, end)

    def measure(start, end, runs, label: str) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name, run in runs:
            started = time.monotonic()
            images = run(start, end)
            seconds = time.monotonic() - started
            result[f"{name}_images_s"] = round(images / seconds, 1)
            result["images"] = images
            say(f"decode{label}: {name:8s} {images:,} row images in {seconds:.1f} s = "
                f"{images / seconds:,.0f}/s")  # fmt: skip
        result["speedup"] = round(result["binlake_images_s"] / result["library_images_s"], 2)
        return result

    result = measure(*offsets, (("library", library), ("binlake", binlake)), "")
    before = current_offset(bench)
    with _conn(bench) as cur:
        cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
        low, high = cur.fetchone()
        rng = random.Random(5)
        for _ in range(env_int("BENCH_SINGLE_ROW", 20_000)):
            key = rng.randint(low, high)
            update = (
                "UPDATE customer SET c_birth_day = c_birth_day %% 28 + 1 WHERE c_customer_sk = %s"
            )
            cur.execute(update, (key,))
    after = current_offset(bench)
    runs = (("library", library), ("binlake_parse_each", binlake_parse_each), ("binlake", binlake))
    single = measure(before, after, runs, " (single-row transactions)")
    single["vs_parse_each"] = round(
        single["binlake_images_s"] / single["binlake_parse_each_images_s"], 2
    )
    result["single_row"] = single
    return result


# --------------------------------------------------------------------------- profiles


def profiles(bench: Bench, spark, offsets) -> tuple[str, dict[str, Any]]:
    from bench.profile import profile, snapshot_work, stream_work
    from binlake.lake.paths import ledger_path
    from binlake.mysql.prerequisites import validate
    from binlake.mysql.server import connection
    from binlake.snapshot.ledger import Ledger
    from binlake.snapshot.task import with_resolved_password
    from binlake.stream.task import chunk_marks, stream_spec

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        tables = validate(conn, config)
    table = tables[0]
    with _conn(bench) as cur:
        cur.execute("SELECT MIN(c_customer_sk) FROM customer")
        (low,) = cur.fetchone()
    chunks = env_int("BENCH_PROFILE_CHUNKS", 8)
    say(f"profile: binlake chunk reader, {chunks} chunks of {bench.chunk_size} rows, in-process")
    text1, sum1 = profile(
        "snapshot: binlake.snapshot.task._ChunkBatchReader (chunk reads + Arrow batches, as a task "
        "runs it)",
        snapshot_work(source, table, low, bench.chunk_size, chunks, SERVER_IDS[0] + 50),
        "rows",
    )
    marks = chunk_marks(tables, Ledger(spark, ledger_path(config)).chunks(), {})
    start, end = offsets
    spec = stream_spec(config, source, start, marks, name="bench_profile")
    limit = env_int("BENCH_PROFILE_CHANGES", 60_000)
    say(f"profile: stream reader's read over the burst's binlog, first {limit:,} changes")
    text2, sum2 = profile(
        "stream catch-up: binlake.stream.binlog_source.BinlogStreamReader.read"
        " (decode + HW filter)",
        stream_work(spec, start, end, limit),
        "changes",
    )
    return text1 + "\n\n" + text2 + "\n", {"snapshot": sum1, "stream": sum2}


# --------------------------------------------------------------------------- main


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its callback server's INFO lines
    if os.environ.get("BENCH_VERBOSE"):
        logging.getLogger("binlake").setLevel(logging.INFO)
    from bench import report
    from bench.data import create_and_load
    from bench.monitor import Monitor

    bench = Bench()
    if os.environ.get("BENCH_CODEGEN") == "compiled":
        from binlake.stream import sink

        sink.SMALL_SILVER_BYTES = -1  # no silver is that small: every batch compiles...
        sink.REWRITE_BYTES = -1  # ...and writes deletion vectors
    if os.environ.get("BENCH_REWRITE_BYTES"):
        from binlake.stream import sink

        sink.REWRITE_BYTES = env_int("BENCH_REWRITE_BYTES", sink.REWRITE_BYTES)
    if os.environ.get("BENCH_SILVER_FILE_ROWS"):
        from binlake.silver import merge

        merge.SILVER_FILE_ROWS = env_int("BENCH_SILVER_FILE_ROWS", merge.SILVER_FILE_ROWS)
    only = os.environ.get("BENCH_ONLY", "")
    alone = (
        "stream", "many_tables", "backlog", "startup", "merge_source", "small_merges",
        "insert_merges", "rewrite_drift", "history_reads",
    )  # fmt: skip
    if only not in ("", *alone):
        sys.exit(f"BENCH_ONLY={only!r}: expected one of {', '.join(alone)}")
    stamp = date.today().isoformat() + (
        f"-{os.environ['BENCH_TAG']}" if os.environ.get("BENCH_TAG") else ""
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
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
    if only == "history_reads":
        return main_history_reads(f"history-reads-{stamp}")
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
    from binlake.lake.tables import STATS_COLUMNS

    systems: list[tuple[str, str, Callable[[int], float]]] = [
        ("client_rows_s", "client (mariadb --quick)", lambda rep: bench.client()),
        ("jdbc_p2_rows_s", "Spark JDBC p2 -> Delta", lambda rep: bench.jdbc(spark, rep)),
        (
            "jdbc_p2_key_stats_rows_s",
            "Spark JDBC p2 -> Delta, key stats",
            lambda rep: bench.jdbc(spark, rep, {STATS_COLUMNS: "c_customer_sk"}),
        ),
        (
            "binlake_p2_under_load_rows_s",
            "binlake p2 under load",
            lambda rep: bench.under_load(
                lambda: bench.binlake_snapshot(spark, 2, f"binlake-p2-load-{rep}")
            ),
        ),
        (
            "jdbc_p2_key_stats_under_load_rows_s",
            "Spark JDBC p2 -> Delta, key stats, under load",
            lambda rep: bench.under_load(
                lambda: bench.jdbc(spark, rep, {STATS_COLUMNS: "c_customer_sk"})
            ),
        ),
        (
            "binlake_p1_rows_s",
            "binlake p1",
            lambda rep: bench.binlake_snapshot(spark, 1, f"binlake-p1-{rep}"),
        ),
        (
            "binlake_p2_rows_s",
            "binlake p2",
            lambda rep: bench.binlake_snapshot(
                spark, 2, f"binlake-p2-{rep}", keep=rep == bench.reps - 1
            ),
        ),
    ]
    from binlake.mysql.server import bulk_driver

    readers = ["mysqldb", "pymysql"] if bulk_driver() == "mysqldb" else ["pymysql"]
    systems += [
        (f"reader_{d}_rows_s", f"chunk reader alone, {d}", lambda rep, d=d: bench.reader(d))
        for d in readers
    ]
    if only == "stream":  # iterate on the stream: one snapshot to start
        systems = [s for s in systems if s[0] == "binlake_p2_rows_s"]
        bench.reps = 1
    for rep in range(bench.reps):
        for key, label, fn in systems:
            rows_s = timed(monitor, key, lambda fn=fn, rep=rep: fn(rep))
            bench.record(key, rows_s)
            say(f"round {rep + 1}/{bench.reps}: {label:28s} {rows_s:>12,.0f} rows/s")

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
    results["targets"] = report.targets(results)
    report.write(RESULTS, stamp, results, "")  # written now: a failing profile loses nothing
    if not os.environ.get("BENCH_SKIP_PROFILE"):
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
    return 0


def start_spark(bench: Bench, monitor) -> tuple[Any, dict[str, Any]]:
    """The bench's Spark session, the machine's facts, and a warm-up (first Spark job, Python
    workers, JIT; not measured)."""
    from bench.data import connect
    from bench.monitor import machine

    with monitor.phase("spark_start"):
        spark = bench_session(cores=2)
    with connect(bench.password or "", bench.port, database=None) as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        (mariadb_version,) = cur.fetchone()
    info = machine(mariadb_version, spark.version)
    say(
        f"Spark {spark.version} local[2], MariaDB {mariadb_version}, {info['cores']} cores, "
        f"{info['ram_gb']} GB, {info['cpu_model']}"
    )
    with monitor.phase("warmup"):
        warm = str(bench.fresh_root("warmup") / "t")
        spark.range(1000).mapInArrow(lambda it: it, "id long").write.format("delta").save(warm)
        spark.read.format("delta").load(warm).count()
        shutil.rmtree(Path(warm).parent, ignore_errors=True)
    return spark, info


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
    from bench.merge_source import merge_source, merge_source_markdown

    return main_alternated(bench, stamp, "merge_source", merge_source, merge_source_markdown)


def main_small_merges(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=small_merges`: small batches of new keys applied with compiled code against
    interpreted (bench/small_merges.py), written to
    bench/results/small-merges-<date>[-tag].json/.md."""
    from bench.small_merges import small_merges, small_merges_markdown

    return main_alternated(bench, stamp, "small_merges", small_merges, small_merges_markdown)


def main_insert_merges(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=insert_merges`: batches of inserts alone applied with the MERGE's matched
    clauses against the insert-only MERGE (bench/insert_merges.py), written to
    bench/results/insert-merges-<date>[-tag].json/.md."""
    from bench.insert_merges import insert_merges, insert_merges_markdown

    return main_alternated(bench, stamp, "insert_merges", insert_merges, insert_merges_markdown)


def main_rewrite_drift(bench: Bench, stamp: str) -> int:
    """`BENCH_ONLY=rewrite_drift`: a long run of small batches into two copies of one silver,
    a MERGE's files as Delta writes them against `SILVER_FILE_ROWS` rows at most
    (bench/rewrite_drift.py), written to bench/results/rewrite-drift-<date>[-tag].json/.md."""
    from bench.rewrite_drift import rewrite_drift, rewrite_drift_markdown

    return main_alternated(bench, stamp, "rewrite_drift", rewrite_drift, rewrite_drift_markdown)


def alternated(rounds: int, warm_ups: tuple[str, ...]) -> list[str]:
    """The runs of a before/now scenario in order: `warm_ups`, then `rounds` rounds of both, the
    order reversed every round, so the JVM's warm-up and the machine's drift hit both alike."""
    orders = (("before", "now"), ("now", "before"))
    return [*warm_ups, *[kind for r in range(rounds) for kind in orders[r % 2]]]


def medians(runs: dict[str, list[dict[str, float]]], digits: int) -> dict[str, dict[str, float]]:
    """Per kind of `runs`, the median of each of its figures."""
    return {
        kind: {key: round(statistics.median(r[key] for r in done), digits) for key in done[0]}
        for kind, done in runs.items()
    }


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
    from bench.history_reads import history_reads, history_reads_markdown

    results = {"date": stamp, **history_reads()}
    text = history_reads_markdown(results)
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
    snap = {k: median_of(v) for k, v in bench.samples.items() if not k.startswith("_")}
    snap["binlake_p2_vs_client"] = round(snap["binlake_p2_rows_s"] / snap["client_rows_s"], 3)
    snap["binlake_p2_vs_jdbc"] = round(snap["binlake_p2_rows_s"] / snap["jdbc_p2_rows_s"], 3)
    snap["binlake_p2_vs_jdbc_key_stats"] = round(
        snap["binlake_p2_rows_s"] / snap["jdbc_p2_key_stats_rows_s"], 3
    )
    snap["binlake_p1_vs_client"] = round(snap["binlake_p1_rows_s"] / snap["client_rows_s"], 3)
    snap["binlake_p1_vs_jdbc"] = round(snap["binlake_p1_rows_s"] / snap["jdbc_p2_rows_s"], 3)
    snap["p2_over_p1"] = round(snap["binlake_p2_rows_s"] / snap["binlake_p1_rows_s"], 3)
    snap["under_load_over_p2"] = round(
        snap["binlake_p2_under_load_rows_s"] / snap["binlake_p2_rows_s"], 3
    )
    snap["jdbc_key_stats_under_load_over_unloaded"] = round(
        snap["jdbc_p2_key_stats_under_load_rows_s"] / snap["jdbc_p2_key_stats_rows_s"], 3
    )
    if "reader_mysqldb_rows_s" in snap:
        snap["reader_pymysql_vs_mysqldb"] = round(
            snap["reader_pymysql_rows_s"] / snap["reader_mysqldb_rows_s"], 3
        )
    snap["concurrent_updates_s"] = median_of(bench.samples.get("_updater_rate", []))
    snap["chunk_size"] = bench.chunk_size
    snap["chunks"] = bench.extra.get("snapshot_chunks")
    snap["chunks_per_commit"] = bench.chunks_per_commit
    snap["chunks_per_commit_effective_p2"] = bench.extra.get("snapshot_commit_batch")
    snap["samples"] = {k: [round(x, 1) for x in v] for k, v in bench.samples.items()}
    snap["jdbc_driver"] = f"org.mariadb.jdbc:mariadb-java-client:{JDBC_VERSION}"
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
