"""Each captured table's schema along the binlog, so every row image is decoded with the schema in
force at its position.

A row event carries only a layout (types, and names where the server logs them), so binlake keeps
the schema history Debezium keeps: per table, the schema from a starting offset on. The snapshot
records the schema it read (`base`); the stream records the schema after each DDL it applies. At
a DDL the new schema is read from the server, once: a replayed batch finds the recorded entry and
decodes exactly as the first run did. The decoder still checks every row image against the schema
it uses (column count, types, and names under `binlog_row_metadata=FULL`), so a schema read from
the server after a second, later DDL is a clear error, never a misread row.

Entries live as a small versioned JSON file per table under `_system/schemas/<db>/<table>/`; the
stream's driver writes them before the batch that met the DDL commits, and the next batch's
planning reads them, so each batch starts from the schemas in force at its start offset. Both
read and write through `lake_files` (the planning runs where only `ArrowFiles` can).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from binlake.config.settings import Config
from binlake.errors import SchemaChangeError, SourceError
from binlake.lake.files import LakeFiles, VersionedText, driver_files, join
from binlake.lake.paths import schema_root
from binlake.model.capture import Capture, qualified, split_qualified
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.model.shadow_tables import is_incoming_shadow_of, is_shadow_of
from binlake.model.typemap import map_table
from binlake.mysql.ddl import Ddl, TableRef, dml_tables, parse_ddl, short_statement
from binlake.mysql.ddl_schema import Charsets, schema_after_alter

#: A table as (database, name).
TableId = tuple[str, str]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from binlake.mysql.schema_source import LoggedStatement

log = logging.getLogger(__name__)

#: Tables whose history files are read or written at once. Each is a few round trips to the lake's
#: file system (on a classic driver, through the JVM), mostly waiting, and a snapshot reads and
#: resets every table's history before its first chunk is read, so one after another they would
#: delay a snapshot of many tables (docs/performance.md#many-small-tables).
FILE_THREADS = 8


@dataclass(frozen=True)
class SchemaEntry:
    """A table's schema from `offset` on (None: the table does not exist from there on).

    `parked` is the schema of a table renamed to its own shadow name (an online schema-change
    tool's two-step cut-over): gone for now, and the layout a shadow renamed onto its name
    changes from. `shadow` holds the ALTERs the tool ran on the table's shadow since it created
    it: the cut-over alone shows a column gone and another new, the shadow's ALTER names the
    rename (see `shadow_tables`)."""

    offset: BinlogOffset
    schema: TableSchema | None
    statement: str = ""  # the DDL that set it; "" for the schema a snapshot read
    parked: TableSchema | None = None
    shadow: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset.to_dict(),
            "schema": self.schema.to_json() if self.schema else None,
            "statement": self.statement,
            "parked": self.parked.to_json() if self.parked else None,
            "shadow": list(self.shadow),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SchemaEntry:
        schema = TableSchema.from_json(data["schema"]) if data["schema"] else None
        parked = TableSchema.from_json(data["parked"]) if data.get("parked") else None
        offset = BinlogOffset.from_dict(data["offset"])
        return cls(offset, schema, data["statement"], parked, tuple(data.get("shadow", ())))


class SchemaHistory:
    """The lake's schema history: per table, entries in offset order.

    Every stream job on the lake and the snapshot record into it, each at its own place in the
    binlog, so a table's entries are a `VersionedText` and a change never takes back another
    writer's: an entry is added at its offset (or replaces the one there, the same DDL met
    again by a job behind another or a replayed batch) and the entries after it stay."""

    def __init__(self, root: str, files: LakeFiles) -> None:
        self.root = root
        self.files = files

    def _document(self, table: str) -> VersionedText:
        database, name = table.split(".", 1)
        return VersionedText(join(self.root, database, name), self.files)

    def entries(self, table: str) -> list[SchemaEntry]:
        return _entries(self._document(table).read())

    def entries_of(self, tables: Iterable[str]) -> dict[str, list[SchemaEntry]]:
        """`entries` of each table, read `FILE_THREADS` at once."""
        names = list(dict.fromkeys(tables))
        with ThreadPoolExecutor(FILE_THREADS, thread_name_prefix="binlake-history") as pool:
            return dict(zip(names, pool.map(self.entries, names), strict=True))

    def record(self, table: str, entry: SchemaEntry) -> None:
        """Add the entry at `entry.offset`, or replace the one there."""

        def change(text: str | None) -> str:
            kept = [e for e in _entries(text) if e.offset != entry.offset]
            return _entries_json(sorted([*kept, entry], key=lambda e: e.offset))

        self._document(table).update(change)

    def reset(self, table: str, base: SchemaEntry) -> None:
        """Start the table's history again from a new snapshot's schema (the snapshot follows
        every DDL after `base` itself)."""
        self._document(table).update(lambda _: _entries_json([base]))

    def reset_all(self, bases: dict[str, SchemaEntry]) -> None:
        """`reset` of each table to its base, `FILE_THREADS` at once."""
        with ThreadPoolExecutor(FILE_THREADS, thread_name_prefix="binlake-history") as pool:
            list(pool.map(self.reset, bases, bases.values()))


def schema_history(spark: SparkSession, config: Config) -> SchemaHistory:
    """The lake's schema history, read and written through the driver's files (`driver_files`)."""
    return SchemaHistory(schema_root(config), driver_files(spark))


def entry_at(entries: list[SchemaEntry], offset: BinlogOffset) -> SchemaEntry | None:
    """Of a table's `entries`, the one in force just after `offset`: the last one at or before
    it, else the first (a table's rows before its first entry precede its snapshot and are never
    decoded)."""
    before = [e for e in entries if e.offset <= offset]
    return before[-1] if before else (entries[0] if entries else None)


def _entries(text: str | None) -> list[SchemaEntry]:
    return [SchemaEntry.from_json(e) for e in json.loads(text)] if text else []


def _entries_json(entries: list[SchemaEntry]) -> str:
    return json.dumps([e.to_json() for e in entries], indent=1)


@dataclass(frozen=True)
class SchemaChange:
    """A DDL met in the binlog, for one captured table."""

    table: str  # "db.table"
    offset: BinlogOffset
    statement: str
    before: TableSchema | None  # None: the table was not captured before (created, renamed in)
    after: TableSchema | None  # None: the table is gone (dropped, renamed away, parked)
    # The statement's kind (alter, create, drop, truncate, rename), or for an online schema-change
    # tool's cut-over: park (the table renamed to its shadow name) and swap (a shadow renamed
    # onto the table: an ALTER of it); shadow: the table's shadow created or altered (the table
    # itself is unchanged); unfollowable: an ALTER that removes or replaces rows with no row
    # events (DROP PARTITION, ...).
    kind: str
    # The ALTERs run on the table's shadow (see `SchemaEntry.shadow`): after a shadow or park
    # change, the ones known so far; at a swap, the ones that made the layout it brings in.
    shadow: tuple[str, ...] = ()
    # When the statement was written (epoch seconds, the binlog event's header); 0 where
    # unknown (a schema history entry read back). An scd2 silver's versions end at it.
    ts: float = 0.0

    @property
    def name(self) -> str:
        return self.table.split(".", 1)[1]

    def where(self) -> str:
        return f"at {self.offset} ({short_statement(self.statement)})"

    def entry(self) -> SchemaEntry:
        """The table's schema history entry from this change on."""
        parked = self.before if self.kind == "park" else None
        kept = self.shadow if self.kind in ("shadow", "park") else ()
        return SchemaEntry(self.offset, self.after, self.statement, parked, kept)


