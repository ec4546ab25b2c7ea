"""The chunk reader: one chunk, lock-free, exactly as of its high watermark.

Flink CDC's SnapshotSplitReader. Step 1, the low watermark; step 2, the SELECT of the chunk's
range; step 3, the high watermark; step 4, the binlog in (LW, HW] replayed onto the selected rows.

The low watermark must not be later than the SELECT's read view: a transaction written to the
binlog before LW but not yet committed in the storage engine when the view opens would be in
neither the rows nor the replay. A window that starts earlier is always safe (the replay applies
each changed key's last image), so LW only has to be provably at or before the view:

- MariaDB and Percona Server publish the binlog position of the snapshot itself: `START
  TRANSACTION WITH CONSISTENT SNAPSHOT` then `binlog_snapshot_file/_position` (the mechanism
  behind mysqldump --single-transaction --master-data). LW is exact.
- MySQL has no such position. There LW is the binlog head read before the view, after waiting
  until every transaction before it has committed in the engine (`_settled_offset`, through
  GTIDs; validation requires gtid_mode=ON there).

Rows stay columnar: the SELECT's rows go to Arrow column by column, and the replay only touches
the keys the binlog window changed (the rows of those keys are replaced by their state at HW).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from binlake.config.settings import SourceConfig
from binlake.errors import SourceError
from binlake.model.changes import Row, RowChange, RowKey, apply_changes
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.model.typemap import ColumnMapping, map_table, select_expression, split_key
from binlake.mysql.binlog import read_changes
from binlake.mysql.connection import BulkDriver, bulk_connect, connection, query
from binlake.mysql.gtids import gtid_head
from binlake.mysql.reconnect import is_transient, reconnecting
from binlake.mysql.server import current_offset, reports_snapshot_offset, snapshot_offset
from binlake.mysql.xa_transactions import XaTransactions, Xid, names, prepared_xids
from binlake.snapshot.chunks import ChunkRange, SortKey, chunk_end
from binlake.snapshot.planner import KeySteps, first_value, key_order

log = logging.getLogger(__name__)

#: How long a chunk on MySQL waits for the transactions before its low watermark to commit.
#: Semi-synchronous replication alone may hold a commit for rpl_semi_sync_source_timeout (10 s).
COMMIT_WAIT_S = 60
#: How long a chunk waits for XA transactions prepared across its watermarks to end.
XA_WAIT_S = 60.0
_BEFORE_UUID = re.compile(r"(?=[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})", re.IGNORECASE)


@dataclass(frozen=True)
class ChunkRead:
    chunk_id: int
    range: ChunkRange  # what the read holds: its chunk, or an open-ended one cut short
    lw: BinlogOffset
    hw: BinlogOffset
    columns: list[pa.Array]  # the chunk at HW, one array per table column
    replayed: int  # binlog changes of this table read in (LW, HW]

    @property
    def rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0


def select_sql(table: TableSchema, chunk: ChunkRange) -> str:
    """The chunk's SELECT; bounds are bound parameters, names are quoted."""
    columns = ", ".join(select_expression(c) for c in table.columns)
    k = split_key(table.column(table.split_column)).sql
    conditions = []
    if chunk.start is not None:
        conditions.append(f"{k} >= %s")
    if chunk.end is not None:
        conditions.append(f"{k} < %s")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"SELECT {columns} FROM {table.sql_name}{where}"


def _bounds(chunk: ChunkRange) -> tuple[Any, ...]:
    return tuple(v for v in (chunk.start, chunk.end) if v is not None)


@dataclass(frozen=True)
class TailCut:
    """How an open-ended chunk (`[start, +inf)`, the plan's last) is read: its first `rows`
    keys, ended before the next (`KeySteps.key_after_chunk`, `chunks.chunk_end`), keys compared
    by `order`. A table appended to while its snapshot runs is read in chunks of about `rows`
    keys that way, never in one read of everything appended."""

    rows: int
    order: SortKey | None = None


def _select_at_snapshot(
    bulk: Any, table: TableSchema, chunk: ChunkRange, tail: TailCut | None = None
) -> tuple[BinlogOffset | None, ChunkRange, tuple[tuple[Any, ...], ...]]:
    """The chunk's rows in one consistent snapshot, that snapshot's binlog position (MariaDB
    and Percona Server; None on MySQL), and the range the rows are of: the chunk's own, or with
    `tail`, an open-ended chunk cut short in that same snapshot, so the cut and the rows agree.

    The transaction is REPEATABLE READ whatever the server's default: under READ UNCOMMITTED the
    SELECT would read other transactions' uncommitted rows (which no binlog event ever takes out
    again), under READ COMMITTED InnoDB ignores WITH CONSISTENT SNAPSHOT, and under SERIALIZABLE
    the SELECT would take shared locks.
    """
    cur = bulk.cursor()
    try:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%%'")
        at = snapshot_offset(cur.fetchall())
        if tail is not None and chunk.end is None:
            chunk = ChunkRange(chunk.start, _tail_end(cur, table, chunk.start, tail))
        cur.execute(select_sql(table, chunk), _bounds(chunk))
        rows = cur.fetchall()
        cur.execute("COMMIT")
    finally:
        cur.close()
    return at, chunk, rows


