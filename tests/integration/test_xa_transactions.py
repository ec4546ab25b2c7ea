"""Issue 68 item 6: XA transactions on the real MariaDB, from a connection of their own.

An `XA PREPARE` writes the transaction's rows to the binlog; its `XA COMMIT` or `XA ROLLBACK`
comes later, as a transaction of its own without rows. Silver must hold a prepared transaction's
rows once it is committed (judged at its commit), never those of one rolled back, whether the
prepare and the commit fall in one chunk's window, on both sides of a chunk's read view, or on
both sides of a stream batch's end.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any

import pytest

from binlake.jobs import commands

from .assertions import assert_lands_exactly
from .items import seed_items, wait_for
from .replay import connect
from .xa import PreparedXa

pytestmark = pytest.mark.integration


class XaRacer:
    """A writer racing the pipeline with XA transactions: each updates, inserts and deletes
    `items` rows, is prepared, and after a few milliseconds committed, rolled back, or (every
    third) committed in one phase."""

    def __init__(self, db_env: dict[str, str], database: str) -> None:
        self.db_env, self.database = db_env, database
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.rng = random.Random(68)
        self.done = {"COMMIT": 0, "ROLLBACK": 0, "ONE PHASE": 0}

    def _run(self) -> None:
        with connect(self.db_env, self.database) as conn, conn.cursor() as cur:
            for n in range(1_000_000):
                if self.stop.is_set():
                    return
                self._one(cur, n, ("COMMIT", "ROLLBACK", "ONE PHASE")[n % 3])

    def _one(self, cur: Any, n: int, how: str) -> None:
        xid = f"h6-{uuid.uuid4().hex[:16]}"
        key = self.rng.randint(1, 300)
        cur.execute("XA START %s", (xid,))
        cur.execute("UPDATE items SET qty = qty + 1 WHERE id = %s", (key,))
        cur.execute(
            "INSERT INTO items (id, name, qty, price) VALUES (%s, 'xa', 1, 2.50)", (10_000 + n,)
        )
        cur.execute("DELETE FROM items WHERE id = %s", (self.rng.randint(1, 300),))
        cur.execute("XA END %s", (xid,))
        if how == "ONE PHASE":
            cur.execute("XA COMMIT %s ONE PHASE", (xid,))
        else:
            cur.execute("XA PREPARE %s", (xid,))
            time.sleep(self.rng.uniform(0.0, 0.03))
            cur.execute(f"XA {how} %s", (xid,))
        self.done[how] += 1

    def __enter__(self) -> XaRacer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@pytest.mark.soak
def test_xa_transactions_racing_snapshot_and_stream_land_only_once_committed(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    """Prepared transactions race the chunks' windows and the stream; those rolled back must
    leave no phantom, those committed must land once, at their commit."""
    seed_items(sql, 300)
    config = make_config(source={"tables": ["items"]})
    with XaRacer(db_env, database) as racer:
        commands.snapshot(spark, config)
        time.sleep(0.5)  # prepared, committed and rolled back after the snapshot too
    assert min(racer.done.values()) >= 3, racer.done
    commands.stream(spark, config, available_now=True)
    assert_lands_exactly(spark, db_env, config, "items")


def _xa_recovers(db_env: dict[str, str]) -> int:
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_xa_recover'")
        return int(cur.fetchone()[1])


def _snapshot_across(spark: Any, db_env: dict[str, str], config: Any, xa: PreparedXa) -> None:
    """A snapshot started while `xa` is prepared, which is committed once a chunk reader has
    found it pending (before the fix: once the snapshot finished without it)."""
    recovers = _xa_recovers(db_env)
    snapshot = threading.Thread(target=commands.snapshot, args=(spark, config), daemon=True)
    snapshot.start()
    wait_for(lambda: not snapshot.is_alive() or _xa_recovers(db_env) >= recovers + 3, 120)
    xa.end("COMMIT")
    snapshot.join(timeout=180)


def test_prepared_transactions_across_a_chunk_read_and_a_stream_batch_land_once_committed(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    """A transaction prepared before a chunk's read view and committed after it: the SELECT
    cannot see it and its `XA COMMIT` carries no rows, so the chunk must wait for it, not lose
    it. Then stream batches (and restarts from their checkpoint) that end while transactions are
    prepared: the one committed later lands once, at its commit, the one rolled back never."""
    seed_items(sql, 120)
    config = make_config(source={"tables": ["items"]})
    across_chunk = (
        "UPDATE items SET qty = 99 WHERE id IN (5, 110)",
        "INSERT INTO items (id, name, qty, price) VALUES (500, 'xa', 1, 2.50)",
        "DELETE FROM items WHERE id = 7",
    )
    with PreparedXa(db_env, database, *across_chunk) as xa:
        _snapshot_across(spark, db_env, config, xa)
    committed = (
        "UPDATE items SET qty = 77 WHERE id = 1",
        "INSERT INTO items VALUES (901, 'c', 1, 1.00, NULL)",
    )
    rolled_back = (
        "DELETE FROM items WHERE id = 2",
        "INSERT INTO items VALUES (902, 'r', 1, 1.00, NULL)",
    )
    with (
        PreparedXa(db_env, database, *committed) as first,
        PreparedXa(db_env, database, *rolled_back) as second,
    ):
        sql("UPDATE items SET qty = 55 WHERE id = 3")  # a plain change after both prepares
        commands.stream(spark, config, available_now=True)
        first.end("COMMIT")
        second.end("ROLLBACK")
    sql("UPDATE items SET qty = 66 WHERE id = 4")
    commands.stream(spark, config, available_now=True)
    assert_lands_exactly(spark, db_env, config, "items")
