"""`history-reads.*` (`BENCH_ONLY=history_reads`): what a stream batch's planning spends reading
the schema histories of every joined table (`stream_source.StreamSpec.plan`, before every
batch, whatever tables the batch touches). No Spark, no database: `BENCH_TABLES` (200) tables'
histories are written to a local lake folder, then read through `ArrowFiles` as it is (a local
disk) and with a fixed delay added to every file call (`BENCH_HISTORY_DELAYS_MS`, 5 and 20 ms:
what a call costs on a `/Volumes` mount or an object store, which this machine has none of).

`before` reads them one after another, as planning did; `now` as `SchemaHistory.entries_of`
does (`schema_history.FILE_THREADS` at once); both must return the same entries. Rounds
alternate the two (`BENCH_HISTORY_ROUNDS`, 5); the medians are reported.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

from bench.common import env_int, say


def history_reads() -> dict[str, Any]:
    from binlake.lake.files import ArrowFiles
    from binlake.model.offsets import BinlogOffset
    from binlake.model.schema import Column, TableSchema
    from binlake.mysql.schema_history import FILE_THREADS, SchemaEntry, SchemaHistory

    class Delayed(ArrowFiles):
        """`ArrowFiles` with `delay` seconds added to each read and listing."""

        def __init__(self, delay: float) -> None:
            self.delay = delay

        def read_text(self, path: str) -> str | None:
            time.sleep(self.delay)
            return super().read_text(path)

        def names(self, folder: str) -> list[str]:
            time.sleep(self.delay)
            return super().names(folder)

    tables, rounds = env_int("BENCH_TABLES", 200), env_int("BENCH_HISTORY_ROUNDS", 5)
    delays = [0, *map(int, os.environ.get("BENCH_HISTORY_DELAYS_MS", "5,20").split(","))]
    root = tempfile.mkdtemp(prefix="binlake-history-")
    columns = tuple(Column(f"c{i}", "int", "int(11)", i > 0) for i in range(18))
    names = [f"bench.t{t:04d}" for t in range(tables)]
    written = SchemaHistory(root, ArrowFiles())
    for name in names:
        schema = TableSchema("bench", name.split(".")[1], columns, ("c0",), "c0")
        written.record(name, SchemaEntry(BinlogOffset("mysql-bin.000001", 4), schema))
    results: dict[str, Any] = {"tables": tables, "rounds": rounds, "threads": FILE_THREADS}
    for delay in delays:
        history = SchemaHistory(root, Delayed(delay / 1000))
        seconds: dict[str, list[float]] = {"before": [], "now": []}
        for index in range(rounds):
            for kind in ("before", "now") if index % 2 == 0 else ("now", "before"):
                started = time.perf_counter()
                if kind == "before":
                    read = {t: tuple(history.entries(t)) for t in names}
                else:
                    read = {t: tuple(found) for t, found in history.entries_of(names).items()}
                seconds[kind].append(time.perf_counter() - started)
                if read != {t: tuple(written.entries(t)) for t in names}:
                    raise RuntimeError(f"{kind} read other entries than were written")
        medians = {kind: round(statistics.median(s), 4) for kind, s in seconds.items()}
        results[f"{delay}ms"] = {**medians, "speedup": round(medians["before"] / medians["now"], 2)}
        say(f"history reads, {tables} tables, {delay} ms per call: {results[f'{delay}ms']}")
    return results


def history_reads_markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# binlake benchmark {r['date']}: a batch's schema-history reads",
        "",
        f"{r['tables']} tables' histories read as a batch's planning reads them, median of "
        f"{r['rounds']} alternated rounds; `now` reads {r['threads']} at once.",
        "",
        "| added per file call | before s | now s | before / now |",
        "|---:|---:|---:|---:|",
    ]
    for key, figures in r.items():
        if key.endswith("ms") and isinstance(figures, dict):
            lines.append(
                f"| {key[:-2]} ms | {figures['before']} | {figures['now']} | {figures['speedup']} |"
            )
    return "\n".join(lines) + "\n"
