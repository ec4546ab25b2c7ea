"""XA transactions' bookkeeping: rows held from XA PREPARE to XA COMMIT, dropped at XA ROLLBACK,
and the XIDs as the binlog and XA RECOVER spell them."""

from __future__ import annotations

import pytest

from binlake.errors import SourceError
from binlake.model.changes import Op, RowChange
from binlake.model.offsets import BinlogOffset, ChangePosition
from binlake.mysql.xa_transactions import (
    XaTransactions,
    Xid,
    names,
    recovered_xids,
    xa_statement,
)
from binlake.snapshot import chunk_reader

TABLE = "db.t"
X1, X2 = Xid(1, b"x1"), Xid(7, b"x2", b"bq")


def at(pos: int) -> BinlogOffset:
    return BinlogOffset("mysql-bin.000001", pos)


def insert(pos: int, key: int, row: int = 0) -> RowChange:
    return RowChange(TABLE, Op.INSERT, ChangePosition(at(pos), row), None, (key,), 5)


def test_the_binlogs_xa_statements_are_read_with_their_xids() -> None:
    assert xa_statement("XA COMMIT X'7831',X'',1") == ("COMMIT", X1)
    assert xa_statement("XA ROLLBACK X'7832',X'6271',7") == ("ROLLBACK", X2)
    assert xa_statement("xa commit x'7832' , x'6271' , 7") == ("COMMIT", X2)
    assert xa_statement("XA END X'7831',X'',1") == ("END", X1)
    assert xa_statement("XA START X'7831',X'',1") == ("START", X1)
    assert xa_statement("XA BEGIN X'7831',X'',1") == ("START", X1)
    assert xa_statement("XA COMMIT X'7831',X'',1 ONE PHASE") == ("ONE PHASE", X1)
    for other in ("BEGIN", "COMMIT", "CREATE TABLE xa (id INT)", "UPDATE xa SET a = 1"):
        assert xa_statement(other) is None


def test_xids_read_as_a_user_types_them() -> None:
    assert str(X1) == "'x1'"
    assert str(X2) == "'x2','bq',7"
    assert str(Xid(1, b"\x00\xff")) == "X'00ff'"
    assert str(Xid(1, b"it's")) == "X'69742773'"
    assert names([X2, X1]) == "'x1', 'x2','bq',7"


def test_xa_recover_rows_split_into_gtrid_and_bqual() -> None:
    rows = [(1, 2, 0, b"x1"), (7, 2, 2, b"x2bq"), ("1", "3", "0", "abc")]
    assert recovered_xids(rows) == {X1, X2, Xid(1, b"abc")}


def test_prepared_rows_come_out_at_the_commit_repositioned_in_order() -> None:
    xa = XaTransactions()
    assert xa.begin(True) == [] and xa.holding
    xa.hold([insert(100, 1), insert(100, 2, row=1)])
    xa.hold([insert(150, 3)])
    assert xa.prepared(X1, at(200), one_phase=False) == []
    assert not xa.holding and xa.touching() == {X1: at(200)}
    out = xa.resolved("COMMIT", X1, at(900))
    assert [c.after for c in out] == [(1,), (2,), (3,)]
    assert [c.position for c in out] == [ChangePosition(at(900), i) for i in range(3)]
    assert xa.pending == {} and xa.orphans == set() and xa.seen == {X1}


def test_rolled_back_rows_never_come_out() -> None:
    xa = XaTransactions()
    xa.begin(True)
    xa.hold([insert(100, 1)])
    xa.prepared(X1, at(200), one_phase=False)
    assert xa.resolved("ROLLBACK", X1, at(300)) == []
    assert xa.pending == {} and xa.orphans == set()
    # A rollback of an XID never seen prepared is no loss either.
    assert xa.resolved("ROLLBACK", X2, at(400)) == [] and xa.orphans == set()


def test_interleaved_transactions_keep_their_own_rows() -> None:
    xa = XaTransactions()
    for xid, key, pos in ((X1, 1, 100), (X2, 2, 200)):
        xa.begin(True)
        xa.hold([insert(pos, key)])
        xa.prepared(xid, at(pos + 10), one_phase=False)
    xa.begin(False)  # an ordinary transaction in between is not held
    assert not xa.holding
    assert [c.after for c in xa.resolved("COMMIT", X2, at(300))] == [(2,)]
    assert xa.touching() == {X1: at(110)}
    assert [c.after for c in xa.resolved("COMMIT", X1, at(400))] == [(1,)]


def test_a_commit_never_seen_prepared_is_an_orphan() -> None:
    xa = XaTransactions()
    assert xa.resolved("COMMIT", X1, at(300)) == []
    assert xa.orphans == {X1}


def test_one_phase_and_xid_ended_transactions_come_out_where_they_are() -> None:
    xa = XaTransactions()
    xa.begin(True)
    xa.hold([insert(100, 1)])
    assert [c.position.offset for c in xa.prepared(X1, at(150), one_phase=True)] == [at(100)]
    assert xa.pending == {} and X1 not in xa.seen
    xa.begin(True)
    xa.hold([insert(200, 2)])
    assert [c.after for c in xa.ended()] == [(2,)]
    xa.begin(True)
    xa.hold([insert(300, 3)])
    assert [c.after for c in xa.begin(False)] == [(3,)]  # never left unreturned


def test_only_transactions_touching_the_reads_tables_count_as_pending() -> None:
    xa = XaTransactions()
    xa.begin(True)  # rows of other tables only: the read decoded none
    xa.prepared(X1, at(100), one_phase=False)
    xa.begin(True)
    xa.touch()  # a planner's scan: a captured table's row event, not decoded
    xa.prepared(X2, at(200), one_phase=False)
    assert set(xa.pending) == {X1, X2}
    assert xa.touching() == {X2: at(200)}


def test_a_chunks_wait_for_prepared_transactions_ends_in_an_error_naming_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunk_reader, "XA_WAIT_S", 0.0)
    waiting = chunk_reader._XaWait("reading chunk 3 of db.t")
    with pytest.raises(SourceError, match=r"XA transactions 'x1'.*XA COMMIT or XA ROLLBACK"):
        waiting.pause({X1}, "low watermark")
