"""XA transactions in the binlog: rows held from their `XA PREPARE` until their `XA COMMIT`.

A two-phase (XA) transaction reaches the binlog twice. `XA PREPARE` writes its row events, closed
by an XA_PREPARE event (type 38) instead of an XID; its `XA COMMIT` or `XA ROLLBACK`, maybe much
later and from another session, is a transaction of its own: one QUERY event, no rows. (`XA
COMMIT ... ONE PHASE` is an ordinary transaction ending in an XID, or on MySQL an XA_PREPARE
event marked one-phase.) MariaDB flags the GTID event that opens a prepared transaction
(`FL_PREPARED_XA`); MySQL opens it with an `XA START` query.

So a read holds an XA transaction's rows by XID and gives them out only at its commit,
positioned there (they sort after everything committed before, and the high-watermark filter
judges them by the commit's offset), and drops them at its rollback. A read that meets a commit
of an XID it never saw prepared (`orphans`) started between that prepare and its commit: it has
lost the rows, and the caller decides what that means (a chunk reads again). `XaTransactions`
is that bookkeeping alone, fed event by event by the reader (`binlake.mysql.binlog`) and by the
batch planner's scan (`batch_ranges.settled_end`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pymysql
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, XAPrepareEvent, XidEvent

from binlake.errors import SourceError
from binlake.model.changes import RowChange
from binlake.model.offsets import BinlogOffset, ChangePosition
from binlake.mysql.connection import query
from binlake.mysql.server import ER_SPECIFIC_ACCESS_DENIED

#: MariaDB's GTID event flag of a transaction that ends in XA PREPARE (log_event.h).
FL_PREPARED_XA = 64
#: How the server logs an XID in XA statements: `X'gtrid',X'bqual',formatID` (hex, as
#: `XID::serialize` writes it on MariaDB and MySQL alike).
_XA_STATEMENT = re.compile(
    r"\s*XA\s+(START|BEGIN|END|COMMIT|ROLLBACK)\s+X'([0-9A-F]*)'\s*,\s*X'([0-9A-F]*)'\s*,\s*(\d+)"
    r"(\s+ONE\s+PHASE)?",
    re.IGNORECASE,
)


@dataclass(frozen=True, order=True)
class Xid:
    """An XA transaction's identity: format id, global transaction id and branch qualifier."""

    format_id: int
    gtrid: bytes
    bqual: bytes = b""

    def __str__(self) -> str:
        """As `XA COMMIT` takes it (printable parts quoted, others in hex)."""
        parts = [_literal(self.gtrid)]
        if self.bqual or self.format_id != 1:
            parts.append(_literal(self.bqual))
        if self.format_id != 1:
            parts.append(str(self.format_id))
        return ",".join(parts)


def _literal(part: bytes) -> str:
    text = part.decode("ascii", "replace")
    if text.isprintable() and "'" not in text and "\\" not in text and text.isascii():
        return f"'{text}'"
    return f"X'{part.hex()}'"


def xa_statement(query: str) -> tuple[str, Xid] | None:
    """(`START`/`END`/`COMMIT`/`ONE PHASE`/`ROLLBACK`, its XID) if `query` is an XA statement as
    the binlog logs it, else None."""
    found = _XA_STATEMENT.match(query)
    if found is None:
        return None
    verb, gtrid, bqual, format_id, one_phase = found.groups()
    verb = "START" if verb.upper() == "BEGIN" else "ONE PHASE" if one_phase else verb.upper()
    return verb, Xid(int(format_id), bytes.fromhex(gtrid), bytes.fromhex(bqual))


def prepared_xids(conn: pymysql.Connection) -> set[Xid]:
    """The XA transactions prepared on the source and not yet committed or rolled back, of every
    user (`XA RECOVER`: no privilege on MariaDB, XA_RECOVER_ADMIN on MySQL 8)."""
    try:
        return recovered_xids(query(conn, "XA RECOVER"))
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
            raise SourceError(
                "the source refused XA RECOVER, which a snapshot asks to keep its watermarks "
                "clear of prepared XA transactions: GRANT XA_RECOVER_ADMIN ON *.* to the "
                "source user (MySQL 8)"
            ) from None
        raise


def recovered_xids(rows: Iterable[tuple[object, ...]]) -> set[Xid]:
    """`XA RECOVER`'s rows (formatID, gtrid_length, bqual_length, data) as XIDs."""
    found = set()
    for format_id, gtrid_length, bqual_length, data in rows:
        raw = data if isinstance(data, bytes) else str(data).encode()
        g, b = int(str(gtrid_length)), int(str(bqual_length))
        found.add(Xid(int(str(format_id)), raw[:g], raw[g : g + b]))
    return found