def _tail_end(cur: Any, table: TableSchema, start: Any, tail: TailCut) -> Any:
    """Where the open-ended chunk from `start` ends in the read's snapshot (None: it holds no
    more than `tail.rows` keys, so it stays open)."""

    def fetch(sql: str, args: tuple[Any, ...]) -> Any:
        cur.execute(sql, args)
        return first_value(cur.fetchall())

    steps = KeySteps(table, tail.rows, fetch)
    return chunk_end(start, steps.key_after_chunk, steps.next_key_above, tail.order)


def owned_gtid_set(owned: str) -> str:
    """`@@GLOBAL.gtid_owned` as a GTID set: MySQL prints each owned GTID with its owner's thread
    (`uuid:7#31:8#33`, the next UUID straight after the last number), WAIT_FOR_EXECUTED_GTID_SET
    takes `uuid:7:8,...`. A UUID starts 8 hex digits before its first dash, so it is found even
    right after a number's digits."""
    return ",".join(re.sub(r"#\d+", "", part) for part in _BEFORE_UUID.split(owned) if part)


def _settled_offset(conn: pymysql.Connection) -> BinlogOffset:
    """A binlog position every transaction before which is committed in the storage engine: the
    low watermark on MySQL, read before the chunk's read view opens.

    MySQL's group commit writes a transaction to the binlog in its flush stage and commits it in
    InnoDB later, in the commit stage (after the sync stage and any semi-synchronous wait).
    `SHOW MASTER STATUS` reads the position under the flush stage's lock, so the transactions
    before it may not all be visible yet. Their GTIDs close the gap:

    1. A transaction's GTID is owned from its assignment (in the flush stage, before its events
       are written; or at `SET gtid_next`, earlier still) until it commits, when it moves
       to gtid_executed, after the engine commit (sql/binlog.cc: process_commit_stage_queue
       commits the group in the engines, then Gtid_state::update_commit_group; finish_commit
       does the same per thread without binlog_order_commits).
    2. `@@GLOBAL.gtid_owned` is read under the GTID state's write lock, which the move holds
       shared: the value read is a state in which each GTID is owned or executed, never
       neither.
    3. Read after the head, gtid_owned therefore holds every transaction before the head that
       has not committed yet; once WAIT_FOR_EXECUTED_GTID_SET returns for it, every transaction
       before the head has committed, and a read view opened afterwards sees them all.

    The owned set may hold more (transactions after the head, a replica applier's transaction
    in progress): waiting for those costs time, not correctness, and gives up after
    `COMMIT_WAIT_S` with an error rather than wait forever.
    """
    head = current_offset(conn)
    owned = owned_gtid_set(str(query(conn, "SELECT @@GLOBAL.gtid_owned")[0][0] or ""))
    if owned:
        wait = "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)"
        if query(conn, wait, (owned, COMMIT_WAIT_S))[0][0] != 0:
            raise SourceError(
                f"transactions {owned} stayed uncommitted on the source for {COMMIT_WAIT_S} s "
                "(a long replica-applier transaction, or a session holding gtid_next): a chunk "
                "waits for in-flight commits before its read view on MySQL; retry once they "
                "have committed"
            )
    return head


class _XaAcross(Exception):
    """XA transactions prepared before a chunk's low watermark and ended after it: the chunk's
    rows lack them and its window holds only their commit, so the chunk is read again."""

    def __init__(self, xids: set[Xid]) -> None:
        super().__init__(names(xids))
        self.xids = xids


