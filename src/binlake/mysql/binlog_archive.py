"""A folder of binlog files as the stream's source, read without a server.

`mysqlbinlog --raw` backups, a managed service's binlog exports and a server's own binlog
directory leave a folder of files named `<base>.<number>`. The stream reads them in the order
of their numbers as it would read the server that wrote them, with the same positions
(`file:pos`, each event's end), the same `RowChange`s and `SchemaChange`s and so the same
filtering, MERGE and changelog.

With no server to ask, each table's schema is its TABLE_MAP's (`table_map_schema`): a table
enters the archive's stream as if created at the first row event of it that the read meets,
and a table map whose layout differs from the last one (an ALTER ran between) is a schema change
at that row event. TRUNCATE, DROP TABLE and DROP DATABASE are followed from their statements.
What an archive cannot give is refused with the file and offset, never skipped: what moves or
removes rows without row events (DML logged as a statement, a held table renamed, an ALTER that
removes rows), a statement naming a held table in another case (whether the server compared
names with case, an archive does not say) and rows logged without a FULL row image (as a live
source's are). A partial JSON update under a FULL row image is read whole, as a live source's is
(`row_images.partial_update_images`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pymysqlreplication import event as ev
from pymysqlreplication import row_event as rows

from binlake.errors import SourceError
from binlake.model.capture import Capture
from binlake.model.changes import Op, Row, RowChange
from binlake.model.offsets import BinlogOffset, ChangePosition, RowNumbers, file_sequence
from binlake.model.schema import TableSchema
from binlake.mysql.binlog_files import MAGIC, TRANSACTION_PAYLOAD, FileEvent, read_binlog_file
from binlake.mysql.commit_times import CommitClock
from binlake.mysql.ddl import dml_tables, parse_ddl, short_statement
from binlake.mysql.row_images import (
    ImageDecoder,
    decode_images,
    has_full_images,
    image_decoder,
    partial_update_images,
)
from binlake.mysql.schema_history import SchemaChange
from binlake.mysql.table_map_schema import table_map_schema
from binlake.mysql.xa_transactions import XaTransactions

#: A binlog file's name: `<base>.<number>`, the number ordering the files.
_NUMBERED = re.compile(r"\.[0-9]+$")
#: The statement a table's first table map in a read stands for (its CREATE is not read).
TABLE_MAP_STATEMENT = "-- the table's layout, from its binlog table map"
_PARTIAL_UPDATE_ROWS = 39


class BinlogArchive:
    """The binlog files of `folder`, oldest first: every file that begins with the binlog
    magic, in the order of the number after its base name (`<base>.999999` before
    `<base>.1000000`). Other files (an index, a checksum list) are left alone.

    The stream asks for the files several times per trigger (the head, the batch's end, the
    lag): the folder is listed each time, for files added since, but each file is opened for
    its magic once, when first seen holding it (a file still empty, being copied, is looked at
    again)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._binlogs: set[str] = set()

    def files(self) -> list[str]:
        """The binlog files' names, oldest first; a `SourceError` if there are none."""
        if not self.folder.is_dir():
            raise SourceError(
                f"source.binlog_archive {str(self.folder)!r} is not a folder: name the folder "
                "holding the binlog files (mysqlbinlog --raw, a service's binlog export)"
            )
        found = [p.name for p in self.folder.iterdir() if p.is_file() and self._is_binlog(p)]
        unnumbered = [name for name in found if not _NUMBERED.search(name)]
        if unnumbered:
            raise SourceError(
                f"source.binlog_archive {str(self.folder)!r} holds binlog files without a number "
                f"after their base name ({', '.join(sorted(unnumbered))}): the stream orders the "
                "files and positions by it; name them as the server did (`<base>.000001` …)"
            )
        if not found:
            raise SourceError(
                f"source.binlog_archive {str(self.folder)!r} holds no binlog file (none begins "
                "with the binlog magic \\xfebin)"
            )
        return sorted(found, key=file_sequence)

    def sizes(self) -> dict[str, int]:
        """Each binlog file's size in bytes, oldest first."""
        return {name: (self.folder / name).stat().st_size for name in self.files()}

    def first(self) -> BinlogOffset:
        """Before the first event of the oldest file."""
        return BinlogOffset(self.files()[0], len(MAGIC))

    def head(self) -> BinlogOffset:
        """The end of the newest file."""
        name, size = list(self.sizes().items())[-1]
        return BinlogOffset(name, size)

    def next_end(self, position: BinlogOffset) -> BinlogOffset:
        """The end of the file `position` is in, or of the next one if it is at its end: the
        stream reads an archive a file per batch (a file ends between transactions)."""
        sizes = self.sizes()
        names = list(sizes)
        if position.file not in sizes:
            raise SourceError(
                f"the stream's position {position} names a file the archive "
                f"{str(self.folder)!r} does not hold (it holds {names[0]} to {names[-1]})"
            )
        index = names.index(position.file)
        if position.pos >= sizes[position.file] and index + 1 < len(names):
            index += 1
        return BinlogOffset(names[index], sizes[names[index]])

    def read(
        self,
        capture: Capture,
        split_keys: dict[str, str],
        start: BinlogOffset,
        stop: BinlogOffset,
        in_force: dict[str, TableSchema] | None = None,
        since: int = 0,
    ) -> Iterator[RowChange | SchemaChange]:
        """The changes of the captured tables in `(start, stop]`, in binlog order: rows, and
        each table's schema changes against `in_force`, the schemas the stream holds at `start`
        (`ArchiveRead`)."""
        read = ArchiveRead(capture, split_keys, start, in_force or {}, since)
        for name in self.files():
            if start.sort_key[:2] <= BinlogOffset(name, 0).sort_key[:2] <= stop.sort_key[:2]:
                yield from read.file(self.folder / name, stop)

    def _is_binlog(self, path: Path) -> bool:
        if path.name in self._binlogs:
            return True
        with path.open("rb") as file:
            if file.read(len(MAGIC)) != MAGIC:
                return False
        self._binlogs.add(path.name)
        return True


