"""Python-side profiles of binlake's two hot paths, run in-process on the benchmark's data:
the snapshot chunk reader (`read_chunk` + Arrow building) and the stream reader's `read`
(binlog decode + high-watermark filter), both by `profiles`. pyinstrument gives wall-clock
self/inclusive time per function; cProfile gives exact call counts (its overhead inflates small
functions, so read its times as relative)."""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pyinstrument import Profiler

from bench.common import SERVER_IDS, Bench, cursor, env_int, say


def _aggregate(root: Any) -> tuple[dict[str, float], dict[str, float]]:
    own: dict[str, float] = defaultdict(float)
    inclusive: dict[str, float] = defaultdict(float)

    def name(frame: Any) -> str:
        return f"{frame.function}  ({frame.file_path_short}:{frame.line_no})"

    def walk(frame: Any, stack: frozenset[str]) -> None:
        real = [c for c in frame.children if not c.is_synthetic]
        key = name(frame)
        own[key] += frame.time - sum(c.time for c in real)
        if key not in stack:
            inclusive[key] += frame.time
        for child in real:
            walk(child, stack | {key})

    if root is not None:
        walk(root, frozenset())
    return own, inclusive


def profile(
    label: str, work: Callable[[], int], unit: str, top: int = 10
) -> tuple[str, dict[str, Any]]:
    """Run `work` (returns items processed) under pyinstrument, then again under cProfile."""
    profiler = Profiler(interval=0.001)
    started = time.perf_counter()
    profiler.start()
    items = work()
    profiler.stop()
    wall = time.perf_counter() - started
    session = profiler.last_session
    own, inclusive = _aggregate(session.root_frame())
    lines = [
        f"=== {label}: {items} {unit} in {wall:.2f} s under pyinstrument "
        f"({items / wall:,.0f} {unit}/s) ===",
        "",
        f"Top {top} by self time (pyinstrument, wall clock):",
    ]
    total = session.duration or wall
    top_self = sorted(own.items(), key=lambda kv: -kv[1])[:top]
    for i, (fn, t) in enumerate(top_self, 1):
        lines.append(f"{i:3d}. {t:7.2f} s {100 * t / total:5.1f}%  {fn}")
    lines += ["", f"Top {top} by inclusive time (pyinstrument; outermost call of each function):"]
    for i, (fn, t) in enumerate(sorted(inclusive.items(), key=lambda kv: -kv[1])[1 : top + 1], 1):
        lines.append(f"{i:3d}. {t:7.2f} s {100 * t / total:5.1f}%  {fn}")

    prof = cProfile.Profile()
    prof.enable()
    again = work()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    calls = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
    lines += [
        "",
        f"Top {top} by own time under cProfile ({calls:,} Python calls in total, "
        f"{calls / max(again, 1):,.0f} per {unit.rstrip('s')}):",
    ]
    stats.sort_stats("tottime").print_stats(top)
    lines += [ln for ln in out.getvalue().splitlines() if ln.strip()][-(top + 1) :]
    lines += ["", "Call tree (pyinstrument, frames ≥ 2% shown):", session_text(profiler)]
    summary = {
        "items": items,
        "seconds": round(wall, 3),
        "items_per_s": round(items / wall, 1),
        "python_calls_per_item": round(calls / max(again, 1), 1),
        "top_self": [{"function": fn, "seconds": round(t, 3)} for fn, t in top_self],
    }
    return "\n".join(lines), summary


def session_text(profiler: Profiler) -> str:
    from pyinstrument.renderers import ConsoleRenderer

    renderer = ConsoleRenderer(
        unicode=True,
        color=False,
        show_all=False,
        short_mode=True,
        processor_options={"filter_threshold": 0.02},
    )
    return profiler.output(renderer)


def snapshot_work(source: Any, table: Any, low: int, chunk_size: int, chunks: int, server_id: int):
    """Read `chunks` consecutive chunks through the snapshot task's own `mapInArrow` function
    (`binlake.snapshot.batch_reads.ChunkBatchReader`: read_chunk + Arrow batches), outside
    Spark. Returns the rows read (each chunk's report row left out)."""
    import pyarrow as pa

    from binlake.snapshot.batch_reads import REPORT, ChunkBatchReader
    from binlake.snapshot.chunks import encode_key

    def work() -> int:
        descriptors = [
            (i, encode_key(low + i * chunk_size), encode_key(low + (i + 1) * chunk_size))
            for i in range(chunks)
        ]
        reader = ChunkBatchReader(source, table, server_id, descriptors, 0, None)  # bounded
        indexes = pa.RecordBatch.from_pydict({"id": pa.array(range(chunks), pa.int64())})
        rows = 0
        for batch in reader(iter([indexes])):
            rows += batch.column(REPORT).null_count  # a data row has no report
        return rows

    return work


def stream_work(spec: Any, start: Any, end: Any, limit: int):
    """Consume the stream reader's `read` over (start, end] until `limit` changes came out."""
    from binlake.stream.binlog_source import BinlogStreamReader

    def work() -> int:
        reader = BinlogStreamReader(spec)
        batches = reader.read(spec.plan(start, end))
        rows = 0
        try:
            for batch in batches:
                rows += batch.num_rows
                if rows >= limit:
                    break
            return rows
        finally:
            batches.close()  # type: ignore[attr-defined]  # closes the binlog connection now

    return work


def profiles(bench: Bench, spark, offsets) -> tuple[str, dict[str, Any]]:
    """The profile text of both hot paths, and their summaries (`snapshot`, `stream`)."""
    from binlake.config.secrets import with_resolved_password
    from binlake.lake.paths import ledger_path
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate
    from binlake.snapshot.ledger import Ledger
    from binlake.stream.task import chunk_marks, stream_spec

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        tables = validate(conn, config)
    table = tables[0]
    with cursor(bench) as cur:
        cur.execute("SELECT MIN(c_customer_sk) FROM customer")
        (low,) = cur.fetchone()
    chunks = env_int("BENCH_PROFILE_CHUNKS", 8)
    say(f"profile: binlake chunk reader, {chunks} chunks of {bench.chunk_size} rows, in-process")
    text1, sum1 = profile(
        "snapshot: binlake.snapshot.batch_reads.ChunkBatchReader (chunk reads + Arrow batches, "
        "as a task runs it)",
        snapshot_work(source, table, low, bench.chunk_size, chunks, SERVER_IDS[0] + 50),
        "rows",
    )
    marks = chunk_marks(tables, Ledger(spark, ledger_path(config)).chunks(), {})
    start, end = offsets
    spec = stream_spec(config, source, start, marks, name="bench_profile")
    limit = env_int("BENCH_PROFILE_CHANGES", 60_000)
    say(f"profile: stream reader's read over the burst's binlog, first {limit:,} changes")
    text2, sum2 = profile(
        "stream catch-up: binlake.stream.binlog_source.BinlogStreamReader.read"
        " (decode + HW filter)",
        stream_work(spec, start, end, limit),
        "changes",
    )
    return text1 + "\n\n" + text2 + "\n", {"snapshot": sum1, "stream": sum2}
