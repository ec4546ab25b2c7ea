"""The binlog reader: python-mysql-replication behind a small typed boundary.

It yields `RowChange`s of the captured tables, positioned and normalised, between a start offset
(exclusive) and an optional stop offset (inclusive). Row events of other tables are skipped by the
library before their rows are decoded (`only_tables`/`only_schemas`), which is where the cost is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    RowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from binlake.changes import Op, Row, RowChange
from binlake.config import SourceConfig
from binlake.errors import BinlogPurgedError, SourceError
from binlake.offsets import BinlogOffset, ChangePosition
from binlake.row_images import ImageDecoder, UnsupportedLayout, decode_images, image_decoder
from binlake.source import Connection, TableSchema, binlog_files, connection
from binlake.typemap import map_table

log = logging.getLogger(__name__)

# Errors the server sends on the replication connection.
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236  # e.g. "Could not find first log file name"
ER_CONNECTION_KILLED = 4052  # MariaDB: another replica connected with our server_id


class _TableDecoder:
    """One captured table's row images → normalised row tuples.

    Row bytes are decoded by `row_images` (one generated decoder per table map); only layouts
    it leaves to the library (MySQL's binary JSON, pre-5.6 temporal types) go through
    python-mysql-replication's own decoding and the column normalisers.
    """

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        self.normalizers = tuple(m.normalize for m in map_table(table))
        self._decoders: dict[int, ImageDecoder | None] = {}  # by table-map identity

    def images(self, event: RowsEvent) -> list[Row]:
        """Every row image of `event` in order (an update row: its before, then its after)."""
        table_map = event.table_map[event.table_id]
        key = id(table_map)
        if key not in self._decoders:
            self._decoders[key] = self._fast_decoder(event)
        decoder = self._decoders[key]
        if decoder is None:
            return [self._row(values) for row in event.rows for values in _images_of(row)]
        self._require_full_images(event)
        body = event.packet.read(event.event_size - event.packet.read_bytes)
        return list(decode_images(decoder, body))

    def _fast_decoder(self, event: RowsEvent) -> ImageDecoder | None:
        try:
            return image_decoder(self.table, event.columns)
        except UnsupportedLayout as exc:
            log.info("%s: decoded by python-mysql-replication (%s)", self.table.qualified, exc)
            return None

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

    def _row(self, values: Mapping[str, Any]) -> Row:
        # The image lists every column in table order (binlog_row_image=FULL); names may be
        # UNKNOWN_COLn without binlog_row_metadata=FULL, so map by position, not by name.
        raw = list(values.values())
        if len(raw) != len(self.normalizers):
            raise SourceError(
                f"a binlog row of {self.table.qualified} has {len(raw)} columns, the captured "
                f"schema {len(self.normalizers)}: the table's schema changed; re-snapshot it"
            )
        return tuple(n(v) for n, v in zip(self.normalizers, raw, strict=True))


def _images_of(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if "values" in row:
        return [row["values"]]
    return [row["before_values"], row["after_values"]]


def _open(
    source: SourceConfig, server_id: int, start: BinlogOffset, **options: Any
) -> BinLogStreamReader:
    """A replication connection reading from `start` (non-blocking unless `blocking=True`)."""
    options.setdefault("blocking", False)
    return BinLogStreamReader(
        connection_settings={
            "host": source.host,
            "port": source.port,
            "user": source.user,
            "password": source.resolve_password(),
            "charset": "utf8mb4",
        },
        server_id=server_id,
        resume_stream=True,
        log_file=start.file,
        log_pos=start.pos,
        # File/position resume: is_mariadb=True without GTIDs silently streams from the oldest
        # binlog, so MariaDB is read with the MySQL protocol path (FIELD-NOTES).
        is_mariadb=False,
        enable_logging=False,
        pymysql_wrapper=Connection,
        **options,
    )


def check_available(source: SourceConfig, start: BinlogOffset) -> None:
    """Fail loudly if the source no longer has the binlog file `start` points into."""
    with connection(source) as conn:
        files = binlog_files(conn)
    if start.file not in files:
        raise BinlogPurgedError(
            f"the source has purged binlog file {start.file} (oldest kept: "
            f"{files[0] if files else 'none'}), so the changes after {start} are lost to "
            "binlake: re-snapshot the tables (delete the lake's _system folder and bronze/silver "
            "tables, then run `binlake snapshot`), and keep binlogs longer "
            "(binlog_expire_logs_seconds)"
        )


def read_changes(
    source: SourceConfig,
    server_id: int,
    tables: list[TableSchema],
    start: BinlogOffset,
    stop: BinlogOffset | None = None,
    blocking: bool = False,
) -> Iterator[RowChange]:
    """Row changes of `tables` with positions in `(start, stop]`, in binlog order.

    Non-blocking reads end at the binlog's current end; blocking reads wait for new events.
    """
    decoders = {t.name: _TableDecoder(t) for t in tables}
    stream = _open(
        source,
        server_id,
        start,
        blocking=blocking,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=sorted({t.database for t in tables}),
        only_tables=sorted(decoders),
    )
    try:
        yield from _changes(stream, decoders, tables[0].database, start, stop)
    except pymysql.err.OperationalError as exc:
        raise _replication_error(exc, start, server_id) from None
    finally:
        stream.close()


def _changes(
    stream: BinLogStreamReader,
    decoders: dict[str, _TableDecoder],
    database: str,
    start: BinlogOffset,
    stop: BinlogOffset | None,
) -> Iterator[RowChange]:
    for event in stream:
        offset = BinlogOffset(stream.log_file, stream.log_pos)
        if stop is not None and offset > stop:
            return
        if offset <= start or event.schema != database:
            continue
        decoder = decoders.get(event.table)
        if decoder is None:
            continue
        images = decoder.images(event)
        qualified, ts = decoder.table.qualified, event.timestamp
        if isinstance(event, UpdateRowsEvent):
            for index in range(len(images) // 2):
                before, after = images[2 * index], images[2 * index + 1]
                position = ChangePosition(offset, index)
                yield RowChange(qualified, Op.UPDATE, position, before, after, ts)
        elif isinstance(event, WriteRowsEvent):
            for index, image in enumerate(images):
                yield RowChange(
                    qualified, Op.INSERT, ChangePosition(offset, index), None, image, ts
                )
        else:
            for index, image in enumerate(images):
                yield RowChange(
                    qualified, Op.DELETE, ChangePosition(offset, index), image, None, ts
                )


def _replication_error(
    exc: pymysql.err.OperationalError, start: BinlogOffset, server_id: int
) -> SourceError:
    code = exc.args[0] if exc.args else None
    if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
        return BinlogPurgedError(
            f"the source cannot serve its binlog from {start} ({exc.args[-1]}): the file was "
            "purged or the offset is invalid; re-snapshot the tables"
        )
    if code == ER_CONNECTION_KILLED:
        return SourceError(
            f"another binlog reader connected with server_id {server_id} and evicted this one: "
            "give every binlake job its own source.server_id_range"
        )
    return SourceError(f"reading the binlog from {start} failed: {exc.args[-1]}")


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
