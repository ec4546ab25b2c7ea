"""`rate_cap.*` (`BENCH_ONLY=rate_cap`): how closely a snapshot keeps to
`snapshot.max_rows_per_second`, as binlake counts its rows and as the source counts its reads.

Two snapshots, each sized to last about `BENCH_RATE_SECONDS` (90) at the cap
`BENCH_RATE_CAP` (6,000 rows/s), so each runs well over a minute:

- `one_table`: one table of cap × seconds rows, read by `parallelism` (2) readers;
- `three_tables`: three tables of a third of those rows each, two read at once
  (`concurrent_tables: 2`), so the last table is read alone: the readers left must take the
  whole cap between them, not the share they had when three tables were waiting.

Each is timed from the snapshot's plan line (`snapshot: N tables, M chunks`, the end of
planning, whose COUNT(*) reads every row once) to its return. The achieved rate is the rows
binlake read over that window; the source's is the sum of its `Handler_read_*` counters,
sampled once a second over the same window (every row the chunk SELECTs and the tail cuts
read), with its fastest 10-second stretch. The issue's target: the achieved rate within ±10 %
of the cap over the run.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from bench.common import Bench, env_int, say

#: The issue whose target this is, and the target itself: achieved / cap within these bounds.
ISSUE = "issue 72"
TARGET = (0.9, 1.1)
#: Seconds of the source's samples the fastest stretch is taken over.
STRETCH_S = 10
#: The scenarios: key, tables (each of rows / len), concurrent tables, label.
SCENARIOS = (
    ("one_table", 1, 1, "one table, 2 readers"),
    ("three_tables", 3, 2, "three tables, two at once, 2 readers each"),
)


class _PlanLine(logging.Handler):
    """Notes when binlake's snapshot logs its plan line (planning is over, reads begin)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.at: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if (
            self.at is None
            and record.getMessage().startswith("snapshot: ")
            and ("already finished" in record.getMessage())
        ):
            self.at = time.monotonic()


class _SourceReads:
    """The rows the source's storage engines returned (`Handler_read_*`, summed: a range SELECT
    counts one key read and a `read_next` per row), sampled about once a second in a thread:
    (monotonic time, count). (MariaDB 10.11 has no `Innodb_rows_read`.)"""

    def __init__(self, bench: Bench) -> None:
        from bench.data import connect

        self._conn = connect(bench.password or "", bench.port)
        self.samples: list[tuple[float, int]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _count(self) -> int:
        with self._conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Handler\\_read\\_%'")
            return sum(int(value) for _, value in cur.fetchall())

    def _run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.monotonic(), self._count()))
            self._done.wait(1.0)

    def __enter__(self) -> _SourceReads:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.samples.append((time.monotonic(), self._count()))
        self._conn.close()

    def within(self, start: float, end: float) -> list[tuple[float, int]]:
        return [s for s in self.samples if start <= s[0] <= end]


