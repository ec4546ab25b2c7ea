"""An independent oracle for snapshot tests: the source's rows as of any binlog offset.

The quiet initial state of a table (read with PyMySQL) plus the table's binlog row events, read
with python-mysql-replication's `BinLogStreamReader` directly (not through
`binlake.mysql.binlog`), replayed in order up to an offset. Values go through
`binlake.model.typemap` normalisers (the spec of how a value lands in Delta); everything else
here is deliberately separate from binlake's code.
"""

from __future__ import annotations

import os
import random
import re
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
from pymysql.constants import ER
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.model.typemap import map_table
from binlake.mysql.discovery import load_schema

ROOT = Path(__file__).resolve().parents[2]

Row = tuple[Any, ...]
Offset = tuple[int, int]  # (binlog file suffix, position)
Fold = Callable[[Any], Any]  # a key value → its identity/order under the column's collation


def subprocess_env() -> dict[str, str]:
    """The environment for a `python -m binlake` child process: Spark on loopback, the cached
    Delta jars, this interpreter for Python workers, a small driver heap."""
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["BINLAKE_IVY_DIR"] = os.environ.get("BINLAKE_IVY_DIR", str(ROOT / ".cache" / "ivy"))
    env["PYSPARK_PYTHON"] = sys.executable
    env["BINLAKE_DRIVER_MEMORY"] = "1g"
    return env


#: The oracle's own binlog reads take ids from here, outside every make_config range; each a
#: random one, so that tests running at once do not evict each other's read.
BINLOG_SERVER_IDS = range(991_100, 991_900)


def commit_ends(
    db_env: dict[str, str], start: BinlogOffset, stop: BinlogOffset
) -> set[BinlogOffset]:
    """Where each transaction in `(start, stop]` ends, read from the server's binlog: the end
    of its XID event (InnoDB) or of its COMMIT or DDL statement."""
    stream = BinLogStreamReader(
        connection_settings={
            "host": "127.0.0.1",
            "port": int(db_env["BINLAKE_DB_PORT"]),
            "user": "binlake",
            "password": db_env["BINLAKE_SOURCE_PASSWORD"],
        },
        server_id=random.choice(BINLOG_SERVER_IDS), resume_stream=True, log_file=start.file,
        log_pos=start.pos, blocking=False, only_events=[XidEvent, QueryEvent],
    )  # fmt: skip
    ends = set()
    try:
        for event in stream:
            offset = BinlogOffset(stream.log_file, stream.log_pos)
            if offset > stop:
                break
            if isinstance(event, XidEvent) or event.query != "BEGIN":
                ends.add(offset)
    finally:
        stream.close()
    return ends


def connect(db_env: dict[str, str], database: str | None = None) -> pymysql.Connection:
    return pymysql.connect(
        host="127.0.0.1",
        port=int(db_env["BINLAKE_DB_PORT"]),
        user="binlake",
        password=db_env["BINLAKE_SOURCE_PASSWORD"],
        database=database,
        autocommit=True,
        charset="utf8mb4",
        init_command="SET time_zone = '+00:00'",
    )


def offset_of(file: str, pos: int) -> Offset:
    match = re.search(r"\.(\d+)$", file)
    assert match, file
    return (int(match.group(1)), int(pos))


def head_offset(conn: pymysql.Connection) -> tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return str(file), int(pos)


def fold_ci(value: Any) -> Any:
    """utf8mb4_general_ci identity and order for ASCII keys: the upper-cased code points."""
    if isinstance(value, str):
        assert value.isascii(), f"fold_ci handles ASCII keys only, got {value!r}"
        return value.upper()
    return value


def identity(value: Any) -> Any:
    return value


@dataclass
class Oracle:
    """A table's schema, normalisers and row identity (its key, folded by the collation)."""

    schema: TableSchema
    fold: Fold = identity
    normalizers: tuple[Callable[[Any], Any], ...] = field(init=False)
    key_indexes: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.normalizers = tuple(m.normalize for m in map_table(self.schema))
        names = list(self.schema.column_names)
        self.key_indexes = tuple(names.index(k) for k in self.schema.key)

    @classmethod
    def load(
        cls,
        conn: pymysql.Connection,
        database: str,
        table: str,
        split_keys: dict[str, str] | None = None,
        fold: Fold = identity,
    ) -> Oracle:
        return cls(load_schema(conn, database, table, split_keys or {}), fold)

    @property
    def columns(self) -> list[str]:
        return list(self.schema.column_names)

    @property
    def split_index(self) -> int:
        return list(self.schema.column_names).index(self.schema.split_column)

    def normalise(self, raw: Iterable[Any]) -> Row:
        values = list(raw)
        assert len(values) == len(self.normalizers), (values, self.columns)
        return tuple(n(v) for n, v in zip(self.normalizers, values, strict=True))

    def key(self, row: Row) -> tuple[Any, ...]:
        return tuple(self.fold(row[i]) for i in self.key_indexes)

    def rows(self, conn: pymysql.Connection) -> dict[tuple[Any, ...], Row]:
        """The table's current rows, normalised, keyed by folded row key."""
        cols = ", ".join(_quoted(c) for c in self.columns)
        table = f"{_quoted(self.schema.database)}.{_quoted(self.schema.name)}"
        with conn.cursor() as cur:
            cur.execute(f"SELECT {cols} FROM {table}")  # no parameters: `%` stays as it is
            result: dict[tuple[Any, ...], Row] = {}
            for raw in cur.fetchall():
                row = self.normalise(raw)
                assert self.key(row) not in result, f"duplicate key {self.key(row)}"
                result[self.key(row)] = row
        return result

    def in_range(self, value: Any, start: Any, end: Any) -> bool:
        """`start <= value < end` in the column's order; `None` bounds are unbounded."""
        if value is None:
            return False
        v = self.fold(value)
        if start is not None and v < self.fold(start):
            return False
        return end is None or v < self.fold(end)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Change:
    offset: Offset
    before: Row | None  # None for an insert
    after: Row | None  # None for a delete


