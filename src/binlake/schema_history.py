"""Each captured table's schema along the binlog, so every row image is decoded with the schema in
force at its position.

A row event carries only a layout (types, and names where the server logs them), so binlake keeps
the schema history Debezium keeps: per table, the schema from a starting offset on. The snapshot
records the schema it read (`base`); the stream records the schema after each DDL it applies. At
a DDL the new schema is read from the server, once: a replayed batch finds the recorded entry and
decodes exactly as the first run did. The decoder still checks every row image against the schema
it uses (column count, types, and names under `binlog_row_metadata=FULL`), so a schema read from
the server after a second, later DDL is a clear error, never a misread row.

Entries live as one small JSON file per table under `_system/schemas/<db>/<table>.json`; the
stream's driver writes them before the batch that met the DDL commits, and the next batch's
planning reads them, so each batch starts from the schemas in force at its start offset. Both
read and write through `lake_files` (the planning runs where only `ArrowFiles` can).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from binlake.ddl import Ddl, TableRef, parse_ddl
from binlake.errors import SourceError
from binlake.lake_files import LakeFiles, join
from binlake.offsets import BinlogOffset
from binlake.source import TableSchema, captured_by

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaEntry:
    """A table's schema from `offset` on (None: the table does not exist from there on)."""

    offset: BinlogOffset
    schema: TableSchema | None
    statement: str = ""  # the DDL that set it; "" for the schema a snapshot read

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset.to_dict(),
            "schema": self.schema.to_json() if self.schema else None,
            "statement": self.statement,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SchemaEntry:
        schema = TableSchema.from_json(data["schema"]) if data["schema"] else None
        return cls(BinlogOffset.from_dict(data["offset"]), schema, data["statement"])


class SchemaHistory:
    """The lake's schema history: per table, entries in offset order."""

    def __init__(self, root: str, files: LakeFiles) -> None:
        self.root = root
        self.files = files

    def _file(self, table: str) -> str:
        database, name = table.split(".", 1)
        return join(self.root, database, f"{name}.json")

    def entries(self, table: str) -> list[SchemaEntry]:
        text = self.files.read_text(self._file(table))
        if text is None:
            return []
        return [SchemaEntry.from_json(e) for e in json.loads(text)]

    def at(self, table: str, offset: BinlogOffset) -> SchemaEntry | None:
        """The entry in force just after `offset`: the last one at or before it, else the first
        (a table's rows before its first entry precede its snapshot and are never decoded)."""
        entries = self.entries(table)
        before = [e for e in entries if e.offset <= offset]
        return before[-1] if before else (entries[0] if entries else None)

    def record(self, table: str, entry: SchemaEntry) -> None:
        """Add (or replace) the entry at `entry.offset`; entries after it are a replayed run's
        future and are dropped with it."""
        kept = [e for e in self.entries(table) if e.offset < entry.offset]
        self._write(table, [*kept, entry])

    def reset(self, table: str, base: SchemaEntry) -> None:
        """Start the table's history again from a new snapshot's schema."""
        self._write(table, [base])

    def _write(self, table: str, entries: list[SchemaEntry]) -> None:
        self.files.write_text(
            self._file(table), json.dumps([e.to_json() for e in entries], indent=1)
        )


#: The `StreamTables` file in a stream job's checkpoint folder.
TABLES_FILE = "binlake-tables.json"


class StreamTables:
    """The tables one stream job applies, each from the offset it joined at (`None`: from the
    stream's start). A table joins when its snapshot finishes or when it is created; `--reset`
    takes it out until its new snapshot finishes. Kept beside the job's checkpoint."""

    def __init__(self, path: str, files: LakeFiles) -> None:
        self.path = path
        self.files = files

    def read(self) -> dict[str, BinlogOffset | None]:
        text = self.files.read_text(self.path)
        if text is None:
            return {}
        return {t: BinlogOffset.from_dict(o) if o else None for t, o in json.loads(text).items()}

    def write(self, tables: dict[str, BinlogOffset | None]) -> None:
        data = {t: o.to_dict() if o else None for t, o in sorted(tables.items())}
        self.files.write_text(self.path, json.dumps(data, indent=1))

    def exists(self) -> bool:
        return self.files.exists(self.path)


