"""A binlog read reaches its stop offset or fails, and never drops an event it cannot decode."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from binlake.errors import SourceError
from binlake.model.changes import Op
from binlake.model.offsets import BinlogOffset
from binlake.mysql import binlog, table_maps
from binlake.mysql.binlog import read_changes
from binlake.mysql.connection import connection
from binlake.mysql.discovery import load_schema
from binlake.mysql.server import current_offset

from .replay import connect

pytestmark = pytest.mark.integration


def _schema_and_head(source: Any, database: str, table: str) -> tuple[Any, BinlogOffset]:
    with connection(source) as conn:
        return load_schema(conn, database, table, {}), current_offset(conn)


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(binlog, "READ_DEADLINE_S", 2.0)
    return 2.0


@dataclass
class Captured:
    """Table `t` of the test's database, and a binlog reader of it."""

    source: Any
    server_id: int
    table: Any

    def head(self) -> BinlogOffset:
        with connection(self.source) as conn:
            return current_offset(conn)

    def read(self, start: BinlogOffset, stop: BinlogOffset) -> list[tuple[Op, Any]]:
        changes = read_changes(self.source, self.server_id, [self.table], start, stop)
        return [(c.op, c.after) for c in changes]


@pytest.fixture
def captured(
    sql: Callable[..., Any], make_config: Callable[..., Any], db_env: dict[str, str], database: str
) -> Captured:
    sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    config = make_config()
    password = SecretStr(db_env["BINLAKE_SOURCE_PASSWORD"])
    source = config.source.model_copy(update={"password": password})
    table, _ = _schema_and_head(source, database, "t")
    return Captured(source, config.source.server_id_range[0], table)


def test_read_stops_at_its_stop_offset(captured: Captured, sql: Callable[..., Any]) -> None:
    start = captured.head()
    sql("INSERT INTO t VALUES (1, 1)")
    sql("INSERT INTO t VALUES (2, 2)")
    stop = captured.head()
    sql("DELETE FROM t WHERE id = 2")  # after stop: not read
    assert captured.read(start, stop) == [(Op.INSERT, (1, 1)), (Op.INSERT, (2, 2))]


def test_read_waits_until_the_binlog_passes_its_stop_offset(
    short_deadline: float, captured: Captured, sql: Callable[..., Any]
) -> None:
    """The binlog served ends before the stop offset (a server serves only what it has synced):
    the read keeps reading until the binlog passes it, instead of returning early."""
    start = captured.head()
    sql("INSERT INTO t VALUES (1, 1)")
    head = captured.head()
    stop = BinlogOffset(head.file, head.pos + 1)  # inside the next transaction
    late = threading.Timer(0.5, lambda: sql("INSERT INTO t VALUES (2, 2)"))
    late.start()
    started = time.monotonic()
    changes = captured.read(start, stop)
    late.join()
    assert time.monotonic() - started >= 0.5
    assert changes == [(Op.INSERT, (1, 1))]


def test_read_that_cannot_reach_its_stop_offset_fails(
    short_deadline: float, captured: Captured, sql: Callable[..., Any]
) -> None:
    """Never a silent early end: a stop the binlog does not reach within the deadline fails."""
    start = captured.head()
    sql("INSERT INTO t VALUES (1, 1)")
    # A thousand files ahead: however far the shared server's binlog rotates meanwhile.
    prefix, sequence = start.file.rsplit(".", 1)
    stop = BinlogOffset(f"{prefix}.{int(sequence) + 1000:0{len(sequence)}d}", 4)
    with pytest.raises(SourceError, match="before its stop offset"):
        captured.read(start, stop)


def test_compressed_events_met_while_reading_stop_the_read(
    private_mariadb: Callable[..., Any], make_private_config: Callable[..., Any]
) -> None:
    """log_bin_compress turned on after validation: the library would skip the compressed rows
    events silently; the read stops with the setting's name instead."""
    server = private_mariadb({"log_bin_compress": "OFF", "log_bin_compress_min_len": "10"})
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE shop")
        cur.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(200))")
    config = make_private_config(server, "shop")
    table, start = _schema_and_head(config.source, "shop", "t")
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL log_bin_compress = ON")
        cur.execute("INSERT INTO shop.t VALUES (1, REPEAT('x', 150))")
    with pytest.raises(SourceError, match="log_bin_compress"):
        list(read_changes(config.source, config.source.server_id_range[0], [table], start))


def test_a_table_map_repeated_by_each_transaction_is_parsed_once(
    captured: Captured, sql: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each transaction repeats its table's map; equal maps are parsed once and their rows decode
    as before. A map of other bytes (another table id after an ALTER) is parsed anew."""
    parses: list[int] = []
    parse = table_maps.parse_table_map

    def counted(event: Any, *args: Any, **options: Any) -> None:
        parses.append(1)
        parse(event, *args, **options)

    monkeypatch.setattr(table_maps, "_PARSED_MAPS", {})
    monkeypatch.setattr(table_maps, "parse_table_map", counted)
    start = captured.head()
    for i in range(1, 31):
        sql("INSERT INTO t VALUES (%s, %s)", (i, i * 7))
    sql("UPDATE t SET v = v + 1 WHERE id = 3")
    stop = captured.head()
    expected = [(Op.INSERT, (i, i * 7)) for i in range(1, 31)] + [(Op.UPDATE, (3, 22))]
    assert captured.read(start, stop) == expected
    assert len(parses) == 1, "31 equal table maps"
    assert captured.read(start, stop) == expected  # a new read of the same maps parses none
    assert len(parses) == 1
    (kept,) = table_maps._PARSED_MAPS.values()
    held = [type(v).__name__ for v in kept.values()]
    assert not {"BinLogPacketWrapper", "Connection"} & set(held), "a cached map holds its read"
    assert not any(isinstance(v, dict) and kept["table_id"] in v for v in kept.values())

    sql("ALTER TABLE t COMMENT 'a new table definition, a new table id'")
    again = captured.head()
    sql("INSERT INTO t VALUES (31, 217)")
    sql("INSERT INTO t VALUES (32, 224)")
    assert captured.read(again, captured.head()) == [(Op.INSERT, (31, 217)), (Op.INSERT, (32, 224))]
    assert len(parses) == 2
