"""`snapshot.*`: binlake's snapshot of `bench.customer` at parallelism 1 and 2, with and
without a concurrent update load, against baseline A (the C client), baseline B (Spark's JDBC
reader into Delta, B' with the key's statistics alone) and the chunk reader alone through each
bulk driver, in interleaved rounds (`BENCH_REPS`); `figures` are their medians and ratios."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from bench.common import JDBC_VERSION, SERVER_IDS, WORK, Bench, cursor, say


def median_of(values: list[float]) -> float:
    return round(statistics.median(values), 1) if values else float("nan")


def client(bench: Bench) -> float:
    """Baseline A: the C client streaming the table to /dev/null (password via MYSQL_PWD)."""
    env = dict(os.environ, MYSQL_PWD=bench.password or "")
    cmd = [
        "mariadb",
        "--quick",
        "-h127.0.0.1",
        f"-P{bench.port}",
        "-ubinlake",
        "-e",
        "SELECT * FROM bench.customer",
    ]
    started = time.monotonic()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    return bench.rows / (time.monotonic() - started)


def jdbc(bench: Bench, spark, rep: int, stats: dict[str, str] | None = None) -> float:
    """Baseline B: Spark's JDBC reader, 2 partitions on c_customer_sk, into a Delta table
    (with `stats`, its statistics columns property: B' gathers one column's, as bronze
    does, the floor on equal terms)."""
    root = bench.fresh_root(f"jdbc-{rep}")
    with cursor(bench) as cur:
        cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
        low, high = cur.fetchone()
    started = time.monotonic()
    frame = (
        spark.read.format("jdbc")
        # jdbc:mysql selects Spark's MySQL dialect (backtick quoting; the generic dialect's
        # "double quotes" are string literals to MariaDB); permitMysqlScheme lets
        # Connector/J 3.x accept that scheme.
        .option("url", f"jdbc:mysql://127.0.0.1:{bench.port}/bench?permitMysqlScheme")
        .option("driver", "org.mariadb.jdbc.Driver")
        .option("dbtable", "customer")
        .option("user", "binlake")
        .option("password", bench.password)
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
    if written != bench.rows:
        raise RuntimeError(f"JDBC baseline wrote {written} rows, expected {bench.rows}")
    shutil.rmtree(root, ignore_errors=True)
    return bench.rows / seconds


def reader(bench: Bench, driver: str) -> float:
    """The chunk reader alone through bulk driver `driver`, in this process: every chunk of
    the table, one after another on one `ChunkReader` (its connections kept, as a snapshot
    task keeps them). The same data and process for both drivers, so their ratio is the
    fallback's cost without Spark, Delta or a second core in the way."""
    from binlake.config.secrets import with_resolved_password
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate
    from binlake.snapshot.chunk_reader import ChunkReader
    from binlake.snapshot.chunks import ChunkRange

    config = bench.config(WORK, 1)
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        (table,) = validate(conn, config)
    with cursor(bench) as cur:
        cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
        low, high = cur.fetchone()
    rows = 0
    started = time.monotonic()
    with ChunkReader(source, table, SERVER_IDS[0] + 60, driver) as chunks:
        for chunk_id, start in enumerate(range(low, high + 1, bench.chunk_size)):
            rows += chunks.read(chunk_id, ChunkRange(start, start + bench.chunk_size)).rows
    seconds = time.monotonic() - started
    if rows != bench.rows:
        raise RuntimeError(f"the {driver} chunk reader read {rows} rows, expected {bench.rows}")
    return rows / seconds


def under_load(bench: Bench, copy: Callable[[], float]) -> float:
    """`copy()`'s rows/s while a thread with its own connection runs `update_rate`
    single-row updates/s (the rate achieved is kept with the samples)."""
    from bench.data import Updater

    with cursor(bench) as cur:
        cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
        low, high = cur.fetchone()
    updater = Updater(bench.password or "", bench.port, low, high, rate=bench.update_rate)
    updater.start()
    try:
        rows_s = copy()
    finally:
        achieved = updater.stop()
    bench.samples.setdefault("_updater_rate", []).append(achieved)
    return rows_s


def systems(bench: Bench, spark: Any) -> list[tuple[str, str, Callable[[int], float]]]:
    """The snapshot's systems: (key, label, rows/s of repetition `rep`)."""
    from binlake.lake.tables import STATS_COLUMNS
    from binlake.mysql.connection import bulk_driver

    key_stats = {STATS_COLUMNS: "c_customer_sk"}
    measured: list[tuple[str, str, Callable[[int], float]]] = [
        ("client_rows_s", "client (mariadb --quick)", lambda rep: client(bench)),
        ("jdbc_p2_rows_s", "Spark JDBC p2 -> Delta", lambda rep: jdbc(bench, spark, rep)),
        (
            "jdbc_p2_key_stats_rows_s",
            "Spark JDBC p2 -> Delta, key stats",
            lambda rep: jdbc(bench, spark, rep, key_stats),
        ),
        (
            "binlake_p2_under_load_rows_s",
            "binlake p2 under load",
            lambda rep: under_load(
                bench, lambda: bench.binlake_snapshot(spark, 2, f"binlake-p2-load-{rep}")
            ),
        ),
        (
            "jdbc_p2_key_stats_under_load_rows_s",
            "Spark JDBC p2 -> Delta, key stats, under load",
            lambda rep: under_load(bench, lambda: jdbc(bench, spark, rep, key_stats)),
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
    readers = ["mysqldb", "pymysql"] if bulk_driver() == "mysqldb" else ["pymysql"]
    measured += [
        (f"reader_{d}_rows_s", f"chunk reader alone, {d}", lambda rep, d=d: reader(bench, d))
        for d in readers
    ]
    return measured


def rounds(bench: Bench, spark: Any, monitor: Any, only: str) -> None:
    """`BENCH_REPS` interleaved rounds of every system, each sample kept in `bench.samples`;
    with `BENCH_ONLY=stream`, binlake p2 once (the stream's lake)."""
    measured = systems(bench, spark)
    if only == "stream":  # iterate on the stream: one snapshot to start
        measured = [s for s in measured if s[0] == "binlake_p2_rows_s"]
        bench.reps = 1
    for rep in range(bench.reps):
        for key, label, fn in measured:
            rows_s = timed(monitor, key, lambda fn=fn, rep=rep: fn(rep))
            bench.record(key, rows_s)
            say(f"round {rep + 1}/{bench.reps}: {label:28s} {rows_s:>12,.0f} rows/s")


def timed(monitor, phase: str, fn: Callable[[], float]) -> float:
    with monitor.phase(phase):
        return fn()


def figures(bench: Bench) -> dict[str, Any]:
    """`snapshot.*`: the medians of the samples, their ratios, and the run's chunking."""
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
    return snap
