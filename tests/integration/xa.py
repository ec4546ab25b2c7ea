"""An XA transaction on a connection of its own, prepared, then committed or rolled back by the
test: what test_xa_transactions and the lifecycle torture run."""

from __future__ import annotations

import contextlib
import uuid

import pymysql

from .replay import connect


class PreparedXa:
    """One XA transaction on a connection of its own: its statements run and prepared on entry,
    then committed or rolled back by the test (rolled back on exit if it is still pending, so
    that a failing test leaves no prepared transaction behind on the shared server)."""

    def __init__(self, db_env: dict[str, str], database: str, *statements: str) -> None:
        self.conn = connect(db_env, database)
        self.xid = f"h6-{uuid.uuid4().hex[:16]}"
        self.statements = statements
        self.pending = False

    def __enter__(self) -> PreparedXa:
        with self.conn.cursor() as cur:
            cur.execute("XA START %s", (self.xid,))
            for statement in self.statements:
                cur.execute(statement)
            cur.execute("XA END %s", (self.xid,))
            cur.execute("XA PREPARE %s", (self.xid,))
        self.pending = True
        return self

    def end(self, how: str) -> None:
        """`how`: COMMIT or ROLLBACK."""
        with self.conn.cursor() as cur:
            cur.execute(f"XA {how} %s", (self.xid,))
        self.pending = False

    def __exit__(self, *exc: object) -> None:
        if self.pending:
            with contextlib.suppress(pymysql.MySQLError):
                self.end("ROLLBACK")
        self.conn.close()