class SchemaSource(Protocol):
    """What the tracker asks the source (`schema_source.ServerSchemas` on a real one)."""

    def read(self, database: str, table: str) -> TableSchema | None:
        """The table's schema now (None: it does not exist)."""

    def later_change(
        self, database: str, table: str, offset: BinlogOffset
    ) -> LoggedStatement | None:
        """The first DDL on the table after `offset` up to the binlog head."""

    def charsets(self, database: str, table: str) -> Charsets:
        """The collations a column definition's text leaves to the server."""


class SchemaTracker:
    """The captured tables' schemas along one binlog read, following the DDL it meets.

    It starts from the entries in force at the read's start. A DDL at or before a table's entry
    is already reflected in it (the schema was read after it) and is skipped; any later DDL that
    touches a captured table, or creates one `source.tables` matches, yields a `SchemaChange`.
    A statement's names are compared as the server compares them (`capture.names`): under
    `lower_case_table_names` 1 or 2, `TRUNCATE TABLE Orders` empties `orders`, and the change
    keeps the table's own spelling (its entries, its lake paths).
    """

    def __init__(
        self,
        capture: Capture,
        in_force: dict[str, SchemaEntry],
        recorded: Callable[[str, BinlogOffset], SchemaEntry | None],
        source: SchemaSource,
    ) -> None:
        self.capture = capture
        self.entries = dict(in_force)
        self._recorded = recorded
        self._source = source

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
        yield from self._on_shadow(ddl, statement, default_database, offset)
        for (database, name), kind in self._affected(ddl, default_database):
            table = qualified(database, name)
            entry = self.entries.get(table)
            if entry is not None and offset <= entry.offset:
                continue  # the entry was read after this statement: it is reflected already
            if kind == "create" and ddl.if_not_exists and entry and entry.schema:
                continue  # the table exists: the server did nothing
            before = _before(kind, entry)
            if kind == "swap" and before is None:
                kind = "rename"  # a shadow onto a table binlake did not hold: rows it lacks
            if not self._follows(database, name, kind, before):
                continue
            after = self._schema_after(table, kind, offset, before, statement)
            if before is None and after is None:
                continue
            shadow = entry.shadow if entry and kind in ("park", "swap") else ()
            change = SchemaChange(table, offset, statement, before, after, kind, shadow)
            self.entries[table] = change.entry()
            yield change

    def _on_shadow(
        self, ddl: Ddl, statement: str, default_database: str, offset: BinlogOffset
    ) -> Iterator[SchemaChange]:
        """A held table's shadow created (`CREATE TABLE _t_new LIKE t`) or altered: the
        statement goes on the table's entry, so the cut-over knows which columns it renamed."""
        if ddl.kind not in ("create", "alter"):
            return
        names = self.capture.names
        for ref in ddl.tables:
            database, name = ref.qualified(default_database)
            for table, entry in list(self.entries.items()):
                held = entry.schema
                if held is None or not names.same(database, held.database):
                    continue
                shadow = (*entry.shadow, statement) if ddl.kind == "alter" else ()
                incoming = is_incoming_shadow_of(names.key(name), names.key(held.name))
                if offset <= entry.offset or not incoming or shadow == entry.shadow:
                    continue
                change = SchemaChange(table, offset, statement, held, held, "shadow", shadow)
                self.entries[table] = change.entry()
                yield change

    def _follows(self, database: str, name: str, kind: str, before: TableSchema | None) -> bool:
        """A DDL concerns a captured table, or brings in a table (created or renamed to a name)
        that `source.tables` matches."""
        if kind in ("create", "rename"):
            return self.capture.captures(database, name)
        return before is not None

    def changed_by_dml(self, statement: str, default_database: str) -> list[str]:
        """The tables binlake holds that a DML statement in the binlog may change: logged as a
        statement (a session with binlog_format STATEMENT or MIXED), it has no row events."""
        held = []
        for ref in dml_tables(statement) or ():
            table = qualified(*self._table_id(ref, default_database))
            entry = self.entries.get(table)
            if entry is not None and entry.schema is not None:
                held.append(table)
        return held

    def _table_id(self, ref: TableRef, default_database: str) -> TableId:
        """A statement's table reference as the server stores the table: a held table's own
        spelling (its entries and lake paths are keyed by it), else the spelling the server
        stores a new name by. The same as written where the server compares names as written."""
        database, name = ref.qualified(default_database)
        names = self.capture.names
        if not names.folds or qualified(database, name) in self.entries:
            return database, name
        wanted = (names.key(database), names.key(name))
        for table in self.entries:
            held = split_qualified(table)
            if (names.key(held[0]), names.key(held[1])) == wanted:
                return held
        return names.stored(database), names.stored(name)

    def _affected(self, ddl: Ddl, default_database: str) -> Iterator[tuple[TableId, str]]:
        """((database, table), kind) for each table of a captured database the statement
        touches."""

        def mine(ref: TableRef) -> TableId | None:
            database, name = self._table_id(ref, default_database)
            return (database, name) if self.capture.in_database(database) else None

        if ddl.dropped_database is not None:
            for table, entry in list(self.entries.items()):
                held = split_qualified(table)
                gone = self.capture.names.same(held[0], ddl.dropped_database)
                if gone and entry.schema is not None:
                    yield held, "drop"
            return
        kind = "unfollowable" if ddl.removes_rows else ddl.kind
        for ref in ddl.tables:
            if (touched := mine(ref)) is not None:
                yield touched, kind
        yield from _moves([(mine(old), mine(new)) for old, new in ddl.renames])

    def _schema_after(
        self,
        table: str,
        kind: str,
        offset: BinlogOffset,
        before: TableSchema | None,
        statement: str,
    ) -> TableSchema | None:
        """The table's schema just after the DDL at `offset`: the one recorded by an earlier run
        of this batch; else the server's, if no later DDL touched the table; else, for an ALTER,
        the schema before with the statement applied (`ddl_schema`)."""
        if kind in ("drop", "park"):
            return None
        recorded = self._recorded(table, offset)
        if recorded is not None and recorded.offset == offset:
            return recorded.schema
        database, name = split_qualified(table)
        try:
            now = self._source.read(database, name)
        except SourceError as exc:
            raise SourceError(f"{table} changed at {offset}, uncapturable: {exc}") from None
        if before is None or kind not in ("alter", "truncate", "unfollowable"):
            # a table new to binlake, or a swap: the server's schema
            # (docs/schema-changes.md#how-the-stream-follows-a-tables-schema)
            return now
        later = self._source.later_change(database, name, offset)
        if later is None:
            return now
        if kind == "truncate":
            return before
        charsets = self._source.charsets(database, name)
        derived = schema_after_alter(before, statement, charsets)
        if derived is None:
            raise SchemaChangeError(
                f"{table} changed at {offset} ({short_statement(statement)}) and again at "
                f"{later.offset} ({short_statement(later.statement)}) before the stream read the "
                "first change, and binlake cannot tell its columns between the two from the first "
                "statement's text: the stream stopped before it rather than guess. Re-snapshot "
                f"the table with `binlake snapshot --tables {name} --reset`"
            )
        try:
            map_table(derived)  # refuses a column type binlake cannot land, as a read does
        except SourceError as exc:
            raise SourceError(f"{table} changed at {offset}, uncapturable: {exc}") from None
        return derived