def read_binlog(
    db_env: dict[str, str],
    oracle: Oracle,
    start: tuple[str, int],
    stop: Offset,
    server_id: int,
) -> list[Change]:
    """Row changes of the oracle's table in `(start, stop]`, in binlog order."""
    schema = oracle.schema
    stream = BinLogStreamReader(
        connection_settings={
            "host": "127.0.0.1",
            "port": int(db_env["BINLAKE_DB_PORT"]),
            "user": "binlake",
            "passwd": db_env["BINLAKE_SOURCE_PASSWORD"],
            "charset": "utf8mb4",
        },
        server_id=server_id,
        is_mariadb=False,
        resume_stream=True,
        blocking=False,
        log_file=start[0],
        log_pos=start[1],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[schema.database],
        only_tables=[schema.name],
        enable_logging=False,
    )
    begin = offset_of(*start)
    changes: list[Change] = []
    try:
        for event in stream:
            at = offset_of(stream.log_file, stream.log_pos)
            if at > stop:
                break
            if at <= begin or event.schema != schema.database or event.table != schema.name:
                continue
            for row in event.rows:
                if isinstance(event, WriteRowsEvent):
                    changes.append(Change(at, None, oracle.normalise(row["values"].values())))
                elif isinstance(event, DeleteRowsEvent):
                    changes.append(Change(at, oracle.normalise(row["values"].values()), None))
                else:
                    changes.append(
                        Change(
                            at,
                            oracle.normalise(row["before_values"].values()),
                            oracle.normalise(row["after_values"].values()),
                        )
                    )
    finally:
        stream.close()
    return changes


def apply(state: dict[tuple[Any, ...], Row], change: Change, oracle: Oracle) -> None:
    if change.before is not None:
        state.pop(oracle.key(change.before), None)
    if change.after is not None:
        state[oracle.key(change.after)] = change.after


def states_at(
    initial: dict[tuple[Any, ...], Row],
    changes: list[Change],
    offsets: Iterable[Offset],
    oracle: Oracle,
) -> dict[Offset, dict[tuple[Any, ...], Row]]:
    """The table's rows as of each offset (changes at or before it applied)."""
    state = dict(initial)
    result: dict[Offset, dict[tuple[Any, ...], Row]] = {}
    i = 0
    for offset in sorted(set(offsets)):
        while i < len(changes) and changes[i].offset <= offset:
            apply(state, changes[i], oracle)
            i += 1
        result[offset] = dict(state)
    return result


# ---------------------------------------------------------------------------------------------
# Concurrent writers


# What InnoDB answers two writers that collide: the statement (or transaction) is rolled back
# and an application would retry it. Writers count these with duplicate keys as conflicts.
_ROLLED_BACK = (ER.LOCK_DEADLOCK, ER.LOCK_WAIT_TIMEOUT)


def _is_conflict(exc: pymysql.err.MySQLError) -> bool:
    if isinstance(exc, pymysql.err.IntegrityError):
        return True
    code = exc.args[0] if exc.args else None
    return isinstance(exc, pymysql.err.OperationalError) and code in _ROLLED_BACK


class Writers:
    """N threads, each on its own autocommit connection, running `step(cursor, rng)` in a
    bounded loop until `stop()`; duplicate keys, deadlocks and lock-wait timeouts (the server
    rolled the statement back, nothing was written) are expected and counted as conflicts."""

    def __init__(
        self,
        db_env: dict[str, str],
        database: str,
        step: Callable[[Any, random.Random], None],
        threads: int = 3,
        max_ops: int = 5000,
        pause_s: float = 0.001,
    ) -> None:
        self._db_env, self._database, self._step = db_env, database, step
        self._stop = threading.Event()
        self._max_ops, self._pause = max_ops, pause_s
        self.ops = 0
        self.conflicts = 0
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(seed,), daemon=True) for seed in range(threads)
        ]

    def _run(self, seed: int) -> None:
        rng = random.Random(seed * 7919 + 17)
        ops = conflicts = 0
        try:
            with connect(self._db_env, self._database) as conn, conn.cursor() as cur:
                for _ in range(self._max_ops):
                    if self._stop.is_set():
                        break
                    try:
                        self._step(cur, rng)
                    except pymysql.err.MySQLError as exc:
                        if not _is_conflict(exc):
                            raise
                        conflicts += 1
                    ops += 1
                    if self._pause:
                        self._stop.wait(self._pause)
        except BaseException as exc:
            self.errors.append(exc)
        with self._lock:
            self.ops += ops
            self.conflicts += conflicts

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        assert not self.errors, self.errors

    def __exit__(self, *exc: object) -> None:
        self.stop()
