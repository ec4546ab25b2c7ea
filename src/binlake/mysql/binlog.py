"""The binlog reader: python-mysql-replication behind a small typed boundary.

It yields `RowChange`s of the captured tables, positioned and normalised, between a start offset
(exclusive) and an optional stop offset (inclusive). Row events of other tables are skipped by the
library before their rows are decoded (`only_tables`/`only_schemas`), which is where the cost is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    GtidEvent,
    MariadbGtidEvent,
    NotImplementedEvent,
    QueryEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    PartialUpdateRowsEvent,
    RowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from binlake.config.settings import SourceConfig
from binlake.errors import BinlogPurgedError, SchemaChangeError, SourceConnectionError, SourceError
from binlake.model.capture import TableNames, split_qualified
from binlake.model.changes import Op, Row, RowChange
from binlake.model.offsets import BinlogOffset, ChangePosition, RowNumbers, on_lineage
from binlake.model.schema import Column, TableSchema
from binlake.mysql.binlog_files import TRANSACTION_PAYLOAD, payload_events
from binlake.mysql.column_rules import ruled_rename
from binlake.mysql.commit_times import CommitClock
from binlake.mysql.ddl import short_statement
from binlake.mysql.reconnect import MAX_BACKOFF_S, is_transient
from binlake.mysql.replication import ER_MASTER_FATAL_ERROR_READING_BINLOG, ROW_EVENTS, open_stream
from binlake.mysql.row_images import (
    ImageDecoder,
    column_layout,
    decode_images,
    has_full_images,
    image_decoder,
    partial_update_images,
)
from binlake.mysql.schema_history import SchemaChange, SchemaTracker
from binlake.mysql.system_versioning import Versions, hidden_period_columns, versions_of
from binlake.mysql.xa_transactions import XaTransactions

log = logging.getLogger(__name__)

#: The server's eviction of this reader (MariaDB): another replica connected with our server_id.
ER_CONNECTION_KILLED = 4052
#: Event types the library cannot decode and would drop silently, and the setting behind each
#: (MySQL's compressed transactions it passes on undecoded are decoded here: `payload_events`).
_UNREADABLE_EVENT_TYPES = dict.fromkeys(
    range(165, 172), "log_bin_compress=ON (MariaDB compressed events)"
)


@dataclass(frozen=True)
class _Layout:
    """One row layout of a table: the schema of its rows as they land, their decoder, and for a
    system-versioned table how its images read as current rows (`system_versioning`)."""

    schema: TableSchema
    decoder: ImageDecoder
    versions: Versions | None
    #: A partial JSON update's images (`row_images.partial_update_images`) of this layout.
    partial_updates: Callable[[bytes], Iterator[Row]]


class _TableDecoder:
    """One captured table's row images → normalised row tuples (`row_images`).

    A decoder is generated per row layout. The layout is identified by the table id and each
    column's type, metadata and (where logged) name: never by the identity of the library's
    table-map object, which is new for every distinct TABLE_MAP payload (`table_map_once`) and
    whose `id()` Python reuses, so a key made of it can hand a new layout (after an ALTER) the
    old layout's decoder.

    Where the binlog names the columns (`binlog_row_metadata=FULL`) and they differ from the
    schema's, the layout is the columns it names, taken from every schema of the table this read
    has known: after two DDLs the stream meets late, the schema read at the first one is the
    server's latest, and the rows between the two are decoded as they were written.
    """

    def __init__(self, table: TableSchema, known: dict[str, Column] | None = None) -> None:
        self.table = table
        self.known = {**(known or {}), **{c.name: c for c in table.columns}}
        #: A system-versioned table's implicit period columns: decoded, judged, then dropped.
        self.hidden = hidden_period_columns(table)
        self._decoders: dict[tuple[Any, ...], _Layout] = {}
        self._map: Any = None  # the table map of the current transaction, and its decoder
        self._decoder: _Layout | None = None

    def images(self, event: RowsEvent, body: bytes | None = None) -> tuple[_Layout, list[Row]]:
        """The layout of `event`'s rows, and every row image in order (an update row: its
        before, then its after), from `body` (the images, for an event decoded from a
        transaction payload) or from the rest of the event's packet."""
        table_map = event.table_map[event.table_id]
        if table_map is not self._map or self._decoder is None:
            self._decoder = self._decoder_for(event.table_id, table_map.columns)
            self._map = table_map  # held, so it is compared by identity, never by a reused id
        if not has_full_images(event):
            raise SourceError(
                f"a row event of {self.table.qualified} lacks columns (not a FULL row image): "
                "a session wrote with binlog_row_image other than FULL; binlake needs FULL"
            )
        if body is None:
            body = event.packet.read(event.event_size - event.packet.read_bytes)
        if isinstance(event, PartialUpdateRowsEvent):
            return self._decoder, list(self._decoder.partial_updates(body))
        return self._decoder, list(decode_images(self._decoder.decoder, body))

    def _decoder_for(self, table_id: int, columns: list[Any]) -> _Layout:
        layout = (table_id, *map(column_layout, columns))
        found = self._decoders.get(layout)
        if found is None:
            decoded = self._layout_schema(columns)
            schema, versions = versions_of(decoded, self.hidden)
            partial_updates = partial(partial_update_images, decoded, columns)
            found = _Layout(schema, image_decoder(decoded, columns), versions, partial_updates)
            self._decoders[layout] = found
        return found

    def _layout_schema(self, columns: list[Any]) -> TableSchema:
        """The schema a layout's images are decoded with (a versioned table's implicit period
        columns included where the layout has them)."""
        names = [getattr(c, "name", None) for c in columns]
        if any(n is None or str(n).startswith("UNKNOWN_COL") for n in names):
            return self.table
        known = {**self.known, **self.hidden}
        if tuple(names) == self.table.column_names or any(n not in known for n in names):
            return self.table  # decoding checks it (and names what differs)
        return replace(self.table, columns=tuple(known[str(n)] for n in names))