class _XaWait:
    """One chunk's bounded wait for prepared XA transactions to end (`XA_WAIT_S`, with backoff
    and a log line now and then), then an error naming them and the remedy.

    No XA transaction may be prepared before a watermark and end after it: before LW, the
    SELECT cannot see it and the window meets only its rowless `XA COMMIT`; before HW, the
    stream, which starts at the smallest HW, would meet only that too. So a chunk whose LW an XA
    transaction spans is read again, and a chunk's HW moves on until the table's XA
    transactions prepared in its window have ended (`ChunkReader._window`)."""

    def __init__(self, what: str) -> None:
        self.what, self.began, self.pauses = what, time.monotonic(), 0

    def pause(self, xids: set[Xid], where: str) -> None:
        waited = time.monotonic() - self.began
        if waited >= XA_WAIT_S:
            raise SourceError(
                f"{self.what}: XA transactions {names(xids)} stayed prepared on the source for "
                f"{XA_WAIT_S:.0f} s across the chunk's {where}, whose rows cannot hold a "
                "transaction prepared but not yet committed: end them with XA COMMIT or XA "
                "ROLLBACK (XA RECOVER lists them), then run the same command again"
            )
        if self.pauses % 20 == 0:
            log.warning(
                "%s: waiting for prepared XA transactions %s to end (%.0f s so far)",
                self.what, names(xids), waited,
            )  # fmt: skip
        self.pauses += 1
        time.sleep(min(1.0, 0.05 * 2**self.pauses))


class ChunkReader:
    """Reads chunks of one table over one pair of connections, kept for all its chunks: a
    PyMySQL one for watermarks and collation weights, a bulk one for the SELECTs (opening them
    per chunk cost half the reader's time, in TLS set-up). The bulk one is MySQLdb where it is
    installed, else PyMySQL (`bulk_driver`); `driver` forces one (the benchmark, the tests).
    With `tail_rows`, an open-ended chunk is read only as far as its first `tail_rows` keys
    (`TailCut`); without it, whole."""

    def __init__(
        self,
        source: SourceConfig,
        table: TableSchema,
        server_id: int,
        driver: BulkDriver | None = None,
        lineage: int = 0,
        tail_rows: int | None = None,
    ) -> None:
        self.source = source
        self.table = table
        self.server_id = server_id
        self.driver = driver
        self.lineage = lineage  # the lake's lineage of the source's binlog (`lineage`)
        self.tail_rows = tail_rows
        self.mappings = map_table(table)
        self._stack = ExitStack()

    def __enter__(self) -> ChunkReader:
        # PyMySQL's connection reconnects by itself (`source.Connection.query`).
        self.conn = self._stack.enter_context(connection(self.source))
        self.bulk: Any = None
        self.order = key_order(self.conn, self.table)
        self.tail = None if self.tail_rows is None else TailCut(self.tail_rows, self.order)
        # MariaDB and Percona Server: LW from the snapshot itself; MySQL: waited for, before it.
        self.exact_lw = reports_snapshot_offset(self.conn)
        return self

    def __exit__(self, *exc: object) -> None:
        self._drop_bulk()
        self._stack.close()

    def read(self, chunk_id: int, chunk: ChunkRange) -> ChunkRead:
        """The chunk at its high watermark. A connection the source drops on the way (a restart,
        a `KILL`) costs a new read on a new connection: with its own watermarks it is as exact
        as the first would have been, so nothing of the failed one is kept."""
        what = f"reading chunk {chunk_id} of {self.table.qualified}"
        retrying = reconnecting(what, self.source.reconnect_timeout_s)
        waiting = _XaWait(what)
        while True:
            try:
                return retrying(self._read_on_live_connection, chunk_id, chunk, waiting)
            except _XaAcross as across:  # read again, with watermarks of its own
                waiting.pause(across.xids, "low watermark")

    def _read_on_live_connection(
        self, chunk_id: int, chunk: ChunkRange, waiting: _XaWait
    ) -> ChunkRead:
        if self.bulk is None:
            self.bulk = bulk_connect(self.source, self.driver)
        try:
            return self._read(chunk_id, chunk, waiting)
        except Exception as exc:
            if is_transient(exc):
                self._drop_bulk()
            raise

    def _drop_bulk(self) -> None:
        if self.bulk is not None:
            with contextlib.suppress(Exception):  # already broken: closing it is a formality
                self.bulk.close()
            self.bulk = None

    def _read(self, chunk_id: int, chunk: ChunkRange, waiting: _XaWait) -> ChunkRead:
        table, name = self.table, self.table.qualified
        log.debug("Snapshot step 1 - Determining low watermark for %s chunk %d", name, chunk_id)
        settled = None if self.exact_lw else _settled_offset(self.conn)
        at, chunk, raw = _select_at_snapshot(self.bulk, table, chunk, self.tail)
        found = at or settled
        if found is None:
            raise SourceError(
                f"the source stopped reporting binlog_snapshot_position (chunk {chunk_id} of "
                f"{name}): it reported it when the reader started"
            )
        lw = found.on(self.lineage)
        log.debug(
            "Snapshot step 2 - Read %d rows of %s chunk %d %s", len(raw), name, chunk_id, chunk
        )
        # Pending now, after the read view: each is in the window, or spans LW (`_XaWait`).
        prepared = prepared_xids(self.conn)
        # With its GTID position (MariaDB's, or MySQL's GTID set): a promoted replica must hold
        # it (`lineage.locate`).
        hw = gtid_head(self.conn).on(self.lineage)
        log.debug("Snapshot step 3 - High watermark %s for %s chunk %d", hw, name, chunk_id)
        log.debug("Snapshot step 4 - Replaying (%s, %s] onto %s chunk %d", lw, hw, name, chunk_id)
        hw, changes = self._window(lw, hw, prepared, waiting)
        if not changes:
            return ChunkRead(chunk_id, chunk, lw, hw, _columns(self.mappings, raw), 0)
        split, order = table.split_index, self.order
        if order is not None:
            order.prime(
                image[split]
                for change in changes
                for image in (change.before, change.after)
                if image is not None
            )
        # The final state at HW of every key the window touched (None: deleted or moved away).
        touched: dict[RowKey, Row | None] = {
            table.key_of(image): None
            for change in changes
            for image in (change.before, change.after)
            if image is not None
        }
        touched.update(
            apply_changes({}, changes, table.key_of, lambda r: chunk.contains(r[split], order))
        )
        selected = _columns(self.mappings, raw)
        kept = untouched_rows(self.mappings, table, raw, selected, touched)
        replaced = [row for row in touched.values() if row is not None]
        columns = [
            pa.concat_arrays([column.filter(kept), m.to_arrow([r[i] for r in replaced], True)])
            for i, (m, column) in enumerate(zip(self.mappings, selected, strict=True))
        ]
        return ChunkRead(chunk_id, chunk, lw, hw, columns, len(changes))

    def _window(
        self, lw: BinlogOffset, hw: BinlogOffset, prepared: set[Xid], waiting: _XaWait
    ) -> tuple[BinlogOffset, list[RowChange]]:
        """The HW and the table's changes in (LW, HW], an XA transaction's at its commit.

        `prepared` (XA RECOVER, read between the read view and HW) holding an XID the window
        never saw prepared, or the window committing one, means a transaction prepared before
        LW ended after it (`_XaAcross`). While an XA transaction of the table prepared in the
        window is still pending at HW, HW moves on to the head, the window with it."""
        xa = XaTransactions()
        read = (
            []
            if hw <= lw
            else list(read_changes(self.source, self.server_id, [self.table], lw, hw, xa=xa))
        )
        across = (prepared - xa.seen) | xa.orphans
        if across:
            raise _XaAcross(across)
        while xa.touching():
            waiting.pause(set(xa.touching()), "high watermark")
            head = gtid_head(self.conn).on(self.lineage)
            if head > hw:
                read += read_changes(self.source, self.server_id, [self.table], hw, head, xa=xa)
                hw = head
        return hw, read


