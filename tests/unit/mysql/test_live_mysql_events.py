"""The live binlog reader on bytes real MySQL servers wrote: python-mysql-replication's own
`BinLogStreamReader` fed a fixture file's events as a server's binlog dump sends them (its format
description, then each event from the position asked, as packets; `FileDump`), and binlake's
reads on top of it, as they run against a server.

- Compressed transactions (`binlog_transaction_compression`, zstd TRANSACTION_PAYLOAD), which the
  library passes on undecoded: the stream decodes them, each row at the payload's end offset
  and numbered on, equal to what the file's row events say (read by the library from the file).
- MySQL 8.4's tagged GTIDs, which the library passes on undecoded: a read carries the GTID set
  through them.
- Partial JSON updates (`binlog_row_value_options=PARTIAL_JSON`) under a FULL row image: each
  diff applied to the before image's document, as MySQL applied it (`partial_json_file`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymysql.protocol import MysqlPacket
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication import row_event as rows

from binlake.config.settings import SourceConfig
from binlake.model.capture import Capture
from binlake.model.changes import Op
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.mysql.binlog import read_changes
from binlake.mysql.binlog_files import read_binlog_file
from binlake.mysql.table_map_schema import table_map_schema
from binlake.mysql.transactions import transactions

from .partial_json_file import full_image_partial_file
from .test_mysql_row_images import landed

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "mysql-binlogs"
SOURCE = SourceConfig(password="unused", database="a")
_EOF = b"\xfe\x00\x00\x02\x00"


class FileDump:
    """A binlog dump of one file, from `pos`: the packets a server sends (an OK byte, then the
    event with its checksum), its format description first, then an EOF (a non-blocking
    dump's end)."""

    def __init__(self, path: Path, pos: int) -> None:
        data = path.read_bytes()
        events, offset = [], 4
        while offset < len(data):
            size = int.from_bytes(data[offset + 9 : offset + 13], "little")
            events.append((offset, data[offset : offset + size]))
            offset += size
        self.packets = [events[0][1], *(raw for at, raw in events[1:] if at >= pos)]

    def _read_packet(self) -> MysqlPacket:
        raw = b"\x00" + self.packets.pop(0) if self.packets else _EOF
        return MysqlPacket(raw, "utf8")

    def close(self) -> None:
        """Nothing to close."""


class _Control:
    """The library's control connection, as far as reading events asks it."""

    charset = "utf8mb4"

    def _get_dbms(self) -> str:
        return "mysql"

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def dumps(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every binlog read binlake opens serves `path` (CRC32 checksums, as the fixtures have)."""

    def serve(path: Path) -> None:
        def to_stream(self: Any) -> None:
            self._stream_connection = FileDump(path, self.log_pos)
            self._BinLogStreamReader__use_checksum = True
            self._BinLogStreamReader__connected_stream = True

        def to_ctl(self: Any) -> None:
            self._ctl_connection = _Control()
            self._BinLogStreamReader__connected_ctl = True

        monkeypatch.setattr(BinLogStreamReader, "_BinLogStreamReader__connect_to_stream", to_stream)
        monkeypatch.setattr(BinLogStreamReader, "_BinLogStreamReader__connect_to_ctl", to_ctl)

    return serve


def _file_tables(path: Path, database: str, keys: dict[str, str]) -> list[TableSchema]:
    found: dict[str, TableSchema] = {}
    for event in read_binlog_file(path):
        decoded = event.decoded
        if isinstance(decoded, rows.RowsEvent) and decoded.schema == database:
            table_map = decoded.table_map[decoded.table_id]
            found.setdefault(
                decoded.table,
                table_map_schema(database, decoded.table, table_map, keys[decoded.table]),
            )
    return list(found.values())


def _file_changes(path: Path, tables: list[TableSchema]) -> Iterator[tuple[Any, ...]]:
    """(table, op, end offset, before, after) of each row of the file's rows events, read by the
    library from the file, each value as binlake lands it (`landed`)."""
    schemas = {t.name: t for t in tables}
    payload_end = 0
    for event in read_binlog_file(path):
        payload_end = event.log_pos if event.type_code == 40 else payload_end
        decoded = event.decoded
        if not isinstance(decoded, rows.RowsEvent) or decoded.table not in schemas:
            continue
        schema = schemas[decoded.table]

        def image(values: dict[str, Any] | None, schema: TableSchema = schema) -> Any:
            if values is None:
                return None
            return tuple(landed(c, values[c.name]) for c in schema.columns)

        op = {30: Op.INSERT, 31: Op.UPDATE, 39: Op.UPDATE, 32: Op.DELETE}[event.type_code]
        for row in decoded.rows:
            before = image(row.get("before_values") or (row["values"] if op == Op.DELETE else None))
            after = image(row.get("after_values") or (row["values"] if op == Op.INSERT else None))
            yield schema.qualified, op, event.log_pos or payload_end, before, after


def test_compressed_transactions_are_read_live_as_the_file_says(dumps: Any) -> None:
    """MySQL 8.0.31, GTID mode, MINIMAL metadata: two zstd payloads, the second holding an
    update and an insert of one table (two rows events ending where the payload ends)."""
    path = FIXTURES / "mysql-bin.000057"
    dumps(path)
    tables = _file_tables(path, "a", {"b": "@1", "test_table_3": "@1"})
    start, stop = BinlogOffset(path.name, 4), BinlogOffset(path.name, path.stat().st_size)

    read = list(read_changes(SOURCE, 1, tables, start, stop))

    expected = list(_file_changes(path, tables))
    assert len(expected) == 3
    assert [(c.table, c.op, c.position.offset.pos, c.before, c.after) for c in read] == expected
    assert [c.position.row for c in read] == [0, 0, 1]  # numbered on inside the payload
    # A read from the first payload's end reads the second alone.
    after_first = read[0].position.offset
    assert [c.op for c in read_changes(SOURCE, 1, tables, after_first, stop)] == [
        Op.UPDATE,
        Op.INSERT,
    ]


def test_a_compressed_transaction_of_another_table_is_skipped_undecoded(dumps: Any) -> None:
    path = FIXTURES / "transaction_compression.000001"
    dumps(path)
    start, stop = BinlogOffset(path.name, 4), BinlogOffset(path.name, path.stat().st_size)
    (tb1,) = _file_tables(path, "test", {"tb1": "@1"})
    other = TableSchema("test", "other", tb1.columns, tb1.key, tb1.split_column)
    assert list(read_changes(SOURCE, 1, [other], start, stop)) == []
    assert [c.after for c in read_changes(SOURCE, 1, [tb1], start, stop)] == [(1,)]


def test_a_read_carries_the_gtid_set_through_a_tagged_transaction(dumps: Any) -> None:
    """MySQL 9.6.0: PREVIOUS_GTIDS `…:1-13:mytag:1-2`, then the tagged transaction `…:mytag:3`."""
    path = FIXTURES / "binlog_transaction_with_GTID_TAG.000001"
    dumps(path)
    uuid = "55778904-0299-11f1-b1b8-4ef0c4956feb"
    start = BinlogOffset(path.name, 127, f"{uuid}:1-13:mytag:1-2")
    found = list(transactions(SOURCE, 1, start, counting=SOURCE.capture))
    (begins, _, _), (ends, _, changes) = found
    assert (begins.pos, begins.gtid) == (245, f"{uuid}:1-13:mytag:1-2")
    assert (ends.gtid, changes) == (f"{uuid}:1-13:mytag:1-3", 0)


def test_a_partial_json_update_is_read_live_as_the_document_mysql_wrote(
    dumps: Any, tmp_path: Path
) -> None:
    """Each after image's `json_col` is its before image's with the diff (`$.age` replaced)
    applied: equal to what the file says (the library applying the same diffs), and to what
    MySQL itself computed from the new document into the generated `name` and `age`."""
    path = full_image_partial_file(tmp_path)
    dumps(path)
    (t,) = _file_tables(path, "mysql", {"t": "@1"})
    start, stop = BinlogOffset(path.name, 4), BinlogOffset(path.name, path.stat().st_size)

    read = list(read_changes(SOURCE, 1, [t], start, stop))

    expected = list(_file_changes(path, [t]))
    assert [(c.table, c.op, c.position.offset.pos, c.before, c.after) for c in read] == expected
    partial = [c for c in read if c.position.offset.pos == 4398]
    assert len(partial) == 6
    for change in partial:
        key, document, name, age = change.after
        assert key == change.before[0]
        assert json.loads(document) == {**json.loads(change.before[1]), "age": age}
        assert (json.loads(document)["name"], age) == (name, change.before[3] + 1)


def test_a_batch_bound_counts_the_rows_of_partial_json_updates(dumps: Any, tmp_path: Path) -> None:
    """What bounds a batch by changes counts a partial update's rows as an update's: the
    file's six inserts, six updates and six partial updates."""
    path = full_image_partial_file(tmp_path)
    dumps(path)
    *_, (ends, _, changes) = transactions(
        SOURCE, 1, BinlogOffset(path.name, 4), counting=Capture("mysql", None)
    )
    assert (ends.pos, changes) == (path.stat().st_size, 18)
