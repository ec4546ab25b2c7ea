"""`make soak`: a continuous `binlake stream` under a sustained write rate, for SOAK_S seconds
(default 600) at SOAK_RATE changes/s (default 300). Samples the stream process tree's memory
(driver Python, its JVM, the Python workers) and its lag, and reports whether memory stayed flat
and lag bounded; the figures go to bench/results/soak-<date>.json.

Lag at time t: t minus the moment the source's binlog head first reached the end offset of the
stream's newest committed batch (how old the newest change silver holds may be).
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path

import psutil
import pymysql
import yaml

from binlake.lake.files import ArrowFiles
from binlake.model.offsets import BinlogOffset
from binlake.stream.sink import batch_end

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "soak"
DATABASE = "binlake_soak"
ROWS = 20_000
MB = 1 << 20
#: Seconds of the run left out of the lag and memory figures: the JVM starts, the first
#: batches catch up the writes made meanwhile.
WARMUP_S = 120


def say(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", flush=True)


def connect(database: str | None = None) -> pymysql.Connection:
    return pymysql.connect(
        host="127.0.0.1", port=int(os.environ["BINLAKE_DB_PORT"]), user="binlake",
        password=os.environ["BINLAKE_SOURCE_PASSWORD"], database=database, autocommit=True,
    )  # fmt: skip


def head(cur: pymysql.cursors.Cursor) -> BinlogOffset:
    cur.execute("SHOW MASTER STATUS")
    file, pos = cur.fetchone()[:2]
    return BinlogOffset(file, int(pos))


def seed() -> None:
    with connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")
        cur.execute(f"CREATE DATABASE `{DATABASE}`")
        cur.execute(f"USE `{DATABASE}`")
        cur.execute("SET SESSION max_recursive_iterations = %s", (ROWS,))
        for table in ("orders", "stock"):
            cur.execute(
                f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL, "
                "note VARCHAR(64) NOT NULL, at DATETIME(6) NOT NULL)"
            )
            cur.execute(
                f"INSERT INTO {table} WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                "FROM s WHERE n < %s) SELECT n, n %% 97, CONCAT('seed ', n), NOW(6) FROM s",
                (ROWS,),
            )


class Writer(threading.Thread):
    """SOAK_RATE changes/s: updates, inserts, deletes and small multi-row transactions."""

    def __init__(self, rate: int) -> None:
        super().__init__(daemon=True)
        self.rate, self.stop, self.changes = rate, threading.Event(), 0

    def run(self) -> None:
        rng, next_id = random.Random(3), ROWS + 1
        with connect(DATABASE) as conn, conn.cursor() as cur:
            started = time.monotonic()
            while not self.stop.is_set():
                table, roll = rng.choice(("orders", "stock")), rng.random()
                if roll < 0.6:
                    cur.execute(
                        f"UPDATE {table} SET qty = qty + 1, at = NOW(6) WHERE id = %s",
                        (rng.randint(1, next_id),),
                    )
                elif roll < 0.85:
                    cur.execute(f"INSERT INTO {table} VALUES (%s, 1, 'soak', NOW(6))", (next_id,))
                    next_id += 1
                else:
                    cur.execute(f"DELETE FROM {table} WHERE id = %s", (rng.randint(1, next_id),))
                self.changes += 1
                ahead = self.changes / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    self.stop.wait(ahead)


def tree_memory_mb(process: psutil.Process) -> dict[str, float]:
    """RSS of the stream's driver Python, its JVM and its Python workers, and the JVM's heap in
    use (`jstat`): RSS only grows until the heap reaches its maximum; a leak shows in the heap's
    floor, the heap in use after collections."""
    memory = {"driver_python": 0.0, "jvm": 0.0, "workers": 0.0, "heap_used": 0.0}
    for proc in [process, *process.children(recursive=True)]:
        try:
            cmd = " ".join(proc.cmdline())
            mb = proc.memory_info().rss / MB
        except psutil.Error:
            continue
        if proc.pid == process.pid:
            memory["driver_python"] += mb
        elif "java" in cmd.split(" ", 1)[0]:
            memory["jvm"] += mb
            memory["heap_used"] += heap_used_mb(proc.pid)
        elif "pyspark" in cmd:
            memory["workers"] += mb
    return memory


def heap_used_mb(pid: int) -> float:
    """Survivor, eden and old generation in use, from `jstat -gc` (KB columns)."""
    try:
        out = subprocess.run(["jstat", "-gc", str(pid)], capture_output=True, text=True, timeout=10)
        names, values = (line.split() for line in out.stdout.strip().splitlines()[:2])
    except (OSError, subprocess.SubprocessError, ValueError):
        return 0.0
    used = dict(zip(names, values, strict=False))
    return sum(float(used.get(k, 0)) for k in ("S0U", "S1U", "EU", "OU")) / 1024


def main() -> int:
    seconds = int(os.environ.get("SOAK_S", "600"))
    rate = int(os.environ.get("SOAK_RATE", "300"))
    WORK.mkdir(parents=True, exist_ok=True)
    lake = WORK / "lake"
    subprocess.run(["rm", "-rf", str(lake)], check=True)
    config = {
        "source": {"port": int(os.environ["BINLAKE_DB_PORT"]), "database": DATABASE,
                   "server_id_range": [7800, 7804]},
        "snapshot": {"chunk_size": 4000, "parallelism": 2},
        "lake": {"root": str(lake)},
        "stream": {"trigger_interval": "5s", "job_name": "soak"},
    }  # fmt: skip
    config_file = WORK / "soak.yml"
    config_file.write_text(yaml.safe_dump(config))
    say(f"seeding {DATABASE}: 2 tables × {ROWS} rows")
    seed()
    binlake = [sys.executable, "-m", "binlake"]
    subprocess.run([*binlake, "snapshot", "--config", str(config_file)], check=True)
    checkpoint = lake / "_system" / "checkpoints" / "soak"
    log = (WORK / "stream.log").open("w")
    stream = subprocess.Popen(
        [*binlake, "stream", "--config", str(config_file)], stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    writer = Writer(rate)
    heads: list[tuple[float, BinlogOffset]] = []
    samples: list[dict[str, float]] = []
    try:
        writer.start()
        say(f"writing {rate} changes/s for {seconds} s while the stream runs")
        started = time.monotonic()
        with connect() as conn, conn.cursor() as cur:
            next_sample = started + 15
            while time.monotonic() - started < seconds:
                if stream.poll() is not None:
                    raise SystemExit(f"the stream exited with {stream.returncode}: see {log.name}")
                heads.append((time.monotonic(), head(cur)))
                if time.monotonic() >= next_sample:
                    next_sample += 15
                    samples.append(sample(psutil.Process(stream.pid), checkpoint, heads, started))
                    s = samples[-1]
                    say(
                        f"t={s['t']:.0f}s rss driver {s['driver_python']:.0f} MB, jvm "
                        f"{s['jvm']:.0f} MB (heap {s['heap_used']:.0f} MB), workers "
                        f"{s['workers']:.0f} MB; lag {s['lag_s']:.1f} s"
                    )
                time.sleep(0.5)
    finally:
        writer.stop.set()
        writer.join()
        os.killpg(stream.pid, signal.SIGTERM)
        stream.wait(timeout=60)
    report = summary(samples, writer.changes, seconds, rate)
    out = ROOT / "bench" / "results" / f"soak-{date.today().isoformat()}.json"
    out.write_text(json.dumps({"summary": report, "samples": samples}, indent=2) + "\n")
    say(json.dumps(report, indent=2))
    say(f"written to {out.relative_to(ROOT)}")
    return 0


def sample(
    process: psutil.Process, checkpoint: Path, heads: list[tuple[float, BinlogOffset]],
    started: float,
) -> dict[str, float]:  # fmt: skip
    now = time.monotonic()
    commits = sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))
    end = batch_end(ArrowFiles(), str(checkpoint), commits[-1]) if commits else None
    reached = next((t for t, h in heads if end is not None and h >= end), None)
    lag = now - reached if reached is not None else now - started
    return {"t": round(now - started, 1), "lag_s": round(lag, 2), **tree_memory_mb(process)}


def summary(samples: list[dict[str, float]], changes: int, seconds: int, rate: int) -> dict:
    """Lag and memory after the warm-up (the JVM's start and the first batches), by thirds:
    flat memory means the last third's heap floor is not above the first's."""
    steady = [s for s in samples if s["t"] >= WARMUP_S] or samples
    lags = sorted(s["lag_s"] for s in steady)
    third = max(len(steady) // 3, 1)
    first, last = steady[:third], steady[-third:]

    def rss(group: list[dict[str, float]]) -> int:
        return round(statistics.mean(s["driver_python"] + s["jvm"] + s["workers"] for s in group))

    return {
        "seconds": seconds,
        "warmup_s": WARMUP_S,
        "target_rate": rate,
        "changes": changes,
        "achieved_rate": round(changes / seconds),
        "lag_p50_s": round(statistics.median(lags), 2),
        "lag_p95_s": round(lags[min(len(lags) - 1, int(0.95 * len(lags)))], 2),
        "lag_max_s": lags[-1],
        "rss_first_third_mb": rss(first),
        "rss_last_third_mb": rss(last),
        "rss_max_mb": round(max(s["driver_python"] + s["jvm"] + s["workers"] for s in samples)),
        "heap_floor_first_third_mb": round(min(s["heap_used"] for s in first)),
        "heap_floor_last_third_mb": round(min(s["heap_used"] for s in last)),
        "workers_last_third_mb": round(max(s["workers"] for s in last)),
    }


if __name__ == "__main__":
    sys.exit(main())