@dataclass
class Prepared:
    """A prepared XA transaction: where its XA_PREPARE event ends, the rows it holds, and whether
    it touched a table the read captures (a read that decodes no rows marks it with `touch`)."""

    at: BinlogOffset | None = None  # set at its prepare
    rows: list[RowChange] = field(default_factory=list)
    touches: bool = False


@dataclass
class XaTransactions:
    """The XA transactions one read has met, and the rows it holds for them.

    Feed it in binlog order: `begin` at each transaction's start, `hold` (or `touch`) for the
    row changes of an open XA transaction (`holding`), `prepared` at an XA_PREPARE event, `ended`
    at an XID event, `resolved` at an XA COMMIT/ROLLBACK statement. What `begin`, `prepared`,
    `ended` and `resolved` return is committed and goes out in that order."""

    #: Each XID prepared and not yet resolved in this read.
    pending: dict[Xid, Prepared] = field(default_factory=dict)
    #: Every XID this read saw prepared.
    seen: set[Xid] = field(default_factory=set)
    #: XIDs committed in this read that it never saw prepared: their rows came before its start.
    orphans: set[Xid] = field(default_factory=set)
    _open: Prepared | None = None  # the open XA transaction

    @property
    def holding(self) -> bool:
        """Whether the open transaction is an XA one (its rows are held, not given out)."""
        return self._open is not None

    def observe(self, event: Any, at: BinlogOffset) -> list[RowChange] | None:
        """Feed a non-row event ending at `at`: the rows it commits, or None for a QUERY event
        that is neither BEGIN nor an XA statement (a DDL, for the caller)."""
        if isinstance(event, MariadbGtidEvent):
            return self.begin(bool(event.flags & FL_PREPARED_XA))
        if isinstance(event, XAPrepareEvent):
            xid = Xid(event.xid_format_id, event.xid_gtrid, event.xid_bqual)
            return self.prepared(xid, at, event.one_phase)
        if isinstance(event, XidEvent):
            return self.ended()
        if not isinstance(event, QueryEvent):
            return []  # MySQL's GTID events: its XA transactions begin with XA START
        query = str(event.query)
        statement = xa_statement(query)
        if statement is None:
            return self.begin(False) if query == "BEGIN" else None
        verb, xid = statement
        if verb == "START":
            return self.begin(True)
        if verb == "ONE PHASE":  # its own transaction's end, where MySQL logs it as a statement
            return self.ended()
        return [] if verb == "END" else self.resolved(verb, xid, at)

    def begin(self, xa: bool) -> list[RowChange]:
        """A transaction starts (`xa`: one that will end in XA PREPARE). Rows still open belong
        to a transaction that ended without a prepare event (never logged so): given out."""
        left = self._close()
        self._open = Prepared() if xa else None
        return left

    def hold(self, changes: Iterable[RowChange]) -> None:
        assert self._open is not None, "rows held outside an XA transaction"
        self._open.rows.extend(changes)
        self._open.touches = self._open.touches or bool(self._open.rows)

    def touch(self) -> None:
        """The open XA transaction changes a captured table (where rows are not decoded)."""
        assert self._open is not None, "a row event outside an XA transaction"
        self._open.touches = True

    def prepared(self, xid: Xid, at: BinlogOffset, one_phase: bool) -> list[RowChange]:
        """An XA_PREPARE event at `at` ends the open transaction: its rows are held until the
        XID's commit, or given out now when it committed in one phase (MySQL)."""
        opened, self._open = self._open or Prepared(), None
        if one_phase:
            return opened.rows
        self.seen.add(xid)
        self.pending[xid] = replace(opened, at=at)
        return []

    def ended(self) -> list[RowChange]:
        """An XID event commits the open transaction (an XA one only if committed in one phase
        on MariaDB): its rows go out where they are."""
        return self._close()

    def resolved(self, verb: str, xid: Xid, at: BinlogOffset) -> list[RowChange]:
        """`XA COMMIT` (`verb` COMMIT) at `at`: the XID's rows, repositioned there in their
        order; `XA ROLLBACK`: nothing. A commit of an XID this read never saw prepared is
        recorded in `orphans`."""
        held = self.pending.pop(xid, None)
        if verb != "COMMIT":
            return []
        if held is None:
            if xid not in self.seen:
                self.orphans.add(xid)
            return []
        return [replace(c, position=ChangePosition(at, i)) for i, c in enumerate(held.rows)]

    def touching(self) -> dict[Xid, BinlogOffset]:
        """The pending XIDs that touched the read's tables, with where each was prepared."""
        return {xid: p.at for xid, p in self.pending.items() if p.touches and p.at is not None}

    def _close(self) -> list[RowChange]:
        rows = self._open.rows if self._open is not None else []
        self._open = None
        return rows


def names(xids: Iterable[Xid]) -> str:
    """XIDs as a user types them, for messages."""
    return ", ".join(sorted(map(str, xids)))
