"""Where a binlake job's time goes, measured from outside binlake: wall time per named function
(`PhaseTimer`), binlake's own INFO log lines with their timestamps (`LogCapture`) and the
streaming query's per-trigger durations (`QueryProgress`, a `StreamingQueryListener`).

`PhaseTimer` wraps functions and methods of binlake's modules in this process for the duration of
a `with` block and restores them after: no change to binlake's code, but it names binlake's
internals (`"module:qualname"`), so a renamed function shows up as `"missing": true` in the
result instead of failing the benchmark. Only the driver is seen (Spark tasks run in other
processes); functions that run in threads (the stream's per-table apply) add up over threads, so
their sum can exceed the wall time.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import logging
import statistics
import threading
import time
from typing import Any

#: The snapshot's steps (`binlake.snapshot.task.run_snapshot`). Top-level phases do not overlap;
#: `a.b` is part of `a`. `scheduler.table.*` run in the scheduler's threads, one call per table
#: (or commit batch), so their sums add up over threads.
SNAPSHOT_PHASES = {
    "validate": "binlake.snapshot.task:validate",
    "plan": "binlake.snapshot.task:plan_chunks",
    "plan.ledger_read": "binlake.snapshot.ledger:Ledger.chunks",
    "plan.source_queries": "binlake.snapshot.task:plan_table",
    "schema_history": "binlake.mysql.schema_history:SchemaHistory.reset_all",
    "scheduler": "binlake.snapshot.task:ChunkScheduler.run",
    "scheduler.table": "binlake.snapshot.task:ChunkScheduler.copy_table",
    "scheduler.table.read_commit": "binlake.snapshot.task:read_and_commit",
    "scheduler.ledger_mark_finished": "binlake.snapshot.ledger:Ledger.mark_finished",
}
SNAPSHOT_TOP = ("validate", "plan", "schema_history", "scheduler")

#: The stream's start-up (`binlake.stream.task.run_stream`) and its `foreachBatch` sink
#: (`binlake.stream.sink.BatchSink`): `batch.*` are parts of a batch; `batch.table.*` run in
#: the sink's thread pool, one call per table.
STREAM_PHASES = {
    "startup.validate": "binlake.stream.task:validate",
    "startup.check_available": "binlake.stream.task:check_available",
    "startup.ensure_silver": "binlake.stream.task:ensure_silver",
    "startup.join_ready_tables": "binlake.stream.task:join_ready_tables",
    "ledger_read": "binlake.snapshot.ledger:Ledger.chunks",
    "schema_history_entries": "binlake.mysql.schema_history:SchemaHistory.entries",
    "batch": "binlake.stream.sink:BatchSink.apply_batch",
    "batch.summary": "binlake.stream.sink:batch_summary",
    "batch.settings_choice": "binlake.stream.batch_settings:silver_sizes",
    "batch.lag": "binlake.stream.sink:BatchSink.batch_lag",
    "batch.join_ready_tables": "binlake.stream.sink:join_ready_tables",
    "batch.table": "binlake.stream.sink:apply_table_changes",
    "batch.table.silver_schema": "binlake.stream.table_changes:data_columns",
    "batch.table.summary": "binlake.silver.merge:TableApply.summarise",
    "batch.table.changelog_append": "binlake.silver.merge:TableApply.append_changelog",
    "batch.table.merge": "binlake.silver.merge:TableApply.merge_silver",
}


class PhaseTimer:
    """`with PhaseTimer(SNAPSHOT_PHASES) as timer: jobs.snapshot(...)`; then `timer.result()`:
    per phase the calls, total seconds, mean and max seconds per call, and with 8 calls or more
    the mean of the first and of the last quarter of the calls (in the order they ended)."""

    def __init__(self, phases: dict[str, str]) -> None:
        self.phases = phases
        self._lock = threading.Lock()
        self._calls: dict[str, list[float]] = {name: [] for name in phases}
        self._missing: set[str] = set()
        self._undo: list[tuple[Any, str, Any, bool]] = []

    def __enter__(self) -> PhaseTimer:
        for phase, target in self.phases.items():
            owner, attr = _resolve(target)
            if owner is None or not hasattr(owner, attr):
                self._missing.add(phase)
                continue
            raw = inspect.getattr_static(owner, attr)
            if isinstance(raw, staticmethod | classmethod) or not callable(raw):
                self._missing.add(phase)
                continue
            own = attr in vars(owner)
            self._undo.append((owner, attr, raw, own))
            setattr(owner, attr, self._wrap(phase, raw))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, raw, own in reversed(self._undo):
            if own:
                setattr(owner, attr, raw)
            else:
                delattr(owner, attr)
        self._undo.clear()

    def _wrap(self, phase: str, fn: Any) -> Any:
        calls = self._calls[phase]
        lock = self._lock

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds = time.monotonic() - started
                with lock:
                    calls.append(seconds)

        return timed

    def result(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for phase in self.phases:
            if phase in self._missing:
                out[phase] = {"missing": True}
                continue
            calls = self._calls[phase]
            out[phase] = {
                "calls": len(calls),
                "s": round(sum(calls), 2),
                "mean_s": round(statistics.fmean(calls), 3) if calls else None,
                "max_s": round(max(calls), 3) if calls else None,
            }
            if len(calls) >= 8:  # does a call get slower as the job goes on (a growing log)?
                quarter = len(calls) // 4
                out[phase]["first_quarter_mean_s"] = round(statistics.fmean(calls[:quarter]), 3)
                out[phase]["last_quarter_mean_s"] = round(statistics.fmean(calls[-quarter:]), 3)
        return out


def _resolve(target: str) -> tuple[Any, str]:
    """`module:name` or `module:Class.method` → (the module or class, the attribute name)."""
    module_name, _, path = target.partition(":")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        return None, path
    *parents, attr = path.split(".")
    for part in parents:
        owner = getattr(owner, part, None)
        if owner is None:
            return None, attr
    return owner, attr


def breakdown(
    phases: dict[str, dict[str, Any]], top: tuple[str, ...], total_s: float, per: int
) -> dict[str, Any]:
    """Top-level phases with their share of `total_s` and seconds per table (`per` tables), and
    what they leave unaccounted (`other`)."""
    out: dict[str, Any] = {}
    accounted = 0.0
    for name in top:
        p = phases.get(name, {})
        if p.get("missing"):
            continue
        accounted += p["s"]
        out[name] = {
            "s": p["s"],
            "share": round(p["s"] / total_s, 3) if total_s else None,
            "per_table_s": round(p["s"] / per, 3) if per else None,
        }
    other = max(total_s - accounted, 0.0)
    out["other"] = {
        "s": round(other, 2),
        "share": round(other / total_s, 3) if total_s else None,
        "per_table_s": round(other / per, 3) if per else None,
    }
    return out


class LogCapture(logging.Handler):
    """binlake's INFO log records while the `with` block runs (time, logger, message). They are
    kept off the terminal unless `echo` (the benchmark's BENCH_VERBOSE)."""

    def __init__(self, echo: bool = False) -> None:
        super().__init__(logging.INFO)
        self.echo = echo
        self.records: list[tuple[float, str, str]] = []
        self._logger = logging.getLogger("binlake")
        self._saved: tuple[int, bool] = (self._logger.level, self._logger.propagate)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.created, record.name, record.getMessage()))

    def __enter__(self) -> LogCapture:
        self._saved = (self._logger.level, self._logger.propagate)
        self._logger.addHandler(self)
        self._logger.setLevel(logging.INFO)
        self._logger.propagate = self.echo
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]

    def matching(self, *needles: str) -> list[tuple[float, str]]:
        return [(t, m) for t, _, m in self.records if any(n in m for n in needles)]


