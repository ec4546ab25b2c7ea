"""The binlog reader: python-mysql-replication behind a small typed boundary.

It yields `RowChange`s of the captured tables, positioned and normalised, between a start offset
(exclusive) and an optional stop offset (inclusive). Row events of other tables are skipped by the
library before their rows are decoded (`only_tables`/`only_schemas`), which is where the cost is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants.BINLOG import ANONYMOUS_GTID_LOG_EVENT
from pymysqlreplication.event import (
    BinLogEvent,
    GtidEvent,
    MariadbGtidEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    RowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)
from tenacity import Retrying

from binlake.config.settings import SourceConfig
from binlake.errors import (
    BinlogPurgedError,
    BinlogResetError,
    SchemaChangeError,
    SourceConnectionError,
    SourceError,
)
from binlake.model.capture import Capture, split_qualified
from binlake.model.changes import Op, Row, RowChange
from binlake.model.offsets import BinlogOffset, ChangePosition, bytes_behind, on_lineage
from binlake.model.schema import Column, TableSchema
from binlake.mysql.column_rules import ruled_rename
from binlake.mysql.ddl import short_statement
from binlake.mysql.gtids import gtid_after, gtid_head, same_position
from binlake.mysql.reconnect import MAX_BACKOFF_S, is_transient, reconnecting
from binlake.mysql.row_images import (
    ImageDecoder,
    column_layout,
    count_images,
    decode_images,
    image_decoder,
    image_widths,
)
from binlake.mysql.schema_history import SchemaChange, SchemaTracker
from binlake.mysql.server import (
    Connection,
    binlog_files,
    binlog_sizes,
    connection,
    current_offset,
    tls_options,
)

log = logging.getLogger(__name__)

# Errors the server sends on the replication connection.
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236  # e.g. "Could not find first log file name"
ER_CONNECTION_KILLED = 4052  # MariaDB: another replica connected with our server_id
ER_SPECIFIC_ACCESS_DENIED = 1227  # e.g. a binlog dump without REPLICATION SLAVE

#: Event types the library cannot decode and would drop silently, and the setting behind each.
_UNREADABLE_EVENT_TYPES = {
    **dict.fromkeys(range(165, 172), "log_bin_compress=ON (MariaDB compressed events)"),
    40: "binlog_transaction_compression=ON (MySQL transaction payloads)",
    39: "binlog_row_value_options=PARTIAL_JSON (MySQL partial JSON updates)",
}


class _TableDecoder:
    """One captured table's row images → normalised row tuples (`row_images`).

    A decoder is generated per row layout. The layout is identified by the table id and each
    column's type, metadata and (where logged) name: never by the identity of the library's
    table-map object, which is new for every distinct TABLE_MAP payload (`_table_map_once`) and
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
        self._decoders: dict[tuple[Any, ...], tuple[TableSchema, ImageDecoder]] = {}
        self._map: Any = None  # the table map of the current transaction, and its decoder
        self._decoder: tuple[TableSchema, ImageDecoder] | None = None

    def images(self, event: RowsEvent) -> tuple[TableSchema, list[Row]]:
        """The schema of `event`'s rows, and every row image in order (an update row: its
        before, then its after)."""
        table_map = event.table_map[event.table_id]
        if table_map is not self._map or self._decoder is None:
            self._decoder = self._decoder_for(event.table_id, table_map.columns)
            self._map = table_map  # held, so it is compared by identity, never by a reused id
        self._require_full_images(event)
        body = event.packet.read(event.event_size - event.packet.read_bytes)
        schema, decoder = self._decoder
        return schema, list(decode_images(decoder, body))

    def _decoder_for(self, table_id: int, columns: list[Any]) -> tuple[TableSchema, ImageDecoder]:
        layout = (table_id, *map(column_layout, columns))
        found = self._decoders.get(layout)
        if found is None:
            schema = self._layout_schema(columns)
            found = self._decoders[layout] = (schema, image_decoder(schema, columns))
        return found

    def _layout_schema(self, columns: list[Any]) -> TableSchema:
        names = [getattr(c, "name", None) for c in columns]
        if any(n is None or str(n).startswith("UNKNOWN_COL") for n in names):
            return self.table
        if tuple(names) == self.table.column_names or any(n not in self.known for n in names):
            return self.table  # decoding checks it (and names what differs)
        return replace(self.table, columns=tuple(self.known[str(n)] for n in names))

    def _require_full_images(self, event: RowsEvent) -> None:
        bitmaps = [event.columns_present_bitmap]
        if isinstance(event, UpdateRowsEvent):
            bitmaps.append(event.columns_present_bitmap2)
        full = (1 << event.number_of_columns) - 1
        if any(int.from_bytes(b, "little") & full != full for b in bitmaps):
            raise SourceError(
                f"a row event of {self.table.qualified} lacks columns (not a FULL row image): "
                "a session wrote with binlog_row_image other than FULL; binlake needs FULL"
            )


