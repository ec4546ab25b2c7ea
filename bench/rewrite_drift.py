"""`rewrite_drift.*` (`BENCH_ONLY=rewrite_drift`): what a long run of small batches does to
silver's layout and to the cost of each batch. Each batch updates `BENCH_DRIFT_KEYS` (3) keys
spread at random over the table (new keys every batch), applied by binlake's own apply
(`silver.merge.TableApply`) with the settings the sink chooses for it
(`batch_settings.settings_for`: a few keys into a large silver rewrite the files they touch).
`before` writes the MERGE's output as Delta does by default, one file per task (the sink's
`file_sizes.silver_file_settings` undone);
`now` as the sink writes it, at most `SILVER_FILE_ROWS` rows per file. Both apply the same
batches to two copies of the same silver (`bench.customer` snapshotted, its silver created
once), alternated batch by batch so the machine's drift hits both alike.

Per kind and per tenth of the `BENCH_DRIFT_BATCHES` (60) batches: the median seconds per batch
and the rows each MERGE copied unchanged into the files it rewrote (Delta's
`numTargetRowsCopied`: the rewrite's size). At the end: the largest file's rows, the live file
count, and how many files' key ranges hold a key on average (the files Delta's skipping leaves a
MERGE to read for one key).
"""

from __future__ import annotations

import random
import shutil
import statistics
import time
from typing import Any

from bench.common import Bench, current_offset, customer_silver, env_int, say, update_records


def rewrite_drift(bench: Bench, spark: Any, monitor: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from binlake.runtime.spark import (
        DETERMINISTIC_MERGE_SOURCES,
        KEY_SETS_BY_REFERENCE,
        session_settings,
    )
    from binlake.silver.file_sizes import silver_file_settings
    from binlake.silver.merge import (
        ChangelogEnds,
        TableApply,
        data_columns,
        silver_table,
    )
    from binlake.stream.batch_settings import SilverSizes, settings_for

    config, table = customer_silver(bench, spark, monitor, "rewrite-drift")
    assert bench.kept_root is not None
    copy = bench.kept_root.with_name(bench.kept_root.name + "-now")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(bench.kept_root, copy)
    configs = {"before": config, "now": bench.config(copy, 2)}
    silvers = {kind: silver_table(c, table) for kind, c in configs.items()}
    columns = data_columns(spark, silvers["before"], config, table.qualified)
    assert columns is not None

    batches = max(env_int("BENCH_DRIFT_BATCHES", 60), 10)
    per_batch = max(env_int("BENCH_DRIFT_KEYS", 3), 1)
    key = table.key[0]
    changed = random.Random(3).sample(range(1, bench.rows + 1), batches * per_batch)
    rows = {
        r[key]: r for r in silvers["before"].read(spark).where(F.col(key).isin(changed)).collect()
    }
    start = current_offset(bench)
    tables = {table.qualified: table}
    ends = {kind: ChangelogEnds() for kind in configs}
    sizes = {kind: SilverSizes() for kind in configs}
    file_settings = {"before": {key: "0" for key in silver_file_settings()}, "now": {}}
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in configs}

    def batch(index: int, kind: str) -> None:
        keys = changed[index * per_batch : (index + 1) * per_batch]
        frame = update_records(spark, table, [rows[k] for k in keys], index, start)
        c = configs[kind]
        started = time.monotonic()
        with (
            settings_for(spark, c, tables, {table.qualified: len(keys)}, sizes[kind]),
            session_settings(spark, file_settings[kind]),
        ):
            TableApply(c, table, columns, ends=ends[kind])(frame)
        seconds = time.monotonic() - started
        merge = spark.sql(f"DESCRIBE HISTORY {silvers[kind].sql} LIMIT 1").first()
        assert merge["operation"] == "MERGE", merge["operation"]
        copied = int(merge["operationMetrics"].get("numTargetRowsCopied", 0))
        runs[kind].append({"s": seconds, "rows_copied": copied})

    with session_settings(spark, {**DETERMINISTIC_MERGE_SOURCES, **KEY_SETS_BY_REFERENCE}):
        for index in range(batches):
            for kind in ("before", "now") if index % 2 == 0 else ("now", "before"):
                batch(index, kind)
            if (index + 1) % max(batches // 10, 1) == 0:
                say(f"rewrite drift: batch {index + 1}/{batches}: " + "; ".join(
                    f"{kind} {r[-1]['s']:.2f} s, {r[-1]['rows_copied']:,} rows copied"
                    for kind, r in runs.items()
                ))  # fmt: skip
    return {
        "rows": bench.rows,
        "batches": batches,
        "keys_per_batch": per_batch,
        "tenths": {kind: _tenths(done, batches) for kind, done in runs.items()},
        "layout": {kind: _layout(spark, s, key) for kind, s in silvers.items()},
        "samples": runs,
    }


def _tenths(done: list[dict[str, float]], batches: int) -> list[dict[str, float]]:
    """Per tenth of the run's batches, the median of each figure of its batches."""
    tenth = max(batches // 10, 1)
    return [
        {
            field: round(statistics.median(r[field] for r in done[i : i + tenth]), 3)
            for field in ("s", "rows_copied")
        }
        for i in range(0, batches - tenth + 1, tenth)
    ]


def _layout(spark: Any, silver: Any, key: str) -> dict[str, float]:
    """Silver's live files: how many, the largest's rows, and the mean number of files whose
    key range (min to max) holds a key, over keys at random."""
    from pyspark.sql import functions as F

    files = (
        silver.read(spark)
        .groupBy(F.input_file_name())
        .agg(F.count("*").alias("n"), F.min(key).alias("lo"), F.max(key).alias("hi"))
        .collect()
    )
    highest = max(f["hi"] for f in files)
    probes = random.Random(7).sample(range(1, highest + 1), 500)
    holding = statistics.mean(sum(1 for f in files if f["lo"] <= k <= f["hi"]) for k in probes)
    return {
        "files": len(files),
        "largest_file_rows": max(f["n"] for f in files),
        "files_per_key": round(holding, 2),
    }


def rewrite_drift_markdown(results: dict[str, Any]) -> str:
    figures = results["rewrite_drift"]
    tenths = figures["tenths"]
    rows = [
        f"# binlake benchmark {results['date']}: a long run of small batches",
        "",
        f"{figures['batches']} batches of {figures['keys_per_batch']} updated keys (new keys "
        f"every batch, at random) applied to two copies of a {figures['rows']:,}-row silver "
        "with the sink's settings, alternated batch by batch (bench/rewrite_drift.py). before: "
        "a MERGE's output one file per task (Delta's default); now: at most `SILVER_FILE_ROWS` "
        "rows per file.",
        "",
        "| tenth of the run | before s per batch | now s per batch "
        "| before rows rewritten per MERGE | now rows rewritten per MERGE |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, (b, w) in enumerate(zip(tenths["before"], tenths["now"], strict=True), start=1):
        rows.append(f"| {n} | {b['s']:.3f} | {w['s']:.3f} | {b['rows_copied']:,.0f} "
                    f"| {w['rows_copied']:,.0f} |")  # fmt: skip
    rows += ["", "| silver at the end | before | now |", "|---|---:|---:|"]
    layout = figures["layout"]
    for field, label in (
        ("files", "live files"),
        ("largest_file_rows", "rows in the largest file"),
        ("files_per_key", "files whose key range holds a key (mean)"),
    ):
        rows.append(f"| {label} | {layout['before'][field]:,} | {layout['now'][field]:,} |")
    return "\n".join(rows) + "\n"