def snapshot_log_windows(capture: LogCapture, started: float) -> dict[str, Any]:
    """What binlake's own snapshot log lines tell, by their timestamps: planning (the start to
    the `snapshot: N tables, …` line, which follows every table's plan) and the per-table load
    (between consecutive `snapshot <table>: chunks …` lines: bronze creation + read + commit +
    ledger, as one)."""
    planned_at = next(
        (t for t, m in capture.matching(" tables, ") if m.startswith("snapshot: ")), None
    )
    progress = [t for t, m in capture.matching(": chunks ") if m.startswith("snapshot ")]
    if planned_at is None:
        return {}
    marks = [planned_at, *progress]
    loads = [b - a for a, b in itertools.pairwise(marks)]
    return {
        "planning_s": round(planned_at - started, 2),
        "progress_lines": len(progress),
        "load_s": round(sum(loads), 2),
        "load_per_table_median_s": round(statistics.median(loads), 3) if loads else None,
        "load_per_table_max_s": round(max(loads), 3) if loads else None,
    }


class QueryProgress:
    """Each streaming trigger's `durationMs` (Spark's own split: latestOffset, queryPlanning,
    addBatch = the binlake sink, walCommit, commitOffsets, triggerExecution) while the `with`
    block runs, through a `StreamingQueryListener` on `spark`."""

    def __init__(self, spark: Any) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.spark = spark
        self.progress: list[dict[str, Any]] = []
        outer = self

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                p = event.progress
                outer.progress.append(
                    {
                        "batch": p.batchId,
                        "input_rows": p.numInputRows,
                        "duration_ms": dict(p.durationMs),
                    }
                )

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self._listener = _Listener()

    def __enter__(self) -> QueryProgress:
        self.spark.streams.addListener(self._listener)
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(1.0)  # progress events arrive asynchronously
        self.spark.streams.removeListener(self._listener)