def read_changes(
    source: SourceConfig,
    server_id: int,
    tables: list[TableSchema],
    start: BinlogOffset,
    stop: BinlogOffset | None = None,
    blocking: bool = False,
    xa: XaTransactions | None = None,
) -> Iterator[RowChange]:
    """Row changes of `tables` with positions in `(start, stop]`, in binlog order (the tables'
    schemas must not change in that range: the snapshot's windows). An XA transaction's rows come
    at its commit; `xa`, if given, keeps what the read met of XA transactions for the caller
    (what stayed prepared, which commits it never saw prepared), and may carry on from a read
    that ended where this one starts."""
    reader = _Reader(source, server_id, tables, start, stop, xa=xa)
    for change in _read(reader, blocking):
        assert isinstance(change, RowChange)
        yield change


def follow_changes(
    source: SourceConfig,
    server_id: int,
    tracker: SchemaTracker,
    start: BinlogOffset,
    stop: BinlogOffset,
    floors: dict[str, BinlogOffset],
    since: int = 0,
) -> Iterator[RowChange | SchemaChange]:
    """Row changes of the tracker's tables and their schema changes in `(start, stop]`, in binlog
    order, each row decoded with the schema in force at its position (the stream's read).

    Rows of a table at or before its floor (every chunk's high watermark already holds them)
    are skipped undecoded: they may predate the schema its snapshot read. Each change and DDL
    carries its transaction's commit time, never earlier than `since` (the commit time reached
    at `start`, 0 if unknown) or than any transaction's before it (`commit_times`).
    """
    reader = _Reader(source, server_id, [], start, stop, tracker, floors, since)
    yield from _read(reader, blocking=False)