@dataclass
class _Layout:
    """A table's schema as its current table map lays it out, and that layout's decoder (None
    until a table map of the table is read)."""

    schema: TableSchema
    decoder: ImageDecoder | None = None
    columns: tuple[Any, ...] = ()


@dataclass
class ArchiveRead:
    """One read of an archive: the tables' layouts, open XA transactions, the commit clock.

    It starts from the schemas the stream holds (`in_force`); a table it meets that is not among
    them enters at its first row event (`TABLE_MAP_STATEMENT`), and a table map whose schema
    differs from the one held is a schema change there."""

    capture: Capture
    split_keys: dict[str, str]
    start: BinlogOffset
    in_force: dict[str, TableSchema]
    since: int = 0
    xa: XaTransactions = field(default_factory=XaTransactions)

    def __post_init__(self) -> None:
        self.clock = CommitClock(self.since)
        self.layouts = {table: _Layout(schema) for table, schema in self.in_force.items()}
        #: The last ALTER of each table held, whose layout the table's next table map shows:
        #: the statement of that schema change (it names the columns it renames).
        self.altered: dict[str, str] = {}
        self.numbers = RowNumbers()

    def file(self, path: Path, stop: BinlogOffset) -> Iterator[RowChange | SchemaChange]:
        """The changes of one file up to `stop`."""
        payload_end = 0
        for event in read_binlog_file(path, library_rows=False):
            end = event.log_pos if not event.in_payload else payload_end
            if event.type_code == TRANSACTION_PAYLOAD:
                payload_end = event.log_pos
                continue
            offset = BinlogOffset(path.name, end)
            if offset > stop:
                return
            self.clock.observe(event.timestamp)
            if offset <= self.start:
                continue
            yield from self._event(event, offset, path)

    def _event(
        self, event: FileEvent, offset: BinlogOffset, path: Path
    ) -> Iterator[RowChange | SchemaChange]:
        decoded = event.decoded
        if isinstance(decoded, rows.RowsEvent):
            changes = list(self._rows(event, offset, path))
            if self.xa.holding:
                self.xa.hold(c for c in changes if isinstance(c, RowChange))
                yield from (c for c in changes if isinstance(c, SchemaChange))
            else:
                yield from changes
            return
        committed = self.xa.observe(decoded, offset)
        if committed is not None:
            yield from (replace(c, timestamp=self.clock.now) for c in committed)
        elif isinstance(decoded, ev.QueryEvent):
            yield from self._statement(decoded, offset, path, event)

    def _rows(
        self, event: FileEvent, offset: BinlogOffset, path: Path
    ) -> Iterator[RowChange | SchemaChange]:
        decoded = event.decoded
        database, name = decoded.schema, decoded.table
        if not self.capture.captures(database, name):
            return
        table_map = decoded.table_map[decoded.table_id]
        # A schema change a table map brings is just before the rows event: at its start (a
        # transaction payload's start, inside one), after the rows of earlier transactions.
        before_rows = BinlogOffset(path.name, event.offset)
        layout, changed = self._layout(database, name, table_map, before_rows)
        if changed is not None:
            yield changed
        if not has_full_images(decoded):
            raise _refused(path, event, "a row event without a FULL row image (binlog_row_image)")
        images = _images(layout, event, path)
        pairs: list[tuple[Row | None, Row | None]]
        if isinstance(decoded, rows.UpdateRowsEvent):
            op, pairs = Op.UPDATE, list(zip(images[::2], images[1::2], strict=True))
        elif isinstance(decoded, rows.WriteRowsEvent):
            op, pairs = Op.INSERT, [(None, image) for image in images]
        else:
            op, pairs = Op.DELETE, [(image, None) for image in images]
        first = self.numbers.first(offset, len(pairs))
        schema, ts = layout.schema, self.clock.now
        for index, (before, after) in enumerate(pairs, start=first):
            position = ChangePosition(offset, index)
            yield RowChange(schema.qualified, op, position, before, after, ts, schema)

    def _layout(
        self, database: str, name: str, table_map: Any, offset: BinlogOffset
    ) -> tuple[_Layout, SchemaChange | None]:
        """The table's layout under `table_map`, and the schema change that brings it in, if it
        is new to the read or differs from the last one."""
        qualified = f"{database}.{name}"
        held = self.layouts.get(qualified)
        columns = tuple(table_map.columns)
        if held is not None and held.decoder is not None and held.columns == columns:
            return held, None
        split_key = self.split_keys.get(name) or self.split_keys.get(qualified)
        schema = table_map_schema(database, name, table_map, split_key)
        layout = _Layout(schema, image_decoder(schema, list(columns)), columns)
        self.layouts[qualified] = layout
        if held is not None and held.schema == schema:
            return layout, None
        before = held.schema if held is not None else None
        kind = "alter" if before is not None else "create"
        statement = TABLE_MAP_STATEMENT
        if before is not None:
            statement = self.altered.pop(qualified, "-- a new layout in its table map")
        change = SchemaChange(
            qualified, offset, statement, before, schema, kind, ts=float(self.clock.now)
        )
        return layout, change

    def _statement(
        self, query: Any, offset: BinlogOffset, path: Path, event: FileEvent
    ) -> Iterator[SchemaChange]:
        """A TRUNCATE or DROP of a table the read holds (an ALTER kept for its next table map);
        what moves or removes rows without row events refused: DML logged as a statement, a
        rename of a held table, an ALTER that removes rows."""
        statement = query.query
        default = query.schema.decode() if isinstance(query.schema, bytes) else query.schema
        if statement == "BEGIN":
            return
        where = _Where(path, event, statement)
        for ref in dml_tables(statement) or ():
            if self._held(ref.database or default, ref.name, where) is not None:
                raise where.refused("DML logged as a statement: binlog_format must be ROW")
        ddl = parse_ddl(statement)
        if ddl is None:
            return
        if ddl.dropped_database is not None:
            gone = [t for t in self.layouts if t.split(".", 1)[0] == ddl.dropped_database]
            yield from (self._dropped(t, offset, statement) for t in gone)
        for old, _ in ddl.renames:
            if (table := self._held(old.database or default, old.name, where)) is not None:
                raise where.refused(f"{table} renamed: its rows move without row events")
        for ref in ddl.tables:
            table = self._held(ref.database or default, ref.name, where)
            if table is None:
                continue
            if ddl.removes_rows:
                raise where.refused(f"it removes rows of {table} without row events")
            if ddl.kind == "alter":  # its new layout is read from the next table map
                self.altered[table] = statement
            elif ddl.kind == "truncate":
                schema = self.layouts[table].schema
                ts = float(self.clock.now)
                yield SchemaChange(table, offset, statement, schema, schema, "truncate", ts=ts)
            elif ddl.kind == "drop":
                yield self._dropped(table, offset, statement)

    def _held(self, database: str, name: str, where: _Where) -> str | None:
        """`database.name` if the read holds that table. A name that matches a held one only
        when case is ignored is refused: under `lower_case_table_names` 1 or 2 the server
        names that table so, under 0 another one, and an archive does not say which."""
        table = f"{database}.{name}"
        if table in self.layouts:
            return table
        folded = next((t for t in self.layouts if t.casefold() == table.casefold()), None)
        if folded is not None:
            raise where.refused(
                f"it names {table}, which differs from {folded} by case alone, and an archive "
                "does not say whether the server compared table names with case "
                "(lower_case_table_names)"
            )
        return None

    def _dropped(self, table: str, offset: BinlogOffset, statement: str) -> SchemaChange:
        held = self.layouts.pop(table)
        ts = float(self.clock.now)
        return SchemaChange(table, offset, statement, held.schema, None, "drop", ts=ts)


