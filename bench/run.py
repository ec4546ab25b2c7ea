"""`make bench` / `python -m bench.run`: binlake's snapshot and stream throughput, measured in
one run on one data set against two baselines (the C client and Spark's JDBC reader), plus
end-to-end latency, peak memory and Python-side profiles. See bench/README.md.

Environment: BENCH_ROWS (1,000,000), BENCH_REPS (3), BENCH_CHUNK_SIZE (8096),
BENCH_CHUNKS_PER_COMMIT (0 = binlake's default, 4 × parallelism), BENCH_BURST (200,000 row
changes), BENCH_UPDATE_RATE (500/s), BENCH_LATENCY_MARKERS (30), BENCH_PROFILE_CHUNKS (8),
BENCH_PROFILE_CHANGES (60,000), BENCH_SKIP_PROFILE, BENCH_TAG (suffix of the result files),
BINLAKE_SOURCE_PORT / BINLAKE_SOURCE_PASSWORD (from `scripts/db.sh env`).
"""

from __future__ import annotations

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
    from binlake.spark import local_session

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
        self.port = int(os.environ.get("BINLAKE_SOURCE_PORT", "13306"))
        self.password = os.environ.get("BINLAKE_SOURCE_PASSWORD")
        if self.password is None:
            sys.exit('BINLAKE_SOURCE_PASSWORD is not set: run eval "$(scripts/db.sh env)" first')
        self.samples: dict[str, list[float]] = {}
        self.extra: dict[str, Any] = {}
        self.kept_root: Path | None = None

    # ---- config and lake roots

    def config(self, root: Path, parallelism: int, job: str = "bench"):
        from binlake.config import parse_config

        return parse_config(
            {
                "source": {
                    "host": "127.0.0.1",
                    "port": self.port,
                    "user": "binlake",
                    "password_env": "BINLAKE_SOURCE_PASSWORD",
                    "database": "bench",
                    "tables": ["customer"],
                    "server_id_range": SERVER_IDS,
                },
                "snapshot": {
                    "chunk_size": self.chunk_size,
                    "parallelism": parallelism,
                    "chunks_per_commit": self.chunks_per_commit,
                },
                "lake": {"root": str(root)},
                "stream": {"job_name": job, "trigger_interval": "5s"},
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

    def jdbc(self, spark, rep: int) -> float:
        """Baseline B: Spark's JDBC reader, 2 partitions on c_customer_sk, into a Delta table."""
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
        frame.write.format("delta").mode("overwrite").save(str(root / "customer"))
        seconds = time.monotonic() - started
        written = spark.read.format("delta").load(str(root / "customer")).count()
        if written != self.rows:
            raise RuntimeError(f"JDBC baseline wrote {written} rows, expected {self.rows}")
        shutil.rmtree(root, ignore_errors=True)
        return self.rows / seconds

    def binlake_snapshot(self, spark, parallelism: int, name: str, keep: bool = False) -> float:
        from binlake import jobs

        root = self.fresh_root(name)
        config = self.config(root, parallelism)
        started = time.monotonic()
        summary = jobs.snapshot(spark, config)
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

    def binlake_under_load(self, spark, rep: int) -> float:
        from bench.data import Updater

        with _conn(self) as cur:
            cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
            low, high = cur.fetchone()
        updater = Updater(self.password or "", self.port, low, high, rate=self.update_rate)
        updater.start()
        try:
            rows_s = self.binlake_snapshot(spark, 2, f"binlake-p2-load-{rep}")
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


def current_offset(bench: Bench):
    from binlake.snapshot import with_resolved_password
    from binlake.source import connection
    from binlake.source import current_offset as head

    source = with_resolved_password(bench.config(WORK, 2).source)
    with connection(source) as conn:
        return head(conn)


def silver_fingerprint(spark, config) -> dict[str, int]:
    from pyspark.sql import functions as F

    from binlake.silver import silver_path
    from binlake.source import connection, validate

    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    row = (
        spark.read.format("delta")
        .load(silver_path(config, table))
        .agg(
            F.count("*").alias("rows"),
            F.coalesce(F.sum("c_birth_year"), F.lit(0)).alias("sum_birth_year"),
            F.coalesce(F.sum("c_birth_day"), F.lit(0)).alias("sum_birth_day"),
            F.min("c_customer_sk").alias("min_sk"),
            F.max("c_customer_sk").alias("max_sk"),
        )
        .collect()[0]
    )
    return {k: int(v) for k, v in row.asDict().items()}


def stream_burst(bench: Bench, spark, monitor) -> dict[str, Any]:
    from bench.data import make_burst, table_fingerprint
    from binlake import jobs

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    say("stream: creating silver from bronze (available-now run with nothing to catch up)")
    with monitor.phase("stream_init"):
        started = time.monotonic()
        jobs.stream(spark, config, available_now=True)
        init_s = time.monotonic() - started
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
    with monitor.phase("stream_catch_up"):
        started = time.monotonic()
        summary = jobs.stream(spark, config, available_now=True)
        seconds = time.monotonic() - started
    source_fp = table_fingerprint(bench.password or "", bench.port)
    silver_fp = silver_fingerprint(spark, config)
    identical = source_fp == silver_fp
    say(
        f"stream: {burst.changes:,} changes applied in {seconds:.1f} s = "
        f"{burst.changes / seconds:,.0f} changes/s ({summary.batches} batches, "
        f"{summary.changes:,} rows in); silver {'matches' if identical else 'DIFFERS FROM'} "
        f"the source {'' if identical else f'{silver_fp} vs {source_fp}'}"
    )
    return {
        "changes": burst.changes,
        "changes_s": round(burst.changes / seconds, 1),
        "seconds": round(seconds, 2),
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
        "silver_matches_source": identical,
        "binlog_range": [start.to_dict(), end.to_dict()],
        "_offsets": (start, end),
    }


def stream_latency(bench: Bench, spark, monitor) -> dict[str, Any]:
    """Continuous mode (5 s trigger) in a thread; single-row updates set markers; latency =
    the silver Delta commit that made the marker visible − the MariaDB commit (same clock).
    Polling silver gives a second, coarser figure."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from binlake import jobs
    from binlake.silver import silver_path
    from binlake.source import connection, validate

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    path = silver_path(config, table)
    version0 = DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
    failure: list[BaseException] = []

    def run() -> None:
        try:
            jobs.stream(spark, config)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="bench-stream", daemon=True)
    with monitor.phase("latency"):
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
            say(f"latency: committing {len(keys)} single-row marker updates, ~1 every 0.5-1.5 s")
            for i, key in enumerate(keys):
                marker = f"lat:{i}:{time.time_ns()}"
                cur.execute(
                    "UPDATE customer SET c_email_address = %s WHERE c_customer_sk = %s",
                    (marker, key),
                )
                committed[marker] = time.time()
                time.sleep(rnd.uniform(0.5, 1.5))
        seen: dict[str, float] = {}
        deadline = time.monotonic() + 90
        while len(seen) < len(committed) and time.monotonic() < deadline and not failure:
            rows = (
                spark.read.format("delta")
                .load(path)
                .where(F.col("c_customer_sk").isin(keys))
                .where(F.col("c_email_address").startswith("lat:"))
                .select("c_email_address")
                .collect()
            )
            now = time.time()
            for r in rows:
                seen.setdefault(r["c_email_address"].rstrip(), now)
            time.sleep(0.5)
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=60)
    if failure:
        raise failure[0]
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", version0 + 1)
        .load(path)
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
    polled = sorted(seen[m] - t for m, t in committed.items() if m in seen)
    missing = len(committed) - len(latencies)

    def pct(values: list[float], q: float) -> float | None:
        if not values:
            return None
        return (
            round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)
            if len(values) > 1
            else round(values[0], 2)
        )

    result = {
        "latency_p50_s": pct(latencies, 50),
        "latency_p95_s": pct(latencies, 95),
        "latency_max_s": round(max(latencies), 2) if latencies else None,
        "latency_polled_p50_s": pct(polled, 50),
        "latency_polled_p95_s": pct(polled, 95),
        "latency_markers": len(committed),
        "latency_markers_missing": missing,
        "trigger_interval": config.stream.trigger_interval,
    }
    say(
        f"latency: p50 {result['latency_p50_s']} s, p95 {result['latency_p95_s']} s "
        f"(polled p50 {result['latency_polled_p50_s']} s), {missing} markers missing"
    )
    return result


# --------------------------------------------------------------------------- decode


def decode_speed(bench: Bench, offsets) -> dict[str, Any]:
    """Row images/s over the burst's binlog range, same process, same bytes: python-mysql-
    replication's own row decoding (the baseline) against binlake's `read_changes`."""
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    from binlake.binlog import _open, read_changes
    from binlake.offsets import BinlogOffset
    from binlake.snapshot import with_resolved_password
    from binlake.source import connection, validate

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        tables = validate(conn, config)
    start, end = offsets
    server_id = SERVER_IDS[0] + 50

    def library() -> int:
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

    def binlake() -> int:
        changes = read_changes(source, server_id, tables, start, end)
        return sum(2 if c.before is not None and c.after is not None else 1 for c in changes)

    result: dict[str, Any] = {}
    for name, run in (("library", library), ("binlake", binlake)):
        started = time.monotonic()
        images = run()
        seconds = time.monotonic() - started
        result[f"{name}_images_s"] = round(images / seconds, 1)
        result["images"] = images
        rate = images / seconds
        say(f"decode: {name:8s} {images:,} row images in {seconds:.1f} s = {rate:,.0f}/s")
    result["speedup"] = round(result["binlake_images_s"] / result["library_images_s"], 2)
    return result


# --------------------------------------------------------------------------- profiles


def profiles(bench: Bench, spark, offsets) -> tuple[str, dict[str, Any]]:
    from bench.profile import profile, snapshot_work, stream_work
    from binlake.ledger import Ledger
    from binlake.snapshot import ledger_path, with_resolved_password
    from binlake.source import connection, validate
    from binlake.stream import chunk_marks, stream_spec

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
        "snapshot: binlake.snapshot._ChunkBatchReader (chunk reads + Arrow batches, as a task "
        "runs it)",
        snapshot_work(source, table, low, bench.chunk_size, chunks, SERVER_IDS[0] + 50),
        "rows",
    )
    marks = chunk_marks(tables, Ledger(spark, ledger_path(config)).chunks())
    start, end = offsets
    spec = stream_spec(config, source, start, marks, name="bench_profile")
    limit = env_int("BENCH_PROFILE_CHANGES", 60_000)
    say(f"profile: stream reader's read over the burst's binlog, first {limit:,} changes")
    text2, sum2 = profile(
        "stream catch-up: binlake.stream_source.BinlogStreamReader.read (decode + HW filter)",
        stream_work(spec, start, end, limit),
        "changes",
    )
    return text1 + "\n\n" + text2 + "\n", {"snapshot": sum1, "stream": sum2}


# --------------------------------------------------------------------------- main


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if os.environ.get("BENCH_VERBOSE"):
        logging.getLogger("binlake").setLevel(logging.INFO)
    from bench import report
    from bench.data import create_and_load
    from bench.monitor import Monitor, machine

    bench = Bench()
    stamp = date.today().isoformat() + (
        f"-{os.environ['BENCH_TAG']}" if os.environ.get("BENCH_TAG") else ""
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
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

    with monitor.phase("spark_start"):
        spark = bench_session(cores=2)
    with _conn(bench) as cur:
        cur.execute("SELECT VERSION()")
        (mariadb_version,) = cur.fetchone()
    info = machine(mariadb_version, spark.version)
    say(
        f"Spark {spark.version} local[2], MariaDB {mariadb_version}, {info['cores']} cores, "
        f"{info['ram_gb']} GB, {info['cpu_model']}"
    )

    # Warm up: first Spark job, Python workers, JIT (not measured).
    with monitor.phase("warmup"):
        warm = str(bench.fresh_root("warmup") / "t")
        spark.range(1000).mapInArrow(lambda it: it, "id long").write.format("delta").save(warm)
        spark.read.format("delta").load(warm).count()
        shutil.rmtree(Path(warm).parent, ignore_errors=True)

    systems: list[tuple[str, str, Callable[[int], float]]] = [
        ("client_rows_s", "client (mariadb --quick)", lambda rep: bench.client()),
        ("jdbc_p2_rows_s", "Spark JDBC p2 -> Delta", lambda rep: bench.jdbc(spark, rep)),
        (
            "binlake_p2_under_load_rows_s",
            "binlake p2 under load",
            lambda rep: bench.binlake_under_load(spark, rep),
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
    if os.environ.get("BENCH_ONLY") == "stream":  # iterate on the stream: one snapshot to start
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

    if os.environ.get("BENCH_ONLY") == "stream":
        monitor.stop()
        spark.stop()
        print(json.dumps({"stream": stream, "memory": memory(monitor)}, indent=2, default=str))
        return 0
    results = summarise(bench, stamp, load_s, stream, monitor, info)
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
    snap["binlake_p1_vs_client"] = round(snap["binlake_p1_rows_s"] / snap["client_rows_s"], 3)
    snap["binlake_p1_vs_jdbc"] = round(snap["binlake_p1_rows_s"] / snap["jdbc_p2_rows_s"], 3)
    snap["p2_over_p1"] = round(snap["binlake_p2_rows_s"] / snap["binlake_p1_rows_s"], 3)
    snap["under_load_over_p2"] = round(
        snap["binlake_p2_under_load_rows_s"] / snap["binlake_p2_rows_s"], 3
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
