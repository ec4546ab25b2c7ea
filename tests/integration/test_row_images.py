"""The binlog decoder lands every value exactly as the snapshot path lands it.

The oracle is the snapshot read of the same rows (MariaDB's own rendering through the driver and
the normalisers): inserted rows' after images must equal a snapshot taken after the inserts,
updates' before/after images the snapshots around them, deletes' before images the last one.
Types come from Flink CDC's `column_type_test.full_types` fixture plus the edge values that break
hand-written decoders (negative and wide decimals, negative fractional TIME, zero dates, empty
SET, BIT(64) with the top bit, two-byte VARCHAR lengths, latin1, 4-byte UTF-8, all NULLs).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from binlake.config.secrets import with_resolved_password
from binlake.model.capture import Capture
from binlake.model.changes import Op, Row
from binlake.model.offsets import BinlogOffset
from binlake.model.typemap import map_table
from binlake.mysql.binlog import read_changes
from binlake.mysql.connection import connection
from binlake.mysql.discovery import load_schema
from binlake.mysql.server import current_offset
from binlake.mysql.transactions import transactions
from binlake.snapshot.chunk_reader import ChunkReader
from binlake.snapshot.chunks import ChunkRange

# Flink CDC's own fixture (Apache-2.0, header kept), vendored so a clean clone has it.
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "flink-cdc"

EDGE_TABLE = """
CREATE TABLE edge_types (
  id INT NOT NULL PRIMARY KEY,
  d_neg DECIMAL(10, 4), d_int DECIMAL(18, 0), d_frac DECIMAL(20, 19), d_wide DECIMAL(38, 10),
  t6 TIME(6), t3 TIME(3), t0 TIME, dt0 DATETIME, dt6 DATETIME(6), ts3 TIMESTAMP(3) NULL,
  dz DATE, y YEAR,
  s_empty SET('x', 'y', 'z'), e ENUM('a', 'b', 'c'),
  b64 BIT(64), b5 BIT(5),
  v_long VARCHAR(400), v_latin VARCHAR(20) CHARACTER SET latin1, v_emoji VARCHAR(10),
  bin4 BINARY(4), vbin VARBINARY(10),
  mi MEDIUMINT, mu MEDIUMINT UNSIGNED, bu BIGINT UNSIGNED, f FLOAT, dbl DOUBLE,
  lt LONGTEXT, mb MEDIUMBLOB
) DEFAULT CHARSET=utf8mb4
"""
EDGE_ROWS = [
    (1, "-123.4567", "-999999999999999999", "0.1234567890123456789",
     "-1234567890123456789012345678.0123456789", "-838:59:59.999999", "-00:00:01.500", "00:00:00",
     "0000-00-00 00:00:00", "9999-12-31 23:59:59.999999", "2038-01-19 03:14:07.999",
     "0000-00-00", 0, "", "c", 0x8000000000000001, 0b10101,
     "é" * 399, "café", "😀 ok", b"\x01\x02", b"\x00\xff", -8388608, 16777215,
     18446744073709551615, -1.5, 2.0**-1074, "long text " * 100, b"\x00" * 70000),
    (2, "0.0001", "0", "-0.0000000000000000001", "0.0000000001", "12:34:56.000001",
     "838:59:59.000", "-01:02:03", "1000-01-01 00:00:00", "2020-02-29 12:00:00.000001",
     "1970-01-01 00:00:01.001", "2024-02-29", 2155, "x,z", "a", 0, 0, "", "", "", b"",
     b"", 8388607, 0, 0, 0.0, -0.0, "", b""),
    (3, *([None] * 28)),
]  # fmt: skip


def _fixture_statements() -> list[str]:
    """`full_types` as Flink CDC creates and fills it (MariaDB: JSON is LONGTEXT)."""
    lines = (FIXTURE / "column_type_test.sql").read_text().splitlines()
    text = "\n".join(line for line in lines if not line.startswith("--"))
    return [s.strip() for s in text.split(";") if "full_types" in s]


def _snapshot_rows(source: Any, table: Any, server_id: int) -> dict[Any, Row]:
    with ChunkReader(source, table, server_id) as reader:
        read = reader.read(0, ChunkRange(None, None))
    rows = zip(*(c.to_pylist() for c in read.columns), strict=True)
    return {table.key_of(r): r for r in rows}


def _landed(table: Any, image: Row) -> Row:
    """A binlog image as it lands in Arrow (the snapshot's rows are compared after Arrow too)."""
    return tuple(
        m.to_arrow([v], normalized=True).to_pylist()[0]
        for m, v in zip(map_table(table), image, strict=True)
    )


def _decoded(source: Any, table: Any, server_id: int, start: BinlogOffset) -> list[Any]:
    with connection(source) as conn:
        end = current_offset(conn)
    return list(read_changes(source, server_id, [table], start, end))


def _check_table(
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    name: str,
    insert: Callable[[], None],
    update: str,
) -> int:
    config = make_config(source={"tables": [name]})
    source = with_resolved_password(config.source)
    server_id = config.source.server_id_range[0]
    with connection(source) as conn:
        table = load_schema(conn, config.source.database, name, {})
        start = current_offset(conn)
    insert()
    inserted = _snapshot_rows(source, table, server_id)
    sql(update)
    updated = _snapshot_rows(source, table, server_id)
    sql(f"DELETE FROM `{name}`")
    sql(f"CREATE TABLE `{name}_after` (id INT)")  # a transaction after the deletes
    changes = _decoded(source, table, server_id, start)
    counted = transactions(source, server_id, start, Capture(table.database, None))
    # What bounds a batch by changes counts them from widths alone, over every type here.
    assert list(counted)[-1][2] == len(changes)
    by_op: dict[Op, list[Any]] = {op: [c for c in changes if c.table.endswith(name)] for op in Op}
    by_op = {op: [c for c in by_op[op] if c.op is op] for op in Op}
    assert len(by_op[Op.INSERT]) == len(inserted) > 0
    for change in by_op[Op.INSERT]:
        assert _landed(table, change.after) == inserted[table.key_of(change.after)]
    assert len(by_op[Op.UPDATE]) == len(updated)
    for change in by_op[Op.UPDATE]:
        assert _landed(table, change.before) == inserted[table.key_of(change.before)]
        assert _landed(table, change.after) == updated[table.key_of(change.after)]
    assert len(by_op[Op.DELETE]) == len(updated)
    for change in by_op[Op.DELETE]:
        assert _landed(table, change.before) == updated[table.key_of(change.before)]
    return len(changes)


def test_flink_full_types_decode_as_the_snapshot_reads_them(
    sql: Callable[..., Any], make_config: Callable[..., Any]
) -> None:
    create, insert = _fixture_statements()
    sql(create)
    changes = _check_table(
        sql,
        make_config,
        "full_types",
        lambda: sql(insert),
        "UPDATE full_types SET tiny_c = -128, big_un_c = 0, decimal_c = -0.0001, "
        "time_c = '-12:00:01', enum_c = 'white', set_c = '', bit_c = b'1', year_c = 1901, "
        "text_c = NULL, varchar_c = REPEAT('ü', 255), timestamp_c = '1999-12-31 23:59:59'",
    )
    assert changes == 3


def test_edge_values_decode_as_the_snapshot_reads_them(
    sql: Callable[..., Any], make_config: Callable[..., Any]
) -> None:
    sql(EDGE_TABLE)
    placeholders = ", ".join(["%s"] * len(EDGE_ROWS[0]))

    def insert() -> None:
        for row in EDGE_ROWS:
            # Zero dates need a permissive sql_mode (MariaDB's per-statement SET STATEMENT).
            sql(
                f"SET STATEMENT sql_mode = '' FOR INSERT INTO edge_types VALUES ({placeholders})",
                row,
            )

    changes = _check_table(
        sql,
        make_config,
        "edge_types",
        insert,
        "UPDATE edge_types SET d_neg = -d_neg, t6 = '-00:00:00.000001', s_empty = 'y', "
        "b64 = b64 ^ 1, v_long = CONCAT(v_long, 'z'), e = NULL, mu = 1, bu = 1",
    )
    assert changes == 9


def test_connections_share_one_tls_context(make_config: Callable[..., Any]) -> None:
    """Every PyMySQL connection used to build its own TLS context (~33 ms, most of a short
    chunk replay); binlake's connections, the binlog reader's included, share one."""
    from binlake.mysql.connection import Connection
    from binlake.mysql.replication import open_stream

    source = with_resolved_password(make_config().source)
    with connection(source) as first, connection(source) as second:
        assert first.ctx is second.ctx is Connection._preferred_tls is not None
        start = current_offset(first)
    stream = open_stream(source, source.server_id_range[0], start)
    try:
        assert stream.pymysql_wrapper is Connection
    finally:
        stream.close()