def _read(reader: _Reader, blocking: bool) -> Iterator[RowChange | SchemaChange]:
    """Run `reader` to its stop offset, resuming it after dropped connections.

    With a `stop`, the read reaches `stop` or fails: a server serves only the binlog bytes it
    has synced, so a read that ends early is resumed where it ended until `stop` is reached or
    `READ_DEADLINE_S` passes without progress. A connection the source drops or refuses (a
    restart, a `KILL`) is reconnected with backoff for `source.reconnect_timeout_s` without
    progress. Without a `stop`, non-blocking reads end at the binlog's current end and blocking
    reads wait for new events.
    """
    stop = reader.stop
    progressed = time.monotonic()
    failures = 0
    while True:
        before = reader.reached
        try:
            yield from reader.read(blocking)
        except pymysql.err.OperationalError as exc:
            if reader.reached != before:
                progressed, failures = time.monotonic(), 0
            if not is_transient(exc):
                raise _replication_error(exc, reader.reached, reader.server_id) from None
            window = reader.source.reconnect_timeout_s
            if time.monotonic() - progressed >= window:
                raise SourceConnectionError(
                    f"the binlog read from {reader.reached} lost the source and could not "
                    f"reconnect within source.reconnect_timeout_s={window:g} s ({exc.args[-1]}); "
                    "once it is back, run the same command again: it resumes where it stopped"
                ) from None
            failures += 1
            pause = min(MAX_BACKOFF_S, 0.2 * 2**failures)
            log.warning(
                "binlog read from %s interrupted (%s); reconnecting in %.1f s",
                reader.reached, exc, pause,
            )  # fmt: skip
            time.sleep(pause)
            continue
        if reader.done:
            return
        if reader.reached != before:
            progressed = time.monotonic()
        elif time.monotonic() - progressed >= READ_DEADLINE_S:
            raise SourceError(
                f"the binlog read ended at {reader.reached} before its stop offset {stop} and "
                f"made no progress for {READ_DEADLINE_S:.0f} s: the source serves its binlog "
                "only up to what it has synced"
            )
        time.sleep(0.05)


READ_DEADLINE_S = 30.0
#: XIDs end most transactions, so a read stops right at its stop offset; GTID events begin them
#: and carry their commit times (`commit_times`; MySQL's anonymous GTID event is a
#: NotImplementedEvent); unknown events are read so that an event the library cannot decode
#: stops the read, not vanishes; partial JSON updates are updates (the library's class is not).
_READ_EVENTS = [
    *ROW_EVENTS,
    XidEvent,
    MariadbGtidEvent,
    GtidEvent,
    NotImplementedEvent,
    PartialUpdateRowsEvent,
    # XA transactions (`xa_transactions`): prepared, then committed or rolled back by a
    # statement; a schema-following read also reads DDL in QUERY events.
    XAPrepareEvent,
    QueryEvent,
]