@dataclass(frozen=True)
class SchemaChange:
    """A DDL met in the binlog, for one captured table."""

    table: str  # "db.table"
    offset: BinlogOffset
    statement: str
    before: TableSchema | None  # None: the table was not captured before (created, renamed in)
    after: TableSchema | None  # None: the table is gone (dropped, renamed away)
    kind: str  # the statement's kind: alter, create, drop, truncate, rename


#: (database, table) → the table's schema read from the server now (None: it does not exist).
SchemaReader = Callable[[str, str], TableSchema | None]


class SchemaTracker:
    """The captured tables' schemas along one binlog read, following the DDL it meets.

    It starts from the entries in force at the read's start. A DDL at or before a table's entry
    is already reflected in it (the schema was read after it) and is skipped; any later DDL that
    touches a captured table, or creates one `source.tables` matches, yields a `SchemaChange`.
    """

    def __init__(
        self,
        database: str,
        patterns: list[str] | None,
        in_force: dict[str, SchemaEntry],
        recorded: Callable[[str, BinlogOffset], SchemaEntry | None],
        read_schema: SchemaReader,
    ) -> None:
        self.database = database
        self.patterns = patterns
        self.entries = dict(in_force)
        self._recorded = recorded
        self._read_schema = read_schema

    def schema(self, table: str) -> TableSchema | None:
        entry = self.entries.get(table)
        return entry.schema if entry else None

    def captured(self) -> dict[str, TableSchema]:
        return {t: e.schema for t, e in self.entries.items() if e.schema is not None}

    def on_statement(
        self, statement: str, default_database: str, offset: BinlogOffset
    ) -> Iterator[SchemaChange]:
        ddl = parse_ddl(statement)
        if ddl is None:
            return
        for name, kind in self._affected(ddl, default_database):
            table = f"{self.database}.{name}"
            entry = self.entries.get(table)
            if not self._follows(name, kind, entry, offset):
                continue
            after = self._schema_after(table, name, kind, offset)
            before = entry.schema if entry else None
            if before is None and after is None:
                continue
            self.entries[table] = SchemaEntry(offset, after, statement)
            yield SchemaChange(table, offset, statement, before, after, kind)

    def _follows(
        self, name: str, kind: str, entry: SchemaEntry | None, offset: BinlogOffset
    ) -> bool:
        """A DDL concerns a captured table after its entry, or brings in a table (created or
        renamed to a name) that `source.tables` matches."""
        if kind in ("create", "rename"):
            return captured_by(name, self.patterns) and (entry is None or offset > entry.offset)
        return entry is not None and offset > entry.offset

    def _affected(self, ddl: Ddl, default_database: str) -> Iterator[tuple[str, str]]:
        """(table name, kind) for each table of the captured database the statement touches."""

        def mine(ref: TableRef) -> str | None:
            database, name = ref.qualified(default_database)
            return name if database == self.database else None

        for ref in ddl.tables:
            if (name := mine(ref)) is not None:
                yield name, ddl.kind
        for old, new in ddl.renames:
            if (name := mine(old)) is not None:
                yield name, "drop"
            if (name := mine(new)) is not None:
                yield name, "rename"

    def _schema_after(
        self, table: str, name: str, kind: str, offset: BinlogOffset
    ) -> TableSchema | None:
        if kind == "drop":
            return None
        recorded = self._recorded(table, offset)
        if recorded is not None and recorded.offset == offset:
            return recorded.schema
        try:
            return self._read_schema(self.database, name)
        except SourceError as exc:
            raise SourceError(f"{table} changed at {offset}, uncapturable: {exc}") from None
