"""`stream.decode`: binlog row images decoded per second, same process, same bytes:
python-mysql-replication's own row decoding against binlake's `read_changes`, over the burst's
binlog range and over single-row transactions (`single_row`)."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench.common import SERVER_IDS, Bench, current_offset, cursor, env_int, say


def decode_speed(bench: Bench, offsets) -> dict[str, Any]:
    """Row images/s, same process, same bytes: python-mysql-replication's own row decoding (the
    baseline, parsing every table map as the library does) against binlake's `read_changes`,
    over the burst's binlog range (multi-row statements) and, in `single_row`, over
    `BENCH_SINGLE_ROW` (20,000) single-row autocommit updates made now, the shape of most OLTP
    traffic: every transaction repeats its table map. There binlake is also timed parsing every
    table map anew as the library does (`binlake_parse_each_images_s`): its read before
    `table_maps.table_map_once`."""
    from binlake.config.secrets import with_resolved_password
    from binlake.mysql.connection import connection
    from binlake.mysql.prerequisites import validate

    assert bench.kept_root is not None
    config = bench.config(bench.kept_root, 2)
    source = with_resolved_password(config.source)
    with connection(source) as conn:
        tables = validate(conn, config)
    read = Readers(source, tables, SERVER_IDS[0] + 50)
    result = measure(*offsets, (("library", read.library), ("binlake", read.binlake)), "")
    before = current_offset(bench)
    single_row_updates(bench)
    after = current_offset(bench)
    runs = (
        ("library", read.library),
        ("binlake_parse_each", read.binlake_parse_each),
        ("binlake", read.binlake),
    )
    single = measure(before, after, runs, " (single-row transactions)")
    single["vs_parse_each"] = round(
        single["binlake_images_s"] / single["binlake_parse_each_images_s"], 2
    )
    result["single_row"] = single
    return result


@contextlib.contextmanager
def parsing_each_table_map() -> Iterator[None]:
    """The library's own TABLE_MAP parse for the block (binlake parses each map once)."""
    from pymysqlreplication.row_event import TableMapEvent

    from binlake.mysql import table_maps

    TableMapEvent.__init__ = table_maps.parse_table_map
    try:
        yield
    finally:
        TableMapEvent.__init__ = table_maps.table_map_once


class Readers:
    """The row images of (start, end] of `tables`, each way the figure compares, counted."""

    def __init__(self, source: Any, tables: Any, server_id: int) -> None:
        self.source, self.tables, self.server_id = source, tables, server_id

    def library(self, start: Any, end: Any) -> int:
        with parsing_each_table_map():
            return self.library_images(start, end)

    def library_images(self, start: Any, end: Any) -> int:
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        from binlake.model.offsets import BinlogOffset
        from binlake.mysql.replication import open_stream

        stream = open_stream(
            self.source, self.server_id, start,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
            only_schemas=["bench"], only_tables=["customer"],
        )  # fmt: skip
        images = 0
        try:
            for event in stream:
                if BinlogOffset(stream.log_file, stream.log_pos) > end:
                    break
                images += sum(2 if "after_values" in row else 1 for row in event.rows)
        finally:
            stream.close()
        return images

    def binlake(self, start: Any, end: Any) -> int:
        from binlake.mysql.binlog import read_changes

        changes = read_changes(self.source, self.server_id, self.tables, start, end)
        return sum(2 if c.before is not None and c.after is not None else 1 for c in changes)

    def binlake_parse_each(self, start: Any, end: Any) -> int:
        with parsing_each_table_map():
            return self.binlake(start, end)


def measure(
    start: Any, end: Any, runs: tuple[tuple[str, Callable[[Any, Any], int]], ...], label: str
) -> dict[str, Any]:
    """Each of `runs` over (start, end]: its images/s; `speedup` is binlake's over the
    library's."""
    result: dict[str, Any] = {}
    for name, run in runs:
        started = time.monotonic()
        images = run(start, end)
        seconds = time.monotonic() - started
        result[f"{name}_images_s"] = round(images / seconds, 1)
        result["images"] = images
        say(f"decode{label}: {name:8s} {images:,} row images in {seconds:.1f} s = "
            f"{images / seconds:,.0f}/s")  # fmt: skip
    result["speedup"] = round(result["binlake_images_s"] / result["library_images_s"], 2)
    return result


def single_row_updates(bench: Bench) -> None:
    """`BENCH_SINGLE_ROW` (20,000) single-row autocommit updates of random customers."""
    with cursor(bench) as cur:
        cur.execute("SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM customer")
        low, high = cur.fetchone()
        rng = random.Random(5)
        for _ in range(env_int("BENCH_SINGLE_ROW", 20_000)):
            key = rng.randint(low, high)
            update = (
                "UPDATE customer SET c_birth_day = c_birth_day %% 28 + 1 WHERE c_customer_sk = %s"
            )
            cur.execute(update, (key,))
