"""A stream batch's binlog range: where a batch within its budget ends (`bounded_end`), and
where its read is cut so that several tasks decode it side by side (`read_splits`). Both cut
between transactions, from event headers."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass

from pymysqlreplication.event import QueryEvent

from binlake.config.settings import SourceConfig
from binlake.model.capture import Capture
from binlake.model.offsets import BinlogOffset, bytes_behind
from binlake.mysql.connection import connection
from binlake.mysql.replication import open_stream, reconnecting_read
from binlake.mysql.server import binlog_sizes
from binlake.mysql.transactions import TRANSACTION_STARTS, transaction_start, transactions
from binlake.mysql.xa_transactions import XaTransactions, names

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchBudget:
    """How much one stream batch reads: binlog bytes and row changes of the captured tables
    (`stream.max_bytes_per_batch`, `stream.max_changes_per_batch`; None: no bound)."""

    capture: Capture  # whose row changes count
    max_bytes: int | None = None
    max_changes: int | None = None

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
    return reconnecting_read(source)(_bounded_end, source, server_id, start, head, budget)


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
    counting = budget.capture if budget.exceeded(0, behind) else None
    fits: BinlogOffset | None = None  # the end of the most whole transactions within budget
    with closing(transactions(source, server_id, start, counting)) as read:
        for begins, _, changes in read:
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


def settled_end(
    source: SourceConfig, server_id: int, start: BinlogOffset, end: BinlogOffset, capture: Capture
) -> BinlogOffset:
    """Where a batch from `start` to at most `end` ends so that no XA transaction of `capture`'s
    tables is pending there: `end`, or else the last transaction start before which none was
    (`start` itself while one prepared in the batch's first transaction is pending: the batch
    waits for its `XA COMMIT` or `XA ROLLBACK`).

    A read holds an XA transaction's rows from its prepare to its commit (`xa_transactions`).
    A batch ending between the two would leave them to the next batch, whose read opens after
    the prepare and meets only the rowless commit. By induction nothing is pending at a batch's
    start: the first batch starts at the smallest chunk high watermark, which no XA transaction
    of the table spans (`chunk_reader`), a restart at a batch's end. Event headers, the XA
    events and the captured tables' row-image widths are read, as for `bounded_end`."""
    return reconnecting_read(source)(_settled_end, source, server_id, start, end, capture)


def _settled_end(
    source: SourceConfig, server_id: int, start: BinlogOffset, end: BinlogOffset, capture: Capture
) -> BinlogOffset:
    xa, settled = XaTransactions(), start
    with closing(transactions(source, server_id, start, capture, xa)) as read:
        for begins, _, _ in read:
            if begins >= end:
                break
            if begins > start and not xa.touching():
                settled = begins
    pending = xa.touching()
    if not pending:
        return end
    log.info(
        "the stream's batch ends at %s, before XA transactions %s, prepared and not yet "
        "committed or rolled back", settled, names(pending),
    )  # fmt: skip
    return settled


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
    return reconnecting_read(source)(_read_splits, source, server_id, start, end, parts, min_bytes)


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
    stream = open_stream(
        source, server_id, start, only_events=[*TRANSACTION_STARTS, QueryEvent],
        filter_non_implemented_events=False,
    )  # fmt: skip

    def starts() -> Iterator[tuple[BinlogOffset, int]]:
        for event in stream:
            if isinstance(event, QueryEvent):
                if str(event.query).strip().upper() not in ("BEGIN", "COMMIT"):
                    return
                continue
            begins = transaction_start(event, stream.log_file, start.lineage)
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