class _Reader:
    """One positioned read of the binlog, resumable where it ended.

    A resumed read starts at the end of the last event read, possibly inside a transaction,
    with the table maps read so far: a table id names the same layout throughout one binlog
    file, as python-mysql-replication itself assumes when it reconnects.
    """

    def __init__(
        self,
        source: SourceConfig,
        server_id: int,
        tables: list[TableSchema],
        start: BinlogOffset,
        stop: BinlogOffset | None,
        tracker: SchemaTracker | None = None,
        floors: dict[str, BinlogOffset] | None = None,
        since: int = 0,
        xa: XaTransactions | None = None,
    ) -> None:
        self.source, self.server_id, self.start, self.stop = source, server_id, start, stop
        #: XA transactions: rows held from their prepare to their commit (`xa_transactions`).
        self.xa = xa if xa is not None else XaTransactions()
        self.tracker = tracker
        self.floors = floors or {}
        #: How the server compares table names: a table map's spelling may differ from the
        #: catalog's under lower_case_table_names=2, so decoders are found by `names.key`.
        self.names = TableNames()
        if tracker is not None:
            tables = list(tracker.captured().values())
            self.schemas = tracker.capture.schemas
            self.names = tracker.capture.names
        else:
            self.schemas = sorted({t.database for t in tables})
        self.decoders = {self._key(t.database, t.name): _TableDecoder(t) for t in tables}
        self.reached = start  # the end of the last event read: where a retry resumes
        self.table_map: dict[int, Any] = {}
        self.done = False
        #: The commit time of the transaction read (`commit_times`): `since` before the first.
        self.clock = CommitClock(since)
        self.numbers = RowNumbers()

    def read(self, blocking: bool) -> Iterator[RowChange | SchemaChange]:
        following = self.tracker is not None
        stream = open_stream(
            self.source,
            self.server_id,
            self.reached,
            blocking=blocking,
            only_events=_READ_EVENTS,
            only_schemas=self.schemas,
            # A schema-following read meets tables created later: it filters rows itself.
            only_tables=None if following else sorted({t for _, t in self.decoders}),
            filter_non_implemented_events=False,
        )
        stream.table_map = self.table_map
        try:
            for event in stream:
                offset = self._at(stream)
                self.reached = offset
                if self.stop is not None and offset > self.stop:
                    break
                self.clock.observe(event.timestamp)
                if _is_payload(event):
                    for inner in payload_events(event, stream):
                        yield from self._event(inner.decoded, offset, inner.row_images)
                elif isinstance(event, NotImplementedEvent):
                    _refuse_unreadable(event)
                else:
                    yield from self._event(event, offset)
                if offset == self.stop:
                    break
            else:
                self.reached = max(self.reached, self._at(stream))
        finally:
            self.table_map = stream.table_map
            stream.close()
        self.done = self.stop is None or self.reached >= self.stop

    def _event(
        self, event: Any, offset: BinlogOffset, images: bytes | None = None
    ) -> Iterator[RowChange | SchemaChange]:
        """One decoded event's changes (`images`: a rows event's, if read from a payload)."""
        if isinstance(event, RowsEvent):
            changes = self._changes(event, offset, images)
            if self.xa.holding:
                self.xa.hold(changes)
            else:
                yield from changes
        elif event is not None:
            yield from self._transaction_event(event, offset)

    def _key(self, database: str, table: str) -> tuple[str, str]:
        return self.names.key(database), self.names.key(table)

    def _at(self, stream: BinLogStreamReader) -> BinlogOffset:
        """Where the read is, on the lineage it started on."""
        return BinlogOffset(on_lineage(stream.log_file, self.start.lineage), stream.log_pos)

    def _transaction_event(
        self, event: Any, offset: BinlogOffset
    ) -> Iterator[RowChange | SchemaChange]:
        """A transaction's start or end, an XA statement (`xa_transactions`: the rows it
        commits, stamped with its commit time), or a DDL."""
        committed = self.xa.observe(event, offset)
        if committed is None:
            yield from self._schema_changes(event, offset)
        else:
            yield from (replace(c, timestamp=self.clock.now) for c in committed)

    def _schema_changes(self, event: QueryEvent, offset: BinlogOffset) -> Iterator[SchemaChange]:
        if self.tracker is None or offset <= self.start or event.query == "BEGIN":
            return
        default = event.schema.decode() if isinstance(event.schema, bytes) else event.schema
        for table in self.tracker.changed_by_dml(event.query, default):
            floor = self.floors.get(table)
            if floor is None or offset > floor:
                raise _statement_dml(table, offset, event.query)
        for change in self.tracker.on_statement(event.query, default, offset):
            name = self._key(*split_qualified(change.table))
            old = self.decoders.pop(name, None)
            if change.after is not None:
                self.decoders[name] = _TableDecoder(change.after, old.known if old else None)
            floor = self.floors.get(change.table)
            if floor is None or offset > floor:
                refused = ruled_rename(self.source, change)
                if refused is not None:
                    raise SchemaChangeError(refused)
                yield replace(change, ts=float(self.clock.now))

    def _changes(
        self, event: RowsEvent, offset: BinlogOffset, body: bytes | None = None
    ) -> Iterator[RowChange]:
        decoder = self.decoders.get(self._key(event.schema, event.table))
        if offset <= self.start or decoder is None:
            return
        floor = self.floors.get(decoder.table.qualified)
        if floor is not None and offset <= floor:
            return
        layout, images = decoder.images(event, body)
        table, ts = layout.schema, self.clock.now
        pairs: Iterable[tuple[Row | None, Row | None]]
        if isinstance(event, UpdateRowsEvent):
            kind, pairs = Op.UPDATE, zip(images[::2], images[1::2], strict=True)
        elif isinstance(event, WriteRowsEvent):
            kind, pairs = Op.INSERT, ((None, image) for image in images)
        else:
            kind, pairs = Op.DELETE, ((image, None) for image in images)
        versions = layout.versions
        listed = list(pairs)
        # Rows events inside one transaction payload share its end offset (`RowNumbers`).
        first = self.numbers.first(offset, len(listed))
        for index, (before, after) in enumerate(listed, start=first):
            op: Op | None = kind
            if versions is not None:  # a history row, or a period ended: a current row's change
                before, after = versions.current(before, after)
                op = _OPS[before is not None, after is not None]
            if op is None:
                continue
            position = ChangePosition(offset, index)
            yield RowChange(table.qualified, op, position, before, after, ts, table)


