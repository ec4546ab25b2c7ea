"""`binlake status`: the ledger's state per table and the stream's lag behind the source.

It answers in about a second because it starts no JVM: the ledger and path silver tables are
read with delta-rs (`deltalake`, which honours deletion vectors), the stream's checkpoint with
`pyarrow.fs` (`ArrowFiles`). Only silver tables of a catalog (`lake.catalog`) need the Spark
session, which is created on first use (on Databricks it is the notebook's or job's own).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import SparkSession

from binlake.config import Config
from binlake.lake import PathTable, lake_table
from binlake.lake_files import ArrowFiles, LakeFiles, join
from binlake.layout import checkpoint_path, ledger_path
from binlake.ledger import ChunkState, chunk_state
from binlake.offsets import bytes_behind
from binlake.retention import duration, expiry_seconds
from binlake.snapshot import batch_ids, with_resolved_password
from binlake.source import binlog_sizes, connection, current_offset
from binlake.stream import checkpoint_offset


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


def stream_lag(files: LakeFiles, config: Config) -> str:
    """Bytes of binlog the stream has not applied yet, and seconds since it last caught up."""
    offset = checkpoint_offset(files, config)
    if offset is None:
        return "stream: not started"
    with connection(with_resolved_password(config.source)) as conn:
        head = current_offset(conn)
        sizes = binlog_sizes(conn)
        expiry = expiry_seconds(conn)
    behind = bytes_behind(offset, head, sizes)
    commits = join(checkpoint_path(config), "commits")
    newest = max(batch_ids(files, commits), default=None)
    last = files.modified(join(commits, str(newest))) if newest is not None else None
    seconds = 0.0 if behind == 0 or last is None else time.time() - last
    kept = "never purges them" if expiry is None else f"purges them after {duration(expiry)}"
    return (
        f"stream {config.stream.job_name}: at {offset}, source head {head}, "
        f"lag {behind:,} binlog bytes, {seconds:.0f} s (the source {kept})"
    )


def ledger_chunks(path: str) -> list[ChunkState]:
    """Every chunk the ledger at `path` records (none before the first snapshot)."""
    try:
        rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    except TableNotFoundError:
        return []
    return [chunk_state(row) for row in rows]


def _silver_rows(config: Config, table: str, spark: Callable[[], SparkSession]) -> str:
    database, name = table.split(".", 1)
    silver = lake_table(config.lake, "silver", database, name)
    if isinstance(silver, PathTable):
        try:
            delta = DeltaTable(silver.path)
        except TableNotFoundError:
            return "-"
        # An exact count: `DeltaTable.count()` sums file statistics, blind to deletion vectors.
        counted = QueryBuilder().register("silver", delta).execute("SELECT count(*) FROM silver")
        return f"{pa.table(counted.read_all()).column(0)[0].as_py():,}"
    session = spark()
    return f"{silver.read(session).count():,}" if silver.exists(session) else "-"


def render_status(config: Config, spark: Callable[[], SparkSession]) -> str:
    """The status table; `spark` gives the session, asked for only by catalog silver tables."""
    files = ArrowFiles()
    chunks = ledger_chunks(ledger_path(config))
    if not chunks:
        return "no snapshot yet: the ledger is empty (run `binlake snapshot`)\n" + stream_lag(
            files, config
        )
    lines = [f"{'table':<32} {'chunks':>13} {'bronze rows':>12} {'silver rows':>12}  snapshot"]
    for table, (done, total, rows) in table_progress(chunks).items():
        state = "finished" if done == total else "in progress"
        silver = _silver_rows(config, table, spark)
        lines.append(f"{table:<32} {f'{done}/{total}':>13} {rows:>12,} {silver:>12}  {state}")
    lines.append(stream_lag(files, config))
    return "\n".join(lines)