#: TABLE_MAP events parsed so far: (payload, read options) → the fields the parse set, without
#: what ties an event to its read (the packet, the control connection, the read's table maps).
_PARSED_MAPS: dict[tuple[Any, ...], dict[str, Any]] = {}
#: Distinct table maps kept (a map is a few hundred bytes and its parsed columns).
_PARSED_MAPS_KEPT = 4096
_parse_table_map = TableMapEvent.__init__


def _table_map_once(
    self: Any, from_packet: Any, event_size: int, table_map: dict[int, Any], ctl: Any, **kw: Any
) -> None:
    """`TableMapEvent.__init__`, parsing each distinct TABLE_MAP payload once.

    Every transaction repeats the map of each table it writes, and the library parses each copy
    anew (a `Column` per column, each asked for its attribute dict twice, then the optional
    metadata): ~70 % of reading a binlog of single-row transactions. The parse depends on the
    payload's bytes and the read's options alone, except under `freeze_schema` (the stream's
    table map) or `use_column_name_cache` (a query), which binlake never sets and which are
    parsed as before. Equal bytes under equal options are the same map, so a copy takes the
    first one's parsed fields (kept without its packet, connection and table-map dict: a cached
    map holds no read open); a new table id, an ALTER, or an id reused after a restart for
    another layout are other bytes, parsed anew. The library's own parse is the fallback, and
    its objects are shared read-only: binlake decodes the rows itself (`_TableDecoder`)."""
    if kw.get("freeze_schema") or kw.get("use_column_name_cache") or from_packet.read_bytes:
        _parse_table_map(self, from_packet, event_size, table_map, ctl, **kw)
        return
    raw = from_packet.packet
    options = tuple(
        tuple(v) if isinstance(v, list) else v
        for v in (kw.get("only_tables"), kw.get("ignored_tables"), kw.get("only_schemas"),
                  kw.get("ignored_schemas"), kw.get("optional_meta_data"),
                  kw.get("mysql_version"), ctl._get_dbms())
    )  # fmt: skip
    key = (bytes(raw._data[raw._position : raw._position + event_size]), options)
    parsed = _PARSED_MAPS.get(key)
    if parsed is None:
        _parse_table_map(self, from_packet, event_size, table_map, ctl, **kw)
        if len(_PARSED_MAPS) >= _PARSED_MAPS_KEPT:
            _PARSED_MAPS.clear()
        read = (from_packet, table_map, ctl)
        _PARSED_MAPS[key] = {k: v for k, v in vars(self).items() if not any(v is r for r in read)}
        return
    BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl, **kw)
    own = vars(self).keys()
    vars(self).update({k: v for k, v in parsed.items() if k not in own})
    self._processed = parsed["_processed"]  # the base sets True; a filtered-out map is False
    if self._processed:
        table_map[self.table_id] = self.table_obj
    from_packet.advance(event_size)


TableMapEvent.__init__ = _table_map_once


def _open(
    source: SourceConfig, server_id: int, start: BinlogOffset | str, **options: Any
) -> BinLogStreamReader:
    """A replication connection reading from `start` (non-blocking unless `blocking=True`):
    an offset, or a MariaDB GTID position (the server finds where it ends in its binlog)."""
    options.setdefault("blocking", False)
    if isinstance(start, str):
        at: dict[str, Any] = {"is_mariadb": True, "auto_position": start}
    else:
        # File/position resume: is_mariadb=True without GTIDs silently streams from the
        # oldest binlog instead of log_file/log_pos, so MariaDB is read with the MySQL path.
        at = {"log_file": start.binlog_file, "log_pos": start.pos, "is_mariadb": False}
    return BinLogStreamReader(
        connection_settings={
            "host": source.host,
            "port": source.port,
            "user": source.user,
            "password": source.resolve_password(),
            "charset": "utf8mb4",
            **tls_options(source, "pymysql"),
        },
        server_id=server_id,
        resume_stream=True,
        **at,
        enable_logging=False,
        pymysql_wrapper=Connection,
        **options,
    )


