"""The binlog read by transaction: where each begins, when it was written and how many row
changes of a capture it holds, from event headers (and row-image widths) without decoding a
value. What the retention warning, the `timestamp` startup mode and the batch bounds read."""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import closing
from datetime import UTC, datetime
from typing import Any

from pymysqlreplication.constants.BINLOG import ANONYMOUS_GTID_LOG_EVENT
from pymysqlreplication.event import (
    GtidEvent,
    MariadbGtidEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import PartialUpdateRowsEvent, RowsEvent, UpdateRowsEvent

from binlake.config.settings import SourceConfig
from binlake.model.capture import Capture
from binlake.model.offsets import BinlogOffset, on_lineage
from binlake.mysql.connection import connection
from binlake.mysql.gtids import GTID_TAGGED_LOG_EVENT, gtid_after_event
from binlake.mysql.replication import ROW_EVENTS, open_stream, reconnecting_read
from binlake.mysql.row_images import JSON, count_images, count_partial_updates, image_widths
from binlake.mysql.server import binlog_files
from binlake.mysql.xa_transactions import XaTransactions

#: The events a transaction begins with (`transactions`); MySQL's anonymous and tagged
#: GTID events are decoded by python-mysql-replication as NotImplementedEvents.
TRANSACTION_STARTS = [MariadbGtidEvent, GtidEvent, NotImplementedEvent]
_UNDECODED_STARTS = (ANONYMOUS_GTID_LOG_EVENT, GTID_TAGGED_LOG_EVENT)


def transaction_start(event: Any, file: str, lineage: int) -> BinlogOffset | None:
    """The offset where `event` begins, if it begins a transaction."""
    if isinstance(event, NotImplementedEvent) and event.event_type not in _UNDECODED_STARTS:
        return None
    return BinlogOffset(on_lineage(file, lineage), event.packet.log_pos - event.packet.event_size)


def transactions(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    counting: Capture | None = None,
    xa: XaTransactions | None = None,
) -> Generator[tuple[BinlogOffset, float, int]]:
    """Each transaction at or after `start` (until the binlog's current end): where it begins
    (on `start`'s lineage, with the GTID position there when `start` has one, unknown after a
    transaction whose GTID python-mysql-replication cannot decode: `gtid_after_event`), when
    (epoch seconds) it was written, and the row changes before it since `start` of the tables
    `counting` captures (0 without it: then only event headers are read). With `counting`, the
    read ends with one more item where the binlog ends, every change counted: the last
    transaction's changes have no next transaction to carry them. `xa` (with `counting`) is fed
    the XA transactions met, each marked if it changes a table `counting` captures: when a
    transaction is yielded, it holds the state before that transaction."""
    events = TRANSACTION_STARTS
    if counting is not None:
        events = [*TRANSACTION_STARTS, *ROW_EVENTS, PartialUpdateRowsEvent]
    if xa is not None:
        events = [*events, XAPrepareEvent, QueryEvent]
    stream = open_stream(
        source, server_id, start, only_events=events, filter_non_implemented_events=False,
        only_schemas=None if counting is None else counting.schemas,
    )  # fmt: skip
    gtid, changes = start.gtid, 0
    widths: dict[int, tuple[Any, tuple[int, ...]]] = {}  # table id: (its table map, widths)
    try:
        for event in stream:
            if isinstance(event, RowsEvent):
                assert counting is not None
                if counting.captures(event.schema, event.table):
                    changes += _row_changes(event, widths)
                    if xa is not None and xa.holding:
                        xa.touch()
                continue
            if xa is not None:
                at = BinlogOffset(on_lineage(stream.log_file, start.lineage), stream.log_pos)
                xa.observe(event, at)
                if isinstance(event, XAPrepareEvent | QueryEvent):
                    continue
            begins = transaction_start(event, stream.log_file, start.lineage)
            if begins is None or begins < start:
                continue
            yield begins.with_gtid(gtid), float(event.timestamp), changes
            if gtid:
                gtid = gtid_after_event(gtid, event)
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
    if isinstance(event, PartialUpdateRowsEvent):
        json_columns = sum(c.type == JSON for c in table_map.columns)
        return count_partial_updates(held[1], json_columns, body)
    images = count_images(held[1], event.columns_present_bitmap, body)
    return images // 2 if isinstance(event, UpdateRowsEvent) else images


def unapplied_since(source: SourceConfig, server_id: int, position: BinlogOffset) -> float | None:
    """When (epoch seconds) the first transaction at or after `position` was written; None if
    the binlog ends there. Reads event headers only, from `position` to that transaction."""
    return reconnecting_read(source)(_unapplied_since, source, server_id, position)


def _unapplied_since(source: SourceConfig, server_id: int, position: BinlogOffset) -> float | None:
    with closing(transactions(source, server_id, position)) as read:
        return next((written for _, written, _ in read), None)


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
    stream = open_stream(
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
    stream = open_stream(source, server_id, BinlogOffset(file, 4))
    try:
        return next((int(e.timestamp) for e in stream if e.timestamp), 0)
    finally:
        stream.close()


def _ends_transaction(event: Any) -> bool:
    if isinstance(event, XidEvent | RotateEvent):
        return True
    return isinstance(event, QueryEvent) and str(event.query).strip().upper() != "BEGIN"
