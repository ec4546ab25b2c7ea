"""`merge_source.*` (`BENCH_ONLY=merge_source`): the stream's catch-up of one burst with silver's
MERGE source as binlake builds it against the way it was built before, alternated in one process
on the same data.

`now`: Delta's copy of the MERGE source off (`binlake.runtime.spark.DETERMINISTIC_MERGE_SOURCES`), a
table's large batch spread over tasks (`spread.CHANGES_PER_TASK`), no collapse when each key
changed once (the summary's `unique_keys`), a large batch read by several tasks
(`stream_task.read_tasks`). `before`: the copy on, one task, always collapsed, one read; made by
patching those four for the run (like `bench.phases`, no change to `src/`).
`BENCH_MERGE_SOURCE_BEFORE=reads` makes `before` differ from `now` in the reads alone,
`BENCH_MERGE_SOURCE_BEFORE=spread` in the shuffle of a table's changes alone
(`spread_past_the_limit`).

`bench.customer` (`BENCH_ROWS`) is snapshotted and its silver created once; one burst
(`BENCH_BURST`, `bench.data.make_burst`) follows. Each run catches that burst up from a copy of
the lake as it was before it (the same binlog range, the same silver files): a warm-up run of
`before`, then `BENCH_MERGE_SOURCE_ROUNDS` rounds of both, the order reversed every round, so the
JVM's warm-up and the machine's drift hit both alike. Figures are medians of the rounds: the
catch-up's wall time and Delta's metrics of silver's MERGE; `speedup` is before / now. The
burst changes each key once (`now` merges it uncollapsed); a batch repeating keys is collapsed
and cached (by `TableApply.merge_silver`) before an uncopied MERGE.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import Any

from bench.common import Bench, alternated, create_silver, env_int, medians, say

METRICS = ("executionTimeMs", "materializeSourceTimeMs", "scanTimeMs", "rewriteTimeMs")


@contextmanager
def built_as_before() -> Iterator[None]:
    """silver's MERGE source as binlake built it before: copied by Delta, one task, collapsed,
    from one read of the batch (`read_whole`); with `BENCH_MERGE_SOURCE_BEFORE=reads`, the read
    alone."""
    from pyspark.sql import Row

    from binlake.silver import merge, spread
    from binlake.stream import task as stream_task

    if os.environ.get("BENCH_MERGE_SOURCE_BEFORE") == "reads":
        with read_whole():
            yield
        return
    if os.environ.get("BENCH_MERGE_SOURCE_BEFORE") == "spread":
        with spread_past_the_limit():
            yield
        return
    summary = merge.TableApply.summarise

    def always_collapsed(self: Any, typed: Any) -> Any:
        return Row(**{**summary(self, typed).asDict(), "unique_keys": False})

    saved = stream_task.DETERMINISTIC_MERGE_SOURCES, spread.CHANGES_PER_TASK
    stream_task.DETERMINISTIC_MERGE_SOURCES, spread.CHANGES_PER_TASK = {}, 10**12
    merge.TableApply.summarise = always_collapsed  # type: ignore[method-assign]
    try:
        with read_whole():
            yield
    finally:
        stream_task.DETERMINISTIC_MERGE_SOURCES, spread.CHANGES_PER_TASK = saved
        merge.TableApply.summarise = summary  # type: ignore[method-assign]


@contextmanager
def spread_past_the_limit() -> Iterator[None]:
    """A table's changes shuffled over tasks wherever one read holds more than
    `spread.CHANGES_PER_TASK`, as before `spread.Spread` asked the shuffle to halve it."""
    from binlake.silver import spread

    rule = spread.Spread.tasks

    def past_the_limit(self: Any) -> int | None:
        if self.most_in_a_read <= spread.CHANGES_PER_TASK:
            return None
        return -(-self.changes // spread.CHANGES_PER_TASK)

    spread.Spread.tasks = property(past_the_limit)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        spread.Spread.tasks = rule  # type: ignore[method-assign]


@contextmanager
def read_whole() -> Iterator[None]:
    """Each batch read by one task, as before `stream_task.read_tasks`: the stream's spec keeps the
    stream's own server id alone."""
    from binlake.stream import task as stream_task

    spec = stream_task.stream_spec

    def one_read(*args: Any, **options: Any) -> Any:
        built = spec(*args, **options)
        return replace(built, read_ids=built.read_ids[:1])

    stream_task.stream_spec = one_read  # type: ignore[assignment]
    try:
        yield
    finally:
        stream_task.stream_spec = spec


def merge_source(bench: Bench, spark: Any, monitor: Any) -> dict[str, Any]:
    from delta.tables import DeltaTable

    from bench.data import create_and_load, make_burst
    from binlake.jobs import commands

    create_and_load(bench.password or "", bench.port, bench.rows)
    bench.binlake_snapshot(spark, 2, "merge-source", keep=True)
    base = bench.kept_root
    assert base is not None
    create_silver(spark, bench.config(base, 2), monitor, "merge_source_init")
    burst = make_burst(bench.password or "", bench.port, bench.burst)
    rounds = max(env_int("BENCH_MERGE_SOURCE_ROUNDS", 3), 1)
    plan = alternated(rounds, ("before",))
    runs: dict[str, list[dict[str, float]]] = {"before": [], "now": []}
    for index, kind in enumerate(plan):
        root = base.with_name(f"{base.name}-{kind}")
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(base, root)
        with built_as_before() if kind == "before" else nullcontext():
            started = time.monotonic()
            commands.stream(spark, bench.config(root, 2), available_now=True)
            seconds = time.monotonic() - started
        merge = DeltaTable.forPath(spark, str(root / "silver" / "bench" / "customer")).history(1)
        metrics = merge.collect()[0]["operationMetrics"]
        shutil.rmtree(root, ignore_errors=True)
        warm_up = " (warm-up)" if index == 0 else ""
        say(f"merge source: {kind:6s} catch-up {seconds:.1f} s, "
            f"MERGE {metrics['executionTimeMs']} ms{warm_up}")  # fmt: skip
        if index:
            runs[kind].append({"s": seconds, **{k: float(metrics.get(k, 0)) for k in METRICS}})
    median = medians(runs, 2)
    return {
        "changes": burst.changes,
        "rounds": rounds,
        "before": median["before"],
        "now": median["now"],
        "samples": runs,
        "speedup": round(median["before"]["s"] / median["now"]["s"], 3),
        "merge_speedup": round(
            median["before"]["executionTimeMs"] / median["now"]["executionTimeMs"], 3
        ),
    }


def merge_source_markdown(results: dict[str, Any]) -> str:
    figures = results["merge_source"]
    rows = [
        f"# binlake benchmark {results['date']}: silver's MERGE source",
        "",
        f"The catch-up of one burst of {figures['changes']:,} changes, median of "
        f"{figures['rounds']} alternated rounds after a warm-up (bench/merge_source.py).",
        "",
        "| | catch-up s | MERGE ms | source copy ms | scan ms | rewrite ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind in ("before", "now"):
        m = figures[kind]
        rows.append(
            f"| {kind} | {m['s']:.2f} | {m['executionTimeMs']:,.0f} | "
            f"{m['materializeSourceTimeMs']:,.0f} | {m['scanTimeMs']:,.0f} | "
            f"{m['rewriteTimeMs']:,.0f} |"
        )
    rows += ["", f"before / now: catch-up {figures['speedup']}×, MERGE {figures['merge_speedup']}×"]
    return "\n".join(rows) + "\n"