@dataclass(frozen=True)
class BatchBudget:
    """How much one stream batch reads: binlog bytes and row changes of the captured tables
    (`stream.max_bytes_per_batch`, `stream.max_changes_per_batch`; None: no bound)."""

    capture: Capture  # whose row changes count
    max_bytes: int | None = None
    max_changes: int | None = None

    def counts(self, schema: str, table: str) -> bool:
        return self.capture.captures(schema, table)

    def exceeded(self, size: int, changes: int) -> bool:
        return (self.max_bytes is not None and size > self.max_bytes) or (
            self.max_changes is not None and changes > self.max_changes
        )

    def reached(self, size: int, changes: int) -> bool:
        return (self.max_bytes is not None and size >= self.max_bytes) or (
            self.max_changes is not None and changes >= self.max_changes
        )


def bounded_end(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    head: BinlogOffset,
    budget: BatchBudget,
) -> BinlogOffset:
    """Where a batch within `budget` from `start` ends: `head` if it is that close, else the
    start of the last transaction that begins within the budget (or of the first one after
    `start`, when a single transaction is larger than the budget).

    A batch ends between transactions, never inside one: the next batch opens a binlog read of
    its own at that offset, and a read opened inside a transaction would meet row events
    without their table map, and silver would hold half a transaction between the two MERGEs.
    Each transaction begins with a GTID event (MariaDB writes one for every transaction, MySQL
    5.7+ an anonymous one when GTIDs are off), so a bytes-only scan reads event headers alone;
    a change bound also counts the row images of the captured tables' row events, from their
    table maps' widths, without decoding a value (`count_images`). Every row image takes at
    least one byte, so a range of no more bytes than the change bound needs no count. The GTID
    events met also give the end's GTID position (from `start`'s). A dropped connection is
    retried like any binlog read (`source.reconnect_timeout_s`)."""
    return _reconnecting(source)(_bounded_end, source, server_id, start, head, budget)


def _bounded_end(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    head: BinlogOffset,
    budget: BatchBudget,
) -> BinlogOffset:
    with connection(source) as conn:
        sizes = binlog_sizes(conn)
    behind = bytes_behind(start, head, sizes)
    if not budget.exceeded(behind, behind):
        return head
    counting = budget if budget.exceeded(0, behind) else None
    fits: BinlogOffset | None = None  # the end of the most whole transactions within budget
    with closing(_transactions(source, server_id, start, counting)) as transactions:
        for begins, _, changes in transactions:
            if begins <= start:
                continue
            end = min(begins, head)
            size = bytes_behind(start, end, sizes)
            if budget.exceeded(size, changes):
                return fits or end  # a first transaction over the budget is a batch alone
            if end == head or budget.reached(size, changes):
                return end
            fits = end
    # A header-only read that met no transaction at or after the head: its bytes decide.
    return fits if fits is not None and budget.exceeded(behind, 0) else head


def read_splits(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    end: BinlogOffset,
    parts: int,
    min_bytes: int,
) -> list[BinlogOffset]:
    """Where to cut the read of `(start, end]` into at most `parts` reads of about equal bytes
    and at least `min_bytes` each, so that several tasks decode one batch side by side:
    transaction starts (`even_splits`), none past the first statement the range holds.

    Each read then opens the binlog at a transaction start, as a batch does, and decodes every
    row with the schema in force at its own start (`BinlogRange.in_force`): the schema history
    records a DDL only once a batch applied it, so a read starting after a DDL of its own batch
    would decode the rows past it with the schema before. Any statement but BEGIN and COMMIT
    (a DDL, a TRUNCATE, a statement-logged DML) therefore ends the splitting: from the last cut
    before it, one read holds the rest. Event headers alone are read, as for `bounded_end`."""
    return _reconnecting(source)(_read_splits, source, server_id, start, end, parts, min_bytes)


