"""`binlake status`: the ledger's state per table and the stream's lag behind the source."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from pyspark.sql import SparkSession

from binlake.config import Config
from binlake.lake import table_exists
from binlake.ledger import ChunkState, Ledger
from binlake.offsets import bytes_behind
from binlake.snapshot import ledger_path, with_resolved_password
from binlake.source import connection, current_offset, query
from binlake.stream import checkpoint_offset, checkpoint_path


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


def stream_lag(config: Config) -> str:
    """Bytes of binlog the stream has not applied yet, and seconds since it last caught up."""
    offset = checkpoint_offset(config)
    if offset is None:
        return "stream: not started"
    with connection(with_resolved_password(config.source)) as conn:
        head = current_offset(conn)
        sizes = {str(r[0]): int(r[1]) for r in query(conn, "SHOW BINARY LOGS")}
    behind = bytes_behind(offset, head, sizes)
    commits = sorted(
        Path(checkpoint_path(config), "commits").glob("[0-9]*"), key=lambda p: int(p.name)
    )
    last = commits[-1].stat().st_mtime if commits else time.time()
    seconds = 0.0 if behind == 0 else time.time() - last
    return (
        f"stream {config.stream.job_name}: at {offset}, source head {head}, "
        f"lag {behind:,} binlog bytes, {seconds:.0f} s"
    )


def _silver_rows(spark: SparkSession, path: str) -> str:
    if not table_exists(spark, path):
        return "-"
    return f"{spark.read.format('delta').load(path).count():,}"


def render_status(spark: SparkSession, config: Config) -> str:
    chunks = Ledger(spark, ledger_path(config)).chunks()
    if not chunks:
        return "no snapshot yet: the ledger is empty (run `binlake snapshot`)\n" + stream_lag(
            config
        )
    lines = [f"{'table':<32} {'chunks':>13} {'bronze rows':>12} {'silver rows':>12}  snapshot"]
    for table, (done, total, rows) in table_progress(chunks).items():
        state = "finished" if done == total else "in progress"
        silver = _silver_rows(spark, config.lake.path("silver", *table.split(".", 1)))
        lines.append(f"{table:<32} {f'{done}/{total}':>13} {rows:>12,} {silver:>12}  {state}")
    lines.append(stream_lag(config))
    return "\n".join(lines)
