"""`archive-reads.*` (`BENCH_ONLY=archive_reads`): a binlog archive's read (`source.binlog_archive`)
in row changes per second, same process, same files. No Spark.

Data: bench.`archive_customer` (customer-shaped) created and loaded with `BENCH_ARCHIVE_ROWS`
(100,000) rows, then a burst of `BENCH_ARCHIVE_BURST` (100,000) row changes (¼ inserts, ½
updates, ¼ deletes, multi-row statements), between two binlog rotations; the server's files of
that span copied to a temporary folder: an archive as a backup leaves it.

Measured, rounds alternating the two (`BENCH_ARCHIVE_ROUNDS`, 3), medians reported:

- `library_changes_s`, the baseline: python-mysql-replication's own decoding of every row of the
  table's rows events, each file read by `binlog_files.read_binlog_file` (the same framing and
  checksums), an update row counted once;
- `archive_changes_s`: binlake's whole read of the archive, `BinlogArchive.read` of the table
  (framing, checksums, table maps, each table's schema from its map, binlake's row decoder),
  the `RowChange`s it yields counted. Both must count the same changes.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Bench, env_int, say
from bench.data import DATABASE, connect, create_and_load, make_burst

TABLE = "archive_customer"


def archive_reads(bench: Bench) -> dict[str, Any]:
    rows, burst = env_int("BENCH_ARCHIVE_ROWS", 100_000), env_int("BENCH_ARCHIVE_BURST", 100_000)
    rounds = env_int("BENCH_ARCHIVE_ROUNDS", 3)
    folder = Path(tempfile.mkdtemp(prefix="binlake-archive-"))
    try:
        files = _archive(bench, folder, rows, burst)
        size = sum((folder / name).stat().st_size for name in files)
        say(f"archive of {len(files)} files, {size:,} bytes: {rows:,} rows, {burst:,} changes")
        seconds: dict[str, list[float]] = {"library": [], "archive": []}
        counted: dict[str, int] = {}
        for index in range(rounds):
            for kind in ("library", "archive") if index % 2 == 0 else ("archive", "library"):
                started = time.perf_counter()
                counted[kind] = _library(folder, files) if kind == "library" else _binlake(folder)
                seconds[kind].append(time.perf_counter() - started)
        if counted["library"] != counted["archive"]:
            raise RuntimeError(f"the reads counted different changes: {counted}")
        changes = counted["archive"]
        medians = {kind: statistics.median(s) for kind, s in seconds.items()}
        result: dict[str, Any] = {
            "files": len(files),
            "bytes": size,
            "changes": changes,
            "rounds": rounds,
            "samples_s": seconds,
            "library_changes_s": round(changes / medians["library"]),
            "archive_changes_s": round(changes / medians["archive"]),
        }
        result["archive_vs_library"] = round(medians["library"] / medians["archive"], 2)
        say(
            f"archive read: {result['archive_changes_s']:,} changes/s; the library's decoding "
            f"{result['library_changes_s']:,}/s ({result['archive_vs_library']}x)"
        )
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with connect(bench.password, bench.port) as conn, conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{TABLE}`")


def _archive(bench: Bench, folder: Path, rows: int, burst: int) -> list[str]:
    """The table created, loaded and changed between two rotations; its files copied."""
    with connect(bench.password, bench.port, database=None) as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOGS")
        first = cur.fetchall()[-1][0]
    create_and_load(bench.password, bench.port, rows, TABLE)
    make_burst(bench.password, bench.port, burst, table=TABLE)
    with connect(bench.password, bench.port, database=None) as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SELECT @@log_bin_basename")
        (base,) = cur.fetchone()
        cur.execute("SHOW BINARY LOGS")
        names = [row[0] for row in cur.fetchall()]
    files = names[names.index(first) : -1]
    for name in files:
        shutil.copy(Path(base).parent / name, folder / name)
    return files


def _library(folder: Path, files: list[str]) -> int:
    from pymysqlreplication.row_event import RowsEvent

    from binlake.mysql.binlog_files import read_binlog_file

    changes = 0
    for name in files:
        for event in read_binlog_file(folder / name):
            decoded = event.decoded
            if isinstance(decoded, RowsEvent) and decoded.table == TABLE:
                changes += len(decoded.rows)
    return changes


def _binlake(folder: Path) -> int:
    from binlake.model.capture import Capture
    from binlake.model.changes import RowChange
    from binlake.mysql.binlog_archive import BinlogArchive

    archive = BinlogArchive(folder)
    capture = Capture(DATABASE, (TABLE,))
    read = archive.read(capture, {}, archive.first(), archive.head())
    return sum(isinstance(change, RowChange) for change in read)


def archive_reads_markdown(results: dict[str, Any]) -> str:
    a = results["archive_reads"]
    return "\n".join(
        [
            f"# Archive reads — {results['date']}",
            "",
            f"An archive of {a['files']} binlog files ({a['bytes']:,} bytes) holding "
            f"{a['changes']:,} row changes of one customer-shaped table; median of "
            f"{a['rounds']} alternated rounds, same process, same files (bench/archive_reads.py).",
            "",
            "| read | changes/s |",
            "|---|---:|",
            f"| python-mysql-replication's row decoding (baseline) | {a['library_changes_s']:,} |",
            f"| binlake's archive read (`BinlogArchive.read`) | {a['archive_changes_s']:,} |",
            "",
            f"binlake's archive read against the baseline: {a['archive_vs_library']}x.",
            "",
        ]
    )