def rate_cap(bench: Bench, spark: Any, monitor: Any) -> dict[str, Any]:
    """Both scenarios at `BENCH_RATE_CAP` rows/s, each about `BENCH_RATE_SECONDS` long."""
    from bench.data import create_and_load, drop_table

    cap = env_int("BENCH_RATE_CAP", 6_000)
    seconds = env_int("BENCH_RATE_SECONDS", 90)
    rows = cap * seconds
    password = bench.password or ""
    figures: dict[str, Any] = {"cap": cap, "seconds_planned": seconds, "rows": rows}
    for key, tables, at_once, label in SCENARIOS:
        names = [f"rate_{key}_{i}" for i in range(tables)]
        say(f"rate cap: loading {tables} × {rows // tables:,} rows ({label})")
        for name in names:
            create_and_load(password, bench.port, rows // tables, table=name)
        root = bench.fresh_root(f"rate-{key}")
        config = bench.config(root, 2, job=f"bench_rate_{key}", tables=names,
                              snapshot={"max_rows_per_second": cap,
                                        "concurrent_tables": at_once})  # fmt: skip
        with monitor.phase(f"rate_cap_{key}"):
            run = _capped_snapshot(bench, spark, config)
        run.update(label=label, tables=tables, concurrent_tables=at_once)
        figures[key] = _judged(run, cap)
        say(f"rate cap: {label}: {run['rows']:,} rows in {run['seconds']:.1f} s, "
            f"{run['rows_s']:,.0f} rows/s = {run['rows_s'] / cap:.3f}× the cap; the source "
            f"read {run['source_rows_s']:,.0f} rows/s, at most {run['source_peak_rows_s']:,.0f} "
            f"over {STRETCH_S} s")  # fmt: skip
        for name in names:
            drop_table(password, bench.port, name)
    figures["issue"] = ISSUE
    return figures


def _capped_snapshot(bench: Bench, spark: Any, config: Any) -> dict[str, Any]:
    """One snapshot with `config`, timed from its plan line; binlake's rows and the source's."""
    from binlake.jobs import commands

    plan_line = _PlanLine()
    logger = logging.getLogger("binlake.snapshot.task")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(plan_line)
    try:
        with _SourceReads(bench) as source:
            summary = commands.snapshot(spark, config)
            ended = time.monotonic()
    finally:
        logger.removeHandler(plan_line)
        logger.setLevel(level)
    if plan_line.at is None:
        raise RuntimeError("the snapshot logged no plan line: its read window is unknown")
    seconds = ended - plan_line.at
    samples = source.within(plan_line.at, ended)
    source_s = samples[-1][0] - samples[0][0]
    return {
        "rows": summary.rows,
        "chunks": summary.chunks,
        "seconds": round(seconds, 2),
        "rows_s": round(summary.rows / seconds, 1),
        "source_rows_s": round((samples[-1][1] - samples[0][1]) / source_s, 1),
        "source_peak_rows_s": round(_fastest(samples, STRETCH_S), 1),
    }


def _fastest(samples: list[tuple[float, int]], span: float) -> float:
    """The highest rate over any stretch of at least `span` seconds between samples."""
    best = 0.0
    for i, (t0, n0) in enumerate(samples):
        later = next(((t, n) for t, n in samples[i + 1 :] if t - t0 >= span), None)
        if later is not None:
            best = max(best, (later[1] - n0) / (later[0] - t0))
    return best


def _judged(run: dict[str, Any], cap: int) -> dict[str, Any]:
    """`run` with its ratios to the cap and whether the target is met."""
    low, high = TARGET
    ratio = run["rows_s"] / cap
    return {
        **run,
        "ratio": round(ratio, 3),
        "source_ratio": round(run["source_rows_s"] / cap, 3),
        "source_peak_ratio": round(run["source_peak_rows_s"] / cap, 3),
        "met": low <= ratio <= high,
    }


def rate_cap_markdown(results: dict[str, Any]) -> str:
    """The run as a table: each scenario's rates against the cap and the target."""
    r = results["rate_cap"]
    low, high = TARGET
    lines = [
        f"# Rate cap — {results['date']}",
        "",
        f"`snapshot.max_rows_per_second: {r['cap']:,}`; each snapshot {r['rows']:,} rows "
        f"(about {r['seconds_planned']} s at the cap), timed from its plan line to its end. "
        f"Target ({r['issue']}): binlake's rate over the run within {low:.1f}–{high:.1f}× "
        "the cap. The source's figures are its `Handler_read_*` counts over the same window and "
        f"its fastest {STRETCH_S}-second stretch.",
        "",
        "| run | rows | seconds | binlake rows/s | × cap | source rows/s | source peak "
        f"{STRETCH_S} s | target |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, *_ in SCENARIOS:
        s = r[key]
        lines.append(
            f"| {s['label']} | {s['rows']:,} | {s['seconds']:.1f} | {s['rows_s']:,.0f} | "
            f"{s['ratio']:.3f} | {s['source_rows_s']:,.0f} ({s['source_ratio']:.3f}×) | "
            f"{s['source_peak_rows_s']:,.0f} ({s['source_peak_ratio']:.3f}×) | "
            f"{'met' if s['met'] else 'missed'} |"
        )
    machine = results["machine"]
    lines += ["", f"Machine: {machine.get('cores')} cores, Spark {machine.get('spark_version')}, "
              f"load average at the end {machine.get('loadavg_at_end')}.", ""]  # fmt: skip
    return "\n".join(lines)