@dataclass(frozen=True)
class _Where:
    """A statement of the archive, for a refusal naming its file and byte offset."""

    path: Path
    event: FileEvent
    statement: str

    def refused(self, why: str) -> SourceError:
        return _refused(self.path, self.event, f"{short_statement(self.statement)!r}: {why}")


def _images(layout: _Layout, event: FileEvent, path: Path) -> list[Row]:
    """Every row image of a rows event, by binlake's decoder (the file reader leaves the rows
    to it: `library_rows=False`); bytes it cannot read are refused at the event's offset."""
    assert layout.decoder is not None
    body = event.row_images or b""
    try:
        if event.type_code == _PARTIAL_UPDATE_ROWS:
            return list(partial_update_images(layout.schema, layout.columns, body))
        return list(decode_images(layout.decoder, body))
    except (SourceError, ValueError, IndexError, struct.error) as e:
        raise SourceError(
            f"binlog file {path} at byte offset {event.offset}: the row images of "
            f"{layout.schema.qualified} cannot be decoded: {e}"
        ) from e


def _refused(path: Path, event: FileEvent, what: str) -> SourceError:
    return SourceError(
        f"binlog file {path} at byte offset {event.offset}: {what}, which binlake cannot apply "
        "from an archive; land the tables it touches with a snapshot of the server instead"
    )