def _read_splits(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    end: BinlogOffset,
    parts: int,
    min_bytes: int,
) -> list[BinlogOffset]:
    with connection(source) as conn:
        sizes = binlog_sizes(conn)
    total = bytes_behind(start, end, sizes)
    parts = min(parts, total // min_bytes)
    if parts < 2:
        return []
    stream = _open(
        source, server_id, start, only_events=[*_TRANSACTION_STARTS, QueryEvent],
        filter_non_implemented_events=False,
    )  # fmt: skip

    def starts() -> Iterator[tuple[BinlogOffset, int]]:
        for event in stream:
            if isinstance(event, QueryEvent):
                if str(event.query).strip().upper() not in ("BEGIN", "COMMIT"):
                    return
                continue
            begins = _transaction_start(event, stream.log_file, start.lineage)
            if begins is None or begins <= start:
                continue
            if begins >= end:
                return
            yield begins, bytes_behind(start, begins, sizes)

    try:
        return even_splits(starts(), total, parts)
    finally:
        stream.close()


def even_splits(
    starts: Iterable[tuple[BinlogOffset, int]], total: int, parts: int
) -> list[BinlogOffset]:
    """Of transaction starts in binlog order, each with its bytes past the range's start, where
    to cut the range's `total` bytes into at most `parts` reads of about equal bytes: each cut
    is the first start at or past an even share of what the cut before left (a transaction
    larger than a share makes fewer, larger reads). Reads `starts` no further than its last
    cut."""
    cuts: list[BinlogOffset] = []
    at = 0  # bytes before the last cut
    for begins, done in starts:
        left = parts - len(cuts)  # reads still to cut the rest into
        if left <= 1:
            break
        if at < done < total and (done - at) * left >= total - at:
            cuts.append(begins)
            at = done
    return cuts


def offset_of_gtid(source: SourceConfig, server_id: int, gtid: str) -> BinlogOffset | None:
    """Where GTID position `gtid` ends in the source's binlog (server coordinates, with `gtid`):
    the start of the first transaction after it, or the head if none follows yet. None when the
    source does not hold that position: purged, or never written there (a replica promoted
    before it received every transaction the stream read: a history that diverged)."""
    return _reconnecting(source)(_offset_of_gtid, source, server_id, gtid)


def _offset_of_gtid(source: SourceConfig, server_id: int, gtid: str) -> BinlogOffset | None:
    for _ in range(2):  # the head, then a dump from the position: one of them finds it
        with connection(source) as conn:
            head = gtid_head(conn)
        if head.gtid and same_position(head.gtid, gtid):
            return head.with_gtid(gtid)
        stream = _open(source, server_id, gtid, only_events=[MariadbGtidEvent])
        try:
            for event in stream:
                begins = event.packet.log_pos - event.packet.event_size
                return BinlogOffset(stream.log_file, begins, gtid)
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                return None
            raise
        finally:
            stream.close()
    return None


def unapplied_since(source: SourceConfig, server_id: int, position: BinlogOffset) -> float | None:
    """When (epoch seconds) the first transaction at or after `position` was written; None if
    the binlog ends there. Reads event headers only, from `position` to that transaction."""
    return _reconnecting(source)(_unapplied_since, source, server_id, position)


def _unapplied_since(source: SourceConfig, server_id: int, position: BinlogOffset) -> float | None:
    with closing(_transactions(source, server_id, position)) as transactions:
        return next((written for _, written, _ in transactions), None)


def _transactions(
    source: SourceConfig, server_id: int, start: BinlogOffset, counting: BatchBudget | None = None
) -> Generator[tuple[BinlogOffset, float, int]]:
    """Each transaction at or after `start` (until the binlog's current end): where it begins
    (on `start`'s lineage, with the GTID position there when `start` has one), when (epoch
    seconds) it was written, and the row changes before it since `start` of the tables
    `counting` counts (0 without it: then only event headers are read). With `counting`, the
    read ends with one more item where the binlog ends, every change counted: the last
    transaction's changes have no next transaction to carry them."""
    events = _TRANSACTION_STARTS if counting is None else [*_TRANSACTION_STARTS, *_ROW_EVENTS]
    stream = _open(
        source, server_id, start, only_events=events, filter_non_implemented_events=False,
        only_schemas=None if counting is None else counting.capture.schemas,
    )  # fmt: skip
    gtid, changes = start.gtid, 0
    widths: dict[int, tuple[Any, tuple[int, ...]]] = {}  # table id: (its table map, widths)
    try:
        for event in stream:
            if isinstance(event, RowsEvent):
                assert counting is not None
                if counting.counts(event.schema, event.table):
                    changes += _row_changes(event, widths)
                continue
            begins = _transaction_start(event, stream.log_file, start.lineage)
            if begins is None or begins < start:
                continue
            yield begins.with_gtid(gtid), float(event.timestamp), changes
            if gtid and isinstance(event, MariadbGtidEvent):
                gtid = gtid_after(gtid, event.gtid)
        if counting is not None:
            ends = BinlogOffset(on_lineage(stream.log_file, start.lineage), stream.log_pos)
            yield ends.with_gtid(gtid), time.time(), changes
    finally:
        stream.close()


def _row_changes(event: RowsEvent, widths: dict[int, tuple[Any, tuple[int, ...]]]) -> int:
    """The row changes `event` holds (an update row is two images)."""
    table_map = event.table_map[event.table_id]
    held = widths.get(event.table_id)
    if held is None or held[0] is not table_map:
        held = widths[event.table_id] = (table_map, image_widths(table_map.columns))
    body = event.packet.read(event.event_size - event.packet.read_bytes)
    images = count_images(held[1], event.columns_present_bitmap, body)
    return images // 2 if isinstance(event, UpdateRowsEvent) else images


def _reconnecting(source: SourceConfig) -> Retrying:
    return reconnecting(f"binlog read on {source.host}:{source.port}", source.reconnect_timeout_s)


#: The events a transaction begins with (`_transactions`); MySQL's anonymous
#: GTID event is decoded by python-mysql-replication as a NotImplementedEvent.
_TRANSACTION_STARTS = [MariadbGtidEvent, GtidEvent, NotImplementedEvent]


def _transaction_start(event: Any, file: str, lineage: int) -> BinlogOffset | None:
    """The offset where `event` begins, if it begins a transaction."""
    if isinstance(event, NotImplementedEvent) and event.event_type != ANONYMOUS_GTID_LOG_EVENT:
        return None
    return BinlogOffset(on_lineage(file, lineage), event.packet.log_pos - event.packet.event_size)


def check_available(source: SourceConfig, start: BinlogOffset, tables: list[str], job: str) -> None:
    """Fail loudly if the source no longer has the binlog file `start` points into: the changes
    of `tables` after it are lost, so only a new snapshot of them, streamed by a new job from
    its high watermarks (the old `job`'s checkpoint points into the lost binlog), makes silver
    whole again."""
    with connection(source) as conn:
        head = current_offset(conn).on(start.lineage)
        files = binlog_files(conn)
    if head < start:
        raise binlog_behind(source, start, head, tables, job)
    if start.binlog_file not in files:
        raise BinlogPurgedError(
            f"the source has purged binlog file {start.binlog_file} (oldest kept: "
            f"{files[0] if files else 'none'}), so the changes after {start} to "
            f"{', '.join(sorted(tables))} are lost to binlake: {lost_remedy(tables, job)}; "
            "and keep binlogs longer on the source (binlog_expire_logs_seconds)"
        )


def binlog_behind(
    source: SourceConfig, start: BinlogOffset, head: BinlogOffset, tables: list[str], job: str
) -> BinlogResetError:
    """The source's binlog ends before the stream's position: read as it is, the stream would
    wait there forever, showing no lag, while the source's changes go by."""
    return BinlogResetError(
        f"the source at {source.host}:{source.port} ends its binlog at {head}, before the "
        f"stream's position {start}: its binlog was reset (RESET MASTER), its log_bin basename "
        "changed, or another server (a promoted replica) answers at that address. binlake's "
        f"positions of {', '.join(sorted(tables))} mean nothing there, and the changes since "
        f"are lost to binlake: {lost_remedy(tables, job)}"
    )


def lost_remedy(tables: list[str], job: str) -> str:
    """What makes silver whole again after the changes of `tables` were lost to stream `job`."""
    names = ",".join(sorted(t.split(".", 1)[1] for t in tables))
    return (
        f"re-snapshot them with `binlake snapshot --tables {names} --reset`, then stream them "
        f"under a new stream.job_name (the checkpoint of {job!r} points into the lost binlog), "
        f"e.g. `binlake stream --set stream.job_name={job}-2`"
    )


def resnapshot_remedy(tables: list[str]) -> str:
    """What makes silver whole again when `tables`' snapshots cannot be trusted on the source the
    stream now reads (a failover): a re-snapshot from it, after which the stream goes on."""
    names = ",".join(sorted(t.split(".", 1)[1] for t in tables))
    return (
        f"Re-snapshot from this source, `binlake snapshot --tables {names} --reset`; the stream "
        "then goes on"
    )


def check_binlog_dump(
    source: SourceConfig, server_id: int, head: BinlogOffset, account: str
) -> None:
    """Open a binlog dump at `head` as the job's readers do and take its first event: the
    server refuses the dump without REPLICATION SLAVE (however the user holds it: directly,
    through a role, through ALL PRIVILEGES). Non-blocking, from the head: nothing is decoded."""
    stream = _open(source, server_id, head)
    try:
        next(iter(stream), None)
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
            raise SourceError(
                f"the source user {account} may not read the binlog (a binlog dump needs "
                f"REPLICATION SLAVE): run `GRANT REPLICATION SLAVE ON *.* TO {account}` "
                "(MariaDB and MySQL alike)"
            ) from None
        raise
    finally:
        stream.close()


def read_changes(
    source: SourceConfig,
    server_id: int,
    tables: list[TableSchema],
    start: BinlogOffset,
    stop: BinlogOffset | None = None,
    blocking: bool = False,
) -> Iterator[RowChange]:
    """Row changes of `tables` with positions in `(start, stop]`, in binlog order (the tables'
    schemas must not change in that range: the snapshot's windows)."""
    for change in _read(_Reader(source, server_id, tables, start, stop), blocking):
        assert isinstance(change, RowChange)
        yield change


def follow_changes(
    source: SourceConfig,
    server_id: int,
    tracker: SchemaTracker,
    start: BinlogOffset,
    stop: BinlogOffset,
    floors: dict[str, BinlogOffset],
) -> Iterator[RowChange | SchemaChange]:
    """Row changes of the tracker's tables and their schema changes in `(start, stop]`, in binlog
    order, each row decoded with the schema in force at its position (the stream's read).

    Rows of a table at or before its floor (every chunk's high watermark already holds them)
    are skipped undecoded: they may predate the schema its snapshot read.
    """
    reader = _Reader(source, server_id, [], start, stop, tracker, floors)
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
#: XIDs end most transactions, so a read stops right at its stop offset; unknown and partial
#: events are read so that an event the library cannot decode stops the read, not vanishes.
_ROW_EVENTS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]
_READ_EVENTS = [*_ROW_EVENTS, XidEvent, NotImplementedEvent, PartialUpdateRowsEvent]
#: A schema-following read also reads DDL (QUERY events; BEGIN is one too, and is skipped).
_FOLLOW_EVENTS = [*_READ_EVENTS, QueryEvent]


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
    ) -> None:
        self.source, self.server_id, self.start, self.stop = source, server_id, start, stop
        self.tracker = tracker
        self.floors = floors or {}
        if tracker is not None:
            tables = list(tracker.captured().values())
            self.schemas = tracker.capture.schemas
        else:
            self.schemas = sorted({t.database for t in tables})
        self.decoders = {(t.database, t.name): _TableDecoder(t) for t in tables}
        self.reached = start  # the end of the last event read: where a retry resumes
        self.table_map: dict[int, Any] = {}
        self.done = False

    def read(self, blocking: bool) -> Iterator[RowChange | SchemaChange]:
        following = self.tracker is not None
        stream = _open(
            self.source,
            self.server_id,
            self.reached,
            blocking=blocking,
            only_events=_FOLLOW_EVENTS if following else _READ_EVENTS,
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
                if isinstance(event, NotImplementedEvent | PartialUpdateRowsEvent):
                    _refuse_unreadable(event)
                elif isinstance(event, QueryEvent):
                    yield from self._schema_changes(event, offset)
                elif isinstance(event, RowsEvent):
                    yield from self._changes(event, offset)
                if offset == self.stop:
                    break
            else:
                self.reached = max(self.reached, self._at(stream))
        finally:
            self.table_map = stream.table_map
            stream.close()
        self.done = self.stop is None or self.reached >= self.stop

    def _at(self, stream: BinLogStreamReader) -> BinlogOffset:
        """Where the read is, on the lineage it started on."""
        return BinlogOffset(on_lineage(stream.log_file, self.start.lineage), stream.log_pos)

    def _schema_changes(self, event: QueryEvent, offset: BinlogOffset) -> Iterator[SchemaChange]:
        if self.tracker is None or offset <= self.start or event.query == "BEGIN":
            return
        default = event.schema.decode() if isinstance(event.schema, bytes) else event.schema
        for table in self.tracker.changed_by_dml(event.query, default):
            floor = self.floors.get(table)
            if floor is None or offset > floor:
                raise _statement_dml(table, offset, event.query)
        for change in self.tracker.on_statement(event.query, default, offset):
            name = split_qualified(change.table)
            old = self.decoders.pop(name, None)
            if change.after is not None:
                self.decoders[name] = _TableDecoder(change.after, old.known if old else None)
            floor = self.floors.get(change.table)
            if floor is None or offset > floor:
                refused = ruled_rename(self.source, change)
                if refused is not None:
                    raise SchemaChangeError(refused)
                yield replace(change, ts=float(event.timestamp))

    def _changes(self, event: RowsEvent, offset: BinlogOffset) -> Iterator[RowChange]:
        decoder = self.decoders.get((event.schema, event.table))
        if offset <= self.start or decoder is None:
            return
        floor = self.floors.get(decoder.table.qualified)
        if floor is not None and offset <= floor:
            return
        table, images = decoder.images(event)
        qualified, ts = table.qualified, event.timestamp
        if isinstance(event, UpdateRowsEvent):
            for index in range(len(images) // 2):
                before, after = images[2 * index], images[2 * index + 1]
                position = ChangePosition(offset, index)
                yield RowChange(qualified, Op.UPDATE, position, before, after, ts, table)
        elif isinstance(event, WriteRowsEvent):
            for index, image in enumerate(images):
                position = ChangePosition(offset, index)
                yield RowChange(qualified, Op.INSERT, position, None, image, ts, table)
        else:
            for index, image in enumerate(images):
                position = ChangePosition(offset, index)
                yield RowChange(qualified, Op.DELETE, position, image, None, ts, table)


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


def first_offset_at_or_after(source: SourceConfig, server_id: int, when: datetime) -> BinlogOffset:
    """The transaction boundary before the first event committed at or after `when` (for the
    `timestamp` startup mode).

    Binlog files hold events in time order, so the scan starts in the newest file that began
    before `when` (found from each file's first event) and reads only transaction boundaries.
    """
    target = when if when.tzinfo else when.replace(tzinfo=UTC)
    epoch = int(target.timestamp())
    with connection(source) as conn:
        files = binlog_files(conn)
    first = next(
        (f for f in reversed(files) if _file_started_at(source, server_id, f) < epoch), files[0]
    )
    # Transaction boundaries carry the commit times; row events are never decoded here.
    stream = _open(
        source, server_id, BinlogOffset(first, 4), only_events=[QueryEvent, XidEvent, RotateEvent]
    )
    try:
        boundary = BinlogOffset(first, 4)
        for event in stream:
            if event.timestamp and event.timestamp >= epoch:
                return boundary
            if _ends_transaction(event):
                boundary = BinlogOffset(stream.log_file, stream.log_pos)
        return boundary
    finally:
        stream.close()


def _file_started_at(source: SourceConfig, server_id: int, file: str) -> int:
    """Epoch seconds of a binlog file's first timestamped event (its format description)."""
    stream = _open(source, server_id, BinlogOffset(file, 4))
    try:
        return next((int(e.timestamp) for e in stream if e.timestamp), 0)
    finally:
        stream.close()


def _ends_transaction(event: Any) -> bool:
    if isinstance(event, XidEvent | RotateEvent):
        return True
    return isinstance(event, QueryEvent) and str(event.query).strip().upper() != "BEGIN"
