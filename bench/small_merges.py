"""`small_merges.*` (`BENCH_ONLY=small_merges`): a stream's small batch of one table (one or two
changed keys, new keys every batch) applied to silver with the session's settings (`before`:
compiled, Spark's default; `BENCH_SMALL_MERGE_BEFORE=interpreted` for interpreted queries alone)
against the settings the sink gives a batch into small silver tables (`now`: interpreted
queries and MERGEs that rewrite the files they touch, `sink.settings_for`), alternated in one
process on the same silver. Run at several `BENCH_ROWS`, it shows where those settings stop
paying: the silver's size in bytes and the sink's own choice for it (`sink.small_silvers`) are
reported beside the times.

`bench.customer` (`BENCH_ROWS`) is snapshotted and its silver created once (the stream's real
layout: key-ordered files of 50k rows, deletion vectors, CDF). Each batch is binlake's own apply
(`silver.TableApply`: summary, MERGE, changelog append) of update records as the stream's source
emits them, each newer than anything silver holds; the updated keys are spread over the table,
none updated twice, so every batch names new key values as the stream's do. A warm-up of each
kind, then `BENCH_SMALL_MERGE_ROUNDS` rounds of `BENCH_SMALL_MERGE_BATCHES` batches of both kinds,
the order reversed every round, so the JVM's warm-up and the machine's drift hit both alike.
Per kind: the median seconds per batch and classes Spark compiled per batch (its
`CodegenMetrics`); `speedup` is before / now. Both run with the stream's other settings
(`DETERMINISTIC_MERGE_SOURCES`, `KEY_SETS_BY_REFERENCE`).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from bench.run import Bench, alternated, create_silver, current_offset, env_int, medians, say


def small_merges(bench: Bench, spark: Any, monitor: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from bench.data import create_and_load
    from binlake.change_record import CHANGE_SCHEMA, ImageEncoder
    from binlake.offsets import BinlogOffset, position_token
    from binlake.silver import ChangelogEnds, TableApply, data_columns, silver_table
    from binlake.sink import small_silvers
    from binlake.source import connection
    from binlake.spark import (
        COPY_ON_WRITE_MERGES,
        DETERMINISTIC_MERGE_SOURCES,
        INTERPRETED_QUERIES,
        KEY_SETS_BY_REFERENCE,
        session_settings,
    )
    from binlake.validation import validate

    create_and_load(bench.password or "", bench.port, bench.rows)
    bench.binlake_snapshot(spark, 2, "small-merges", keep=True)
    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    create_silver(spark, config, monitor, "small_merges_init")
    with connection(config.source) as conn:
        (table,) = validate(conn, config)
    silver = silver_table(config, table)
    columns = data_columns(spark, silver, config, table.qualified)
    assert columns is not None
    rounds = max(env_int("BENCH_SMALL_MERGE_ROUNDS", 4), 1)
    per_round = max(env_int("BENCH_SMALL_MERGE_BATCHES", 6), 2)
    plan = alternated(rounds, ("before", "now"))
    batches = len(plan) * per_round
    keys_of = [1 + index % 2 for index in range(batches)]  # one changed key, then two
    stride = max(bench.rows // (sum(keys_of) + 1), 1)
    keys = [stride * (n + 1) for n in range(sum(keys_of))]
    key = table.key[0]
    rows = {r[key]: r for r in silver.read(spark).where(F.col(key).isin(keys)).collect()}
    names = list(table.column_names)
    encode = ImageEncoder(table)
    start = current_offset(bench)
    ends = ChangelogEnds()
    compiler = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics

    def compiled() -> int:
        return int(compiler.METRIC_COMPILATION_TIME().getCount())

    def batch(index: int, changed: list[int]) -> dict[str, float]:
        records = []
        for n, k in enumerate(changed):
            old = tuple(rows[k][c] for c in names)
            new = tuple(f"#{index}" if c == "c_login" else rows[k][c] for c in names)
            at = BinlogOffset(start.file, start.pos + 1 + 100 * index + n)  # past the snapshot
            records.append(
                (table.qualified, "update", position_token(at, 0), at.file, at.pos, 0,
                 int(time.time()), encode(old), encode(new))
            )  # fmt: skip
        frame = spark.createDataFrame(records, CHANGE_SCHEMA)
        before = compiled()
        started = time.monotonic()
        TableApply(config, table, columns, ends=ends)(frame)
        return {"s": time.monotonic() - started, "compiled": compiled() - before}

    runs: dict[str, list[dict[str, float]]] = {"before": [], "now": []}
    taken = 0
    silver_bytes = silver.size_in_bytes(spark)
    lookups = []  # what the sink's choice costs a batch: Delta's size of the silver
    for _ in range(5):
        started = time.monotonic()
        sink_interprets = small_silvers(spark, config, {table.qualified: table}, [table.qualified])
        lookups.append(time.monotonic() - started)
    before = os.environ.get("BENCH_SMALL_MERGE_BEFORE", "compiled")
    kinds = {
        "before": INTERPRETED_QUERIES if before == "interpreted" else {},
        "now": {**INTERPRETED_QUERIES, **COPY_ON_WRITE_MERGES},
    }
    stream_settings = {**DETERMINISTIC_MERGE_SOURCES, **KEY_SETS_BY_REFERENCE}
    with session_settings(spark, stream_settings):
        for index, kind in enumerate(plan):
            with session_settings(spark, kinds[kind]):
                done = []
                for b in range(per_round):
                    number = index * per_round + b
                    changed = keys[taken : taken + keys_of[number]]
                    taken += len(changed)
                    done.append(batch(number, changed))
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
        "before_settings": kinds["before"],
        "now_settings": kinds["now"],
        "silver_bytes": silver_bytes,
        "sink_interprets": sink_interprets,
        "sink_choice_s": round(statistics.median(lookups), 3),
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


def small_merges_markdown(results: dict[str, Any]) -> str:
    figures = results["small_merges"]
    rows = [
        f"# binlake benchmark {results['date']}: small MERGEs of new keys",
        "",
        f"Batches of one and two updated keys (new keys every batch) applied to a "
        f"{figures['rows']:,}-row silver ({figures['silver_bytes']:,} bytes; the sink "
        f"interprets its batches: {figures['sink_interprets']}, a choice that took "
        f"{figures['sink_choice_s']} s) by `silver.TableApply`; median "
        f"of {figures['rounds']} alternated rounds of {figures['batches_per_round']} batches "
        "per kind, after a warm-up of each (bench/small_merges.py).",
        "",
        "| queries | s per batch | classes compiled per batch |",
        "|---|---:|---:|",
    ]
    before = "interpreted" if figures["before_settings"] else "compiled"
    labels = {
        "before": f"{before} (before)",
        "now": "interpreted, MERGEs rewriting files (now: the sink's small-silver settings)",
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
