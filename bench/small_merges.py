"""`small_merges.*` (`BENCH_ONLY=small_merges`): a stream's small batch of one table (a few
changed keys, new keys every batch) applied to silver with the session's settings (`before`:
compiled code and deletion vectors, Spark's and Delta's defaults;
`BENCH_SMALL_MERGE_BEFORE=interpreted` for interpreted queries) against the settings the sink
chooses for that batch (`now`, `batch_settings.settings_for`: interpreted queries where the
silver is small, MERGEs that rewrite the files they touch where the batch's changes rewrite few
bytes),
alternated in one process on the same silver. Run at several `BENCH_ROWS` and
`BENCH_SMALL_MERGE_KEYS`, it shows where those settings stop paying: the silver's size in bytes
and files and the sink's choice for each batch size are reported beside the times
(`BENCH_REWRITE_BYTES` moves the sink's `REWRITE_BYTES` for the run).

`bench.customer` (`BENCH_ROWS`) is snapshotted and its silver created once (the stream's real
layout: key-ordered files of 50k rows, deletion vectors, CDF). Each batch is binlake's own apply
(`silver.merge.TableApply`: summary, MERGE, changelog append) of update records as the stream's
source emits them, each newer than anything silver holds; the updated keys are spread over the
table, none updated twice, so every batch names new key values as the stream's do. Batches change
`BENCH_SMALL_MERGE_KEYS` keys in turn ("1,2": one, then two). A warm-up of each kind, then
`BENCH_SMALL_MERGE_ROUNDS` rounds of `BENCH_SMALL_MERGE_BATCHES` batches of both kinds, the order
reversed every round, so the JVM's warm-up and the machine's drift hit both alike. Per kind: the
median seconds per batch and classes Spark compiled per batch (its `CodegenMetrics`); `speedup` is
before / now. Both run with the stream's other settings (`DETERMINISTIC_MERGE_SOURCES`,
`KEY_SETS_BY_REFERENCE`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench.common import (
    Bench,
    alternated,
    current_offset,
    customer_silver,
    env_int,
    medians,
    say,
    update_records,
)


def small_merges(bench: Bench, spark: Any, monitor: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from binlake.runtime.spark import (
        DETERMINISTIC_MERGE_SOURCES,
        INTERPRETED_QUERIES,
        KEY_SETS_BY_REFERENCE,
        session_settings,
    )
    from binlake.silver.merge import data_columns, silver_table
    from binlake.stream import batch_settings

    config, table = customer_silver(bench, spark, monitor, "small-merges")
    silver = silver_table(config, table)
    columns = data_columns(spark, silver, config, table.qualified)
    assert columns is not None
    rounds = max(env_int("BENCH_SMALL_MERGE_ROUNDS", 4), 1)
    per_round = max(env_int("BENCH_SMALL_MERGE_BATCHES", 6), 2)
    plan = alternated(rounds, ("before", "now"))
    batches = len(plan) * per_round
    cycle = [int(k) for k in os.environ.get("BENCH_SMALL_MERGE_KEYS", "1,2").split(",")]
    keys_of = [cycle[index % len(cycle)] for index in range(batches)]
    stride = max(bench.rows // (sum(keys_of) + 1), 1)
    keys = [stride * (n + 1) for n in range(sum(keys_of))]
    key = table.key[0]
    rows = {r[key]: r for r in silver.read(spark).where(F.col(key).isin(keys)).collect()}
    batch = SmallBatch(spark, config, table, columns, rows, current_offset(bench))
    runs: dict[str, list[dict[str, float]]] = {"before": [], "now": []}
    taken = 0
    size = silver.size(spark)
    assert size is not None
    before = os.environ.get("BENCH_SMALL_MERGE_BEFORE", "compiled")
    stream_settings = {**DETERMINISTIC_MERGE_SOURCES, **KEY_SETS_BY_REFERENCE}
    before_settings = INTERPRETED_QUERIES if before == "interpreted" else {}
    with session_settings(spark, stream_settings), session_settings(spark, before_settings):
        for index, kind in enumerate(plan):
            done = []
            for b in range(per_round):
                number = index * per_round + b
                changed = keys[taken : taken + keys_of[number]]
                taken += len(changed)
                done.append(batch(number, changed, kind))
            warm_up = index < 2
            say(f"small merges: {kind:6s} " + ", ".join(
                f"{d['s']:.2f} s/{d['compiled']:.0f} classes" for d in done
            ) + (" (warm-up)" if warm_up else ""))  # fmt: skip
            if not warm_up:
                runs[kind].extend(done)
    changed_rows = silver.read(spark).where(F.col("c_login").startswith("#")).count()
    median = medians(runs, 3)
    return {
        "rows": bench.rows,
        "before_settings": before_settings,
        "sink_choices": {str(k): v for k, v in sorted(batch.choices.items())},
        "rewrite_bytes": batch_settings.REWRITE_BYTES,
        "silver_bytes": size.bytes,
        "silver_files": size.files,
        "rounds": rounds,
        "batches_per_round": per_round,
        "before": median["before"],
        "now": median["now"],
        "samples": runs,
        "speedup": round(median["before"]["s"] / median["now"]["s"], 3),
        "keys_changed": taken,
        "silver_rows_changed": changed_rows,
        "silver_matches": changed_rows == taken,
    }


class SmallBatch:
    """`batch(index, changed, kind)`: batch `index`, an update of the `changed` keys of `rows`
    (silver's rows by key), applied by `TableApply` with the session's settings (`before`) or
    the sink's choice for it (`now`, kept in `choices` by keys per batch): its seconds and the
    classes Spark compiled for it."""

    def __init__(
        self, spark: Any, config: Any, table: Any, columns: Any, rows: dict[Any, Any], start: Any
    ) -> None:
        from binlake.silver.merge import ChangelogEnds
        from binlake.stream.batch_settings import SilverSizes

        self.spark, self.config, self.table, self.columns = spark, config, table, columns
        self.rows, self.start = rows, start
        self.ends = ChangelogEnds()
        self.compiler = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
        self.tables = {table.qualified: table}
        self.sizes = SilverSizes()  # kept over the batches, as the sink keeps it over a run
        self.choices: dict[int, list[str]] = {}  # keys per batch: the sink's settings for it

    def compiled(self) -> int:
        return int(self.compiler.METRIC_COMPILATION_TIME().getCount())

    def __call__(self, index: int, changed: list[int], kind: str) -> dict[str, float]:
        from binlake.silver.merge import TableApply
        from binlake.stream.batch_settings import settings_for

        spark, config, table = self.spark, self.config, self.table
        frame = update_records(spark, table, [self.rows[k] for k in changed], index, self.start)
        before = self.compiled()
        started = time.monotonic()
        if kind == "now":
            counts = {table.qualified: len(changed)}
            with settings_for(spark, config, self.tables, counts, self.sizes):
                self.choices[len(changed)] = self.in_force()
                TableApply(config, table, self.columns, ends=self.ends)(frame)
        else:
            TableApply(config, table, self.columns, ends=self.ends)(frame)
        return {"s": time.monotonic() - started, "compiled": self.compiled() - before}

    def in_force(self) -> list[str]:
        from binlake.runtime.spark import COPY_ON_WRITE_MERGES, INTERPRETED_QUERIES

        groups = {"interpreted": INTERPRETED_QUERIES, "rewrites": COPY_ON_WRITE_MERGES}
        return [
            name
            for name, group in groups.items()
            if all(self.spark.conf.get(key, None) == value for key, value in group.items())
        ]


def small_merges_markdown(results: dict[str, Any]) -> str:
    figures = results["small_merges"]
    choices = "; ".join(
        f"{keys} key(s): {', '.join(chosen) or 'the session’s own'}"
        for keys, chosen in figures["sink_choices"].items()
    )
    keys = " then ".join(sorted(figures["sink_choices"], key=int))
    rows = [
        f"# binlake benchmark {results['date']}: small MERGEs of new keys",
        "",
        f"Batches of {keys} updated key(s) (new keys every batch) applied to a "
        f"{figures['rows']:,}-row silver "
        f"({figures['silver_bytes']:,} bytes in {figures['silver_files']} files) by "
        f"`silver.merge.TableApply`; median of {figures['rounds']} alternated rounds of "
        f"{figures['batches_per_round']} batches per kind, after a warm-up of each "
        "(bench/small_merges.py).",
        "",
        f"The sink's settings for each batch (`REWRITE_BYTES` {figures['rewrite_bytes']:,}): "
        f"{choices}.",
        "",
        "| settings | s per batch | classes compiled per batch |",
        "|---|---:|---:|",
    ]
    before = "interpreted" if figures["before_settings"] else "compiled"
    labels = {
        "before": f"{before}, deletion vectors (before)",
        "now": "the sink's choice (now)",
    }
    for kind in ("before", "now"):
        m = figures[kind]
        rows.append(f"| {labels[kind]} | {m['s']:.3f} | {m['compiled']:.0f} |")
    rows += [
        "",
        f"before / now: {figures['speedup']}× per batch; silver holds each batch's change: "
        f"{figures['silver_matches']} ({figures['silver_rows_changed']} of "
        f"{figures['keys_changed']} keys)",
    ]
    return "\n".join(rows) + "\n"
