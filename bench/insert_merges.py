"""`insert_merges.*` (`BENCH_ONLY=insert_merges`): a stream's batches of inserts alone (an
append-mostly table: orders, events, logs) applied to silver by binlake's own apply
(`silver.merge.TableApply`: summary, MERGE, changelog append), with the MERGE's matched clauses
(`before`: the clauses every batch had, which such a batch can never fire) against the
insert-only MERGE the apply now chooses for it (`now`), alternated in one process on the same
silver.

`bench.customer` (`BENCH_ROWS`) is snapshotted and its silver created once (the stream's real
layout). Batches insert `BENCH_INSERT_MERGE_KEYS` new keys in turn ("1,1000": one, then 1,000),
each newer than anything silver holds, as the stream's source emits them: first past every key
silver holds (an auto-increment key), then into gaps spread over its keys (random keys: the
MERGE's key range overlaps silver's files; the gaps are made first by one batch deleting them).
A warm-up of each kind, then `BENCH_SMALL_MERGE_ROUNDS` rounds of
`BENCH_SMALL_MERGE_BATCHES` batches of both kinds, the order reversed every round. Both run with
the sink's settings for each batch (`batch_settings.settings_for`), a batch of at most
`batch_summary.SMALL_BATCH_RECORDS` summarised from its records as the sink does. Per kind and batch
size: the median seconds per batch; `speedup` is before / now. Afterwards silver must hold every
inserted key once.
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench.common import alternated, current_offset, customer_silver, env_int, medians, say


def insert_merges(bench: Any, spark: Any, monitor: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from binlake.runtime.spark import (
        DETERMINISTIC_MERGE_SOURCES,
        KEY_SETS_BY_REFERENCE,
        session_settings,
    )
    from binlake.silver.merge import ChangelogEnds, TableApply, data_columns, silver_table
    from binlake.stream.batch_settings import SilverSizes, settings_for
    from binlake.stream.batch_summary import SMALL_BATCH_RECORDS

    class MatchedClauses(TableApply):
        """binlake's apply with the MERGE every batch had before: its matched clauses kept."""

        def merge_from(self, silver, collapsed, summary, names, s):  # type: ignore[no-untyped-def]
            super().merge_from(silver, collapsed, {**summary, "inserts_only": False}, names, s)

    config, table = customer_silver(bench, spark, monitor, "insert-merges")
    silver = silver_table(config, table)
    columns = data_columns(spark, silver, config, table.qualified)
    assert columns is not None
    key = table.key[0]
    template = silver.read(spark).where(F.col(key) == 1).first()
    assert template is not None
    cycle = [int(k) for k in os.environ.get("BENCH_INSERT_MERGE_KEYS", "1,1000").split(",")]
    rounds = max(env_int("BENCH_SMALL_MERGE_ROUNDS", 4), 1)
    per_round = max(env_int("BENCH_SMALL_MERGE_BATCHES", 2 * len(cycle)), 2)
    plan = alternated(rounds, ("before", "now"))
    shape = [(cycle[n % len(cycle)], PLACES[n // len(cycle) % 2]) for n in range(per_round)]
    start = current_offset(bench)
    ends, sizes = ChangelogEnds(), SilverSizes()
    tables = {table.qualified: table}
    # The spread keys, deleted first by one batch of binlake's apply, come back in order.
    spread = sum(n for n, place in shape if place == "spread") * len(plan)
    stride = max(bench.rows // (spread + 1), 1)
    gaps = [stride * (n + 1) for n in range(spread)]
    TableApply(config, table, columns, ends=ends)(delete_records(spark, table, silver, gaps, start))
    keys = {"end": iter(range(bench.rows + 1, 2**31)), "spread": iter(gaps)}
    applies = {"before": MatchedClauses, "now": TableApply}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {"before": {}, "now": {}}
    inserted = 0
    with session_settings(spark, {**DETERMINISTIC_MERGE_SOURCES, **KEY_SETS_BY_REFERENCE}):
        for index, kind in enumerate(plan):
            done = []
            for b, (size, place) in enumerate(shape):
                batch = [next(keys[place]) for _ in range(size)]
                frame = insert_records(spark, table, template, batch, index * per_round + b, start)
                # As the sink applies a small batch: summarised from its collected records.
                records = frame.collect() if size <= SMALL_BATCH_RECORDS else None
                apply = applies[kind](config, table, columns, ends=ends, records=records)
                started = time.monotonic()
                with settings_for(spark, config, tables, {table.qualified: size}, sizes):
                    inserted += apply(frame)
                done.append((f"{size} {place}", time.monotonic() - started))
            warm_up = index < 2
            say(f"insert merges: {kind:6s} " + ", ".join(
                f"{n}: {s:.2f} s" for n, s in done
            ) + (" (warm-up)" if warm_up else ""))  # fmt: skip
            if not warm_up:
                for n, s in done:
                    runs[kind].setdefault(n, []).append({"s": s})
    rows = silver.read(spark)
    held, distinct = rows.count(), rows.select(key).distinct().count()
    by_shape = {
        n: {kind: medians({kind: runs[kind][n]}, 3)[kind]["s"] for kind in runs}
        for n in runs["now"]
    }
    return {
        "rows": bench.rows,
        "rounds": rounds,
        "batches_per_round": per_round,
        "seconds_per_batch": by_shape,
        "speedup": {n: round(m["before"] / m["now"], 3) for n, m in by_shape.items()},
        "samples": runs,
        "keys_inserted": inserted,
        "silver_holds_each_key_once": held == distinct == bench.rows + inserted - spread,
    }


#: Where a batch's new keys fall: past every key silver holds (an auto-increment key), or
#: between them, into gaps left by deleted rows spread over the table (random keys: the MERGE's
#: key range then overlaps silver's files).
PLACES = ("end", "spread")


def delete_records(spark: Any, table: Any, silver: Any, keys: list[int], start: Any) -> Any:
    """A delete of each of silver's rows of `keys`, as the stream's source emits them, at
    `start` (the binlog head after the snapshot): newer than anything silver holds, older than
    every insert `insert_records` makes."""
    from pyspark.sql import functions as F

    from binlake.model.offsets import position_token
    from binlake.silver.change_record import CHANGE_SCHEMA, ImageEncoder

    names, encode = list(table.column_names), ImageEncoder(table)
    rows = silver.read(spark).where(F.col(table.key[0]).isin(keys)).collect()
    records = [
        (table.qualified, "delete", position_token(start, n), start.file, start.pos, n,
         int(time.time()), encode(tuple(row[c] for c in names)), None)
        for n, row in enumerate(rows)
    ]  # fmt: skip
    return spark.createDataFrame(records, CHANGE_SCHEMA)


def insert_records(
    spark: Any, table: Any, template: Any, keys: list[int], index: int, start: Any
) -> Any:
    """Batch `index`'s change records, as the stream's source emits them: an insert of each of
    `keys`, the `template` row's other values, each at its own offset past `start`."""
    from binlake.model.offsets import BinlogOffset, position_token
    from binlake.silver.change_record import CHANGE_SCHEMA, ImageEncoder

    names, encode, key = list(table.column_names), ImageEncoder(table), table.key[0]
    records = []
    for n, k in enumerate(keys):
        image = tuple(k if c == key else template[c] for c in names)
        at = BinlogOffset(start.file, start.pos + 1 + 100_000 * index + n)
        records.append(
            (table.qualified, "insert", position_token(at, 0), at.file, at.pos, 0,
             int(time.time()), None, encode(image))
        )  # fmt: skip
    return spark.createDataFrame(records, CHANGE_SCHEMA)


def insert_merges_markdown(results: dict[str, Any]) -> str:
    figures = results["insert_merges"]
    rows = [
        f"# binlake benchmark {results['date']}: batches of inserts alone",
        "",
        f"Batches of new keys inserted into a {figures['rows']:,}-row silver by "
        "`silver.merge.TableApply` with the sink's settings, past its keys (`end`) or into gaps "
        "spread over them (`spread`); median of "
        f"{figures['rounds']} alternated rounds of {figures['batches_per_round']} batches per "
        "kind, after a warm-up of each (bench/insert_merges.py).",
        "",
        "| inserts per batch, where | with matched clauses (before), s "
        "| insert-only MERGE (now), s | before / now |",
        "|---|---:|---:|---:|",
    ]
    for shape, m in figures["seconds_per_batch"].items():
        size, place = shape.split()
        rows.append(f"| {int(size):,}, {place} | {m['before']:.3f} | {m['now']:.3f} | "
                    f"{figures['speedup'][shape]}× |")  # fmt: skip
    rows += [
        "",
        f"Silver holds each key once, the {figures['keys_inserted']:,} inserted included: "
        f"{figures['silver_holds_each_key_once']}",
    ]
    return "\n".join(rows) + "\n"