def untouched_rows(
    mappings: Sequence[ColumnMapping],
    table: TableSchema,
    raw: Sequence[Row],
    selected: Sequence[pa.Array],
    touched: Mapping[RowKey, object],
) -> pa.BooleanArray:
    """Which selected rows (`raw`, and `selected`, their Arrow columns) keep their values: those
    whose key the binlog window did not touch.

    A key is compared as the window's keys are, normalised in Python, but only on the rows whose
    first key column holds one of the touched keys' first values: one C-level `is_in` over the
    chunk's Arrow column finds them (checking every row of a chunk in Python cost more than its
    binlog replay). Floating-point keys are all compared: Arrow tells -0.0 from 0.0, Python
    does not."""
    first = table.key_indexes[0]
    if pa.types.is_floating(selected[first].type):
        candidates: Iterable[int] = range(len(raw))
    else:
        values = mappings[first].to_arrow([key[0] for key in touched], normalized=True)
        hits = pc.fill_null(pc.is_in(selected[first], value_set=values), False)
        candidates = pc.indices_nonzero(hits).to_pylist()
    normalizers = [(i, mappings[i].normalize) for i in table.key_indexes]
    kept = [True] * len(raw)
    for index in candidates:
        if tuple(n(raw[index][i]) for i, n in normalizers) in touched:
            kept[index] = False
    return pa.array(kept, pa.bool_())


def _columns(mappings: tuple[ColumnMapping, ...], rows: Any) -> list[pa.Array]:
    """Row tuples of raw driver values → one Arrow array per column."""
    transposed = list(zip(*rows, strict=True)) if rows else [() for _ in mappings]
    return [m.to_arrow(values) for m, values in zip(mappings, transposed, strict=True)]
