"""`binlake status`: the ledger's state per table (and the stream's lag, once it runs)."""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import SparkSession

from binlake.config import Config
from binlake.ledger import ChunkState, Ledger
from binlake.snapshot import ledger_path


def table_progress(chunks: list[ChunkState]) -> dict[str, tuple[int, int, int]]:
    """Per table: (finished chunks, total chunks, rows in finished chunks)."""
    progress: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for chunk in chunks:
        entry = progress[chunk.table]
        entry[1] += 1
        if chunk.finished:
            entry[0] += 1
            entry[2] += chunk.rows or 0
    return {t: (v[0], v[1], v[2]) for t, v in sorted(progress.items())}


def render_status(spark: SparkSession, config: Config) -> str:
    chunks = Ledger(spark, ledger_path(config)).chunks()
    if not chunks:
        return "no snapshot yet: the ledger is empty (run `binlake snapshot`)"
    lines = [f"{'table':<32} {'chunks':>13} {'rows':>12}  state"]
    for table, (done, total, rows) in table_progress(chunks).items():
        state = "finished" if done == total else "in progress"
        lines.append(f"{table:<32} {f'{done}/{total}':>13} {rows:>12,}  {state}")
    return "\n".join(lines)