#: A change's operation by which of its images it has (before, after).
_OPS = {(True, True): Op.UPDATE, (False, True): Op.INSERT, (True, False): Op.DELETE,
        (False, False): None}  # fmt: skip


def _is_payload(event: Any) -> bool:
    """A MySQL TRANSACTION_PAYLOAD (`binlog_transaction_compression`), passed on undecoded."""
    return isinstance(event, NotImplementedEvent) and event.event_type == TRANSACTION_PAYLOAD


def _statement_dml(table: str, offset: BinlogOffset, statement: str) -> SourceError:
    name = table.split(".", 1)[1]
    return SourceError(
        f"the binlog holds a change to {table} at {offset} logged as a statement, not as row "
        f"events ({short_statement(statement)!r}): a session ran with binlog_format STATEMENT "
        "or MIXED, and binlake, which reads row events, cannot apply it. Keep "
        "binlog_format=ROW in every session (changing it needs SUPER or BINLOG ADMIN), then "
        "snapshot the table again: "
        f"`binlake snapshot --tables {name} --reset` (the stream goes on past this statement)"
    )


def _refuse_unreadable(event: Any) -> None:
    """Stop at an event python-mysql-replication cannot decode (it would drop it silently)."""
    kind = event.packet.event_type
    setting = _UNREADABLE_EVENT_TYPES.get(kind)
    if setting is not None:
        raise SourceError(
            f"the source wrote a binlog event binlake cannot read (type {kind}, from "
            f"{setting}): turn that setting off on the source; the changes in these events "
            "are lost to binlake, so re-snapshot the tables they touched "
            "(`binlake snapshot --tables T --reset`)"
        )


def _replication_error(
    exc: pymysql.err.OperationalError, start: BinlogOffset, server_id: int
) -> SourceError:
    code = exc.args[0] if exc.args else None
    detail = str(exc.args[-1]) if exc.args else str(exc)
    # MariaDB evicts the older reader with 4052; MySQL sends 1236, the code of a purged binlog,
    # with this text: tell the two apart, or a collision reads as lost data.
    if code == ER_CONNECTION_KILLED or "same server_uuid/server_id" in detail:
        return SourceError(
            f"another binlog reader connected with server_id {server_id} and evicted this one: "
            "give every binlake job its own source.server_id_range, apart from the source's "
            "replicas (SHOW SLAVE HOSTS)"
        )
    if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
        return BinlogPurgedError(
            f"the source cannot serve its binlog from {start} ({detail}): the file was "
            "purged or the offset is invalid; re-snapshot the tables "
            "(`binlake snapshot --tables T --reset`)"
        )
    return SourceError(f"reading the binlog from {start} failed: {detail}")
