"""What the benchmark's scenarios share: paths and replica server ids, `say` and `env_int`, the
Spark session, `Bench` (the run's settings, binlake's config and lake roots, a binlake snapshot),
connections to the source, silver's fingerprint, profiled catch-ups, silver created from a
snapshot of `bench.customer`, the change records of a batch of updates, and the order and
medians of a before/now scenario. Scenario modules import this one; `bench.run` imports them."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
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


class Bench:
    """The run's settings (`BENCH_*`, the source's port and password), binlake's config for a
    lake root, fresh lake roots, the snapshot samples, and binlake's snapshot of the table."""

    def __init__(self) -> None:
        self.rows = env_int("BENCH_ROWS", 1_000_000)
        self.reps = max(env_int("BENCH_REPS", 3), 1)
        self.chunk_size = env_int("BENCH_CHUNK_SIZE", 8096)
        self.chunks_per_commit = env_int("BENCH_CHUNKS_PER_COMMIT", 0)
        self.burst = env_int("BENCH_BURST", 200_000)
        self.update_rate = float(os.environ.get("BENCH_UPDATE_RATE", "500"))
        self.markers = env_int("BENCH_LATENCY_MARKERS", 30)
        self.trigger = os.environ.get("BENCH_TRIGGER", "1s")
        self.port = int(os.environ.get("BINLAKE_DB_PORT", "13306"))
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
        snapshot: dict[str, Any] | None = None,
    ):
        """The bench's binlake config; `stream`, `snapshot`: settings of those sections besides
        the bench's own (the job name and trigger; the chunk size, parallelism and commit)."""
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
                    **(snapshot or {}),
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

    # ---- binlake's snapshot (the baselines are in bench/snapshot.py)

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


class cursor:
    """`with cursor(bench) as cur:` a cursor on a fresh autocommit connection to bench."""

    def __init__(self, bench: Bench) -> None:
        from bench.data import connect

        self.conn = connect(bench.password or "", bench.port)

    def __enter__(self):
        return self.conn.cursor()

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


# --------------------------------------------------------------------------- silver and the stream


def latest_version(spark, table) -> int:
    """The Delta version `table` (a LakeTable) is at."""
    return spark.sql(f"DESCRIBE HISTORY {table.sql} LIMIT 1").first()["version"]


def current_offset(bench: Bench, database: str = "bench"):
    from binlake.config.secrets import with_resolved_password
    from binlake.mysql.connection import connection
    from binlake.mysql.server import current_offset as head

    source = with_resolved_password(bench.config(WORK, 2, database=database).source)
    with connection(source) as conn:
        return head(conn)


def silver_fingerprint(spark, config, table=None) -> dict[str, int]:
    """Count, column sums and key range of silver's `table` (the config's only table if None):
    what `bench.data.table_fingerprint` computes on the source."""
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate
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


def create_silver(spark, config, monitor, phase: str) -> float:
    """Silver created from bronze: the first `commands.stream(available_now=True)` after a
    snapshot, with nothing to catch up. Returns its seconds."""
    from binlake.jobs import commands

    with monitor.phase(phase):
        started = time.monotonic()
        commands.stream(spark, config, available_now=True)
        return time.monotonic() - started


# --------------------------------------------------------------------------- before/now scenarios


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


def customer_silver(bench: Bench, spark: Any, monitor: Any, name: str) -> tuple[Any, Any]:
    """`bench.customer` (`BENCH_ROWS`) loaded, snapshotted into the kept lake root `name` and its
    silver created (the stream's real layout): the lake's config and the table's schema."""
    from bench.data import create_and_load
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate

    create_and_load(bench.password or "", bench.port, bench.rows)
    bench.binlake_snapshot(spark, 2, name, keep=True)
    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    create_silver(spark, config, monitor, f"{name.replace('-', '_')}_init")
    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    return config, table


def update_records(spark: Any, table: Any, rows: list[Any], index: int, start: Any) -> Any:
    """The change records of batch `index` as the stream's source emits them: an update of each
    of silver's `rows` setting `c_login` to `#index`, each at its own offset past `start` (the
    binlog head after the snapshot), so newer than anything silver holds."""
    from binlake.model.offsets import BinlogOffset, position_token
    from binlake.silver.change_record import CHANGE_SCHEMA, ImageEncoder

    names, encode = list(table.column_names), ImageEncoder(table)
    records = []
    for n, row in enumerate(rows):
        old = tuple(row[c] for c in names)
        new = tuple(f"#{index}" if c == "c_login" else row[c] for c in names)
        at = BinlogOffset(start.file, start.pos + 1 + 100 * index + n)
        records.append(
            (table.qualified, "update", position_token(at, 0), at.file, at.pos, 0,
             int(time.time()), encode(old), encode(new))
        )  # fmt: skip
    return spark.createDataFrame(records, CHANGE_SCHEMA)