def _before(kind: str, entry: SchemaEntry | None) -> TableSchema | None:
    """The layout a change starts from: none for a name another table's rows now hold; a
    parked table's layout for the shadow that takes its name back."""
    if entry is None or kind in ("rename", "create"):
        return None  # CREATE OR REPLACE: the old table and its rows are gone
    if kind == "swap":
        return entry.schema or entry.parked
    return entry.schema


def _moves(renames: list[tuple[TableId | None, TableId | None]]) -> Iterator[tuple[TableId, str]]:
    """(table, kind) of one statement's table renames by their net effect, with None for a
    table in a database not captured. A statement may rename a table several times (`a TO tmp,
    b TO a, tmp TO b`): what counts is which table each name holds when it ends. A name left
    empty is a "drop", or a "park" when its table went to its own shadow name; a name holding
    another table is a "rename", or a "swap" when that table is its shadow (`shadow_tables`)."""
    holds: dict[TableId, TableId | None] = {}  # a name -> its table's name before the statement
    went: dict[TableId, TableId | None] = {}  # a table's name before the statement -> after
    for old, new in renames:
        origin = holds.pop(old, old) if old is not None else None
        if origin is not None:
            went[origin] = new
        if new is not None:
            holds[new] = origin
    for origin, name in went.items():
        if origin not in holds:
            yield origin, "park" if name is not None and _shadow(name, origin) else "drop"
    for name, origin in holds.items():
        if origin != name:
            yield name, "swap" if origin is not None and _shadow(origin, name) else "rename"


def _shadow(name: TableId, table: TableId) -> bool:
    """`name` is one of `table`'s shadow names, in its database."""
    return name[0] == table[0] and is_shadow_of(name[1], table[1])
