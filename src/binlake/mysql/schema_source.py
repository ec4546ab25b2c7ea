"""What the schema tracker asks the source server while the stream reads the binlog.

A table's schema read from the server is the schema of *now*. It is the schema in force at a DDL
only if no later DDL has touched the table since, which binlake checks by reading the DDL
statements the binlog holds after that offset, up to the head (`SHOW BINLOG EVENTS`, a plain
query: no replica server id, so the stream's own binlog reader is never evicted). The scan is
kept and extended, so a batch with many DDL reads each part of the binlog once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pymysql
import pymysql.cursors

from binlake.model.capture import TableNames
from binlake.model.offsets import BinlogOffset, on_lineage
from binlake.model.schema import TableSchema
from binlake.model.shadow_tables import is_incoming_shadow_of
from binlake.mysql.charsets import charmap
from binlake.mysql.connection import query
from binlake.mysql.ddl import parse_ddl
from binlake.mysql.ddl_schema import Charsets
from binlake.mysql.discovery import load_schema_if_exists
from binlake.mysql.server import binlog_files, current_offset, table_names

_USE = re.compile(r"use `((?:[^`]|``)*)`; (.*)", re.DOTALL)
_AS_WRITTEN = TableNames()


@dataclass(frozen=True)
class LoggedStatement:
    """A QUERY event's statement, at the offset just after it (where a change of it applies)."""

    offset: BinlogOffset
    database: str  # the session's default database ("" when none)
    statement: str

    def touches(
        self, database: str, table: str, shadow: bool = False, names: TableNames = _AS_WRITTEN
    ) -> bool:
        """Whether the statement changes the table (or, with `shadow`, the copy an online
        schema-change tool alters in its place: see `shadow_tables`), its names compared as the
        server compares them (`names`)."""
        ddl = parse_ddl(self.statement)
        if ddl is None:
            return False
        if ddl.dropped_database is not None:
            return names.same(ddl.dropped_database, database)
        refs = [*ddl.tables, *(ref for pair in ddl.renames for ref in pair)]
        qualified = (ref.qualified(self.database) for ref in refs)
        touched = {names.key(name) for db, name in qualified if names.same(db, database)}
        key = names.key(table)
        return key in touched or (shadow and any(is_incoming_shadow_of(n, key) for n in touched))


class ServerSchemas:
    """The tracker's view of the source: schemas now, later DDL, and charsets."""

    def __init__(self, conn: pymysql.Connection, split_keys: dict[str, str]) -> None:
        self.conn = conn
        self.split_keys = split_keys
        #: How the server compares table names: a DDL may spell a table in another case.
        self.names = table_names(conn)
        self._scanned_from: BinlogOffset | None = None
        self._scanned_to: BinlogOffset | None = None
        self._statements: list[LoggedStatement] = []

    def read(self, database: str, table: str) -> TableSchema | None:
        return load_schema_if_exists(self.conn, database, table, self.split_keys)

    def later_change(
        self, database: str, table: str, offset: BinlogOffset, shadow: bool = False
    ) -> LoggedStatement | None:
        """The first DDL on the table (or its shadow) after `offset`, up to the binlog head now
        (call it after reading the schema: a DDL between the two is then seen, never missed)."""
        head = current_offset(self.conn).on(offset.lineage)
        self._scan(offset, head)
        return next(
            (
                s
                for s in self._statements
                if s.offset > offset and s.touches(database, table, shadow, self.names)
            ),
            None,
        )

    def charsets(self, database: str, table: str) -> Charsets:
        rows = query(
            self.conn,
            "SELECT table_collation FROM information_schema.tables "
            "WHERE table_schema = %s AND table_name = %s",
            (database, table),
        )
        table_collation = rows[0][0] if rows and rows[0][0] else "utf8mb4_general_ci"
        return Charsets(table_collation, self._default_collation, self._charmap)

    def _default_collation(self, charset: str) -> str:
        rows = query(
            self.conn,
            "SELECT default_collate_name FROM information_schema.character_sets "
            "WHERE character_set_name = %s",
            (charset,),
        )
        return str(rows[0][0]) if rows else f"{charset}_general_ci"

    def _charmap(self, charset: str | None) -> str | None:
        return charmap(self.conn, charset)

    def _scan(self, start: BinlogOffset, head: BinlogOffset) -> None:
        if self._scanned_from is None or start < self._scanned_from:
            self._statements, self._scanned_from, self._scanned_to = [], start, start
        assert self._scanned_to is not None
        if head > self._scanned_to:
            self._statements.extend(_statements(self.conn, self._scanned_to, head))
            self._scanned_to = head


def _statements(
    conn: pymysql.Connection, start: BinlogOffset, stop: BinlogOffset
) -> list[LoggedStatement]:
    """The DDL statements of the QUERY events ending in `(start, stop]`."""
    found: list[LoggedStatement] = []
    first, last = BinlogOffset(start.binlog_file, 0), BinlogOffset(stop.binlog_file, 0)
    files = [f for f in binlog_files(conn) if first <= BinlogOffset(f, 0) <= last]
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        for name in files:
            origin = start.pos if name == start.binlog_file else 4  # 4: after the magic bytes
            cur.execute("SHOW BINLOG EVENTS IN %s FROM %s", (name, origin))
            for _, _, kind, _, end, info in cur:
                offset = BinlogOffset(on_lineage(name, start.lineage), int(end))
                if kind != "Query" or offset > stop or offset <= start:
                    continue
                used = _USE.fullmatch(info or "")
                database, text = (used[1].replace("``", "`"), used[2]) if used else ("", info)
                if parse_ddl(text) is not None:  # BEGIN of every transaction stays out of memory
                    found.append(LoggedStatement(offset, database, text))
    return found
