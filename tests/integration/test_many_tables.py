"""Issue 13, "Must show": a database of many small tables is snapshotted side by side while
writes race it, a failure part-way resumes without re-reading what the ledger marked, and every
table ends exact: each chunk at its own high watermark, silver, and the changelog.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable, QueryBuilder

from binlake.jobs import commands
from binlake.lake.tables import lake_table
from binlake.snapshot import task as snapshot_task
from binlake.snapshot.ledger import Ledger

from .assertions import assert_chunks_match_replay
from .replay import Oracle, Writers, connect, head_offset

pytestmark = pytest.mark.integration

TABLES, ROWS, STEP = 12, 40, 3  # ids 1, 4, ..., 118 per table; 4 chunks of 10 rows (and more
# for keys the writers insert past either end)
FAIL_AT_CALL = 12  # the first run's read-and-commit call that fails


def _table(rng: random.Random) -> str:
    return f"t{rng.randrange(TABLES):02d}"


def _writer(cur: Any, rng: random.Random) -> None:
    """Inserts (also past both ends of the key range), updates, key moves and deletes, each in
    a random table."""
    table, roll = _table(rng), rng.random()
    key = rng.randint(-20, ROWS * STEP + 40)
    if roll < 0.3:
        cur.execute(f"INSERT INTO {table} (id, v, n) VALUES (%s, %s, %s)", (key, "new", roll))
    elif roll < 0.6:
        cur.execute(f"UPDATE {table} SET v = %s, n = n + 1 WHERE id = %s", ("upd", key))
    elif roll < 0.8:
        cur.execute(f"UPDATE {table} SET id = %s WHERE id = %s", (key, rng.randint(1, ROWS * STEP)))
    else:
        cur.execute(f"DELETE FROM {table} WHERE id = %s", (key,))


def _create(sql: Any) -> None:
    for t in range(TABLES):
        sql(f"CREATE TABLE t{t:02d} (id INT NOT NULL PRIMARY KEY, v VARCHAR(16) NOT NULL, n INT)")
        rows = ", ".join(f"({1 + STEP * i}, 'seed', {i})" for i in range(ROWS))
        sql(f"INSERT INTO t{t:02d} (id, v, n) VALUES {rows}")


class _Calls:
    """Wraps the snapshot's read-and-commit: the most tables in flight at once, and an injected
    failure at one call."""

    def __init__(self, real: Any, fail_at: int) -> None:
        self.real, self.fail_at = real, fail_at
        self.calls = self.in_flight = self.most_in_flight = 0
        self._lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        with self._lock:
            self.calls += 1
            call = self.calls
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if call == self.fail_at:
                raise RuntimeError("injected: the source went away mid-snapshot")
            return self.real(*args)
        finally:
            with self._lock:
                self.in_flight -= 1


def test_many_small_tables_snapshot_side_by_side_under_racing_writes_and_resume(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _create(sql)
    with connect(db_env, database) as conn:
        oracles = {t: Oracle.load(conn, database, f"t{t:02d}") for t in range(TABLES)}
        initial = {t: oracles[t].rows(conn) for t in range(TABLES)}
        start = head_offset(conn)  # quiet: nothing writes to this database yet
    config = make_config(snapshot={"chunk_size": 10, "parallelism": 2, "concurrent_tables": 4})
    ledger = Ledger(spark, config.lake.path("_system", "chunks"))
    marks: list[int] = []
    mark_finished = Ledger.mark_finished

    def counted(self: Ledger, results: Any, planned: Any = ()) -> None:
        results = list(results)
        marks.append(len(results))
        mark_finished(self, results, planned)

    monkeypatch.setattr(Ledger, "mark_finished", counted)
    writers = Writers(db_env, database, _writer, threads=3, max_ops=8_000, pause_s=0.01)
    read_and_commit = snapshot_task.read_and_commit
    with writers:
        failing = _Calls(read_and_commit, fail_at=FAIL_AT_CALL)
        monkeypatch.setattr(snapshot_task, "read_and_commit", failing)
        with pytest.raises(RuntimeError, match="injected"):
            commands.snapshot(spark, config)
        before = {(c.table, c.chunk_id): c for c in ledger.chunks() if c.finished}
        # Batches committed before the failure are marked; the failed table's are not.
        assert 0 < len(before) < len(ledger.chunks())
        assert failing.most_in_flight >= 2, "tables were read one after another"

        monkeypatch.setattr(snapshot_task, "read_and_commit", read_and_commit)
        marks.clear()
        summary = commands.snapshot(spark, config)
        after = {(c.table, c.chunk_id): c for c in ledger.chunks()}
        assert all(c.finished for c in after.values())
        assert summary.chunks == len(after) >= TABLES * 4
        assert summary.chunks_read == len(after) - len(before), "a marked chunk was read again"
        assert {k: after[k] for k in before} == before
        # One ledger MERGE marks many tables: its cost does not grow with their number.
        assert len(marks) < TABLES // 4, marks
    print(f"\n{writers.ops} writes ({writers.conflicts} key conflicts) raced the snapshot")

    raced = 0
    for t in range(TABLES):
        result = assert_chunks_match_replay(spark, db_env, config, oracles[t], initial[t], start)
        raced += result["chunks_with_hw_after_lw"]
    assert raced > 0, "no chunk raced a write: writers too slow"
    commands.stream(spark, config, available_now=True)
    assert_all_silver_is_source(spark, sql, config)


def assert_all_silver_is_source(spark: Any, sql: Any, config: Any) -> None:
    """Every table's silver equals its source rows, and its changelog holds each change once:
    one comparison over all tables (a column names each row's table). The Delta tables are read
    with delta-rs, a reader independent of the Spark that wrote them (and of its per-table
    planning cost)."""
    schema = "`table` string, id int, v string, n int"
    union = " UNION ALL ".join(f"SELECT 't{t:02d}', id, v, n FROM t{t:02d}" for t in range(TABLES))
    expected = spark.createDataFrame(sql(union), schema)
    names = [f"t{t:02d}" for t in range(TABLES)]
    silver = _tagged(config, "silver", names, ["id", "v", "n"])
    actual = spark.createDataFrame(silver, schema)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    logs = [f"{n}__changelog" for n in names]
    changes = _tagged(config, "bronze", logs, ["_binlake_offset", "_op"])
    # A change is its offset and operation: a key-changing update is a delete and an insert.
    assert len(changes) == len(set(changes)) > 0


def _tagged(config: Any, layer: str, names: list[str], columns: list[str]) -> list[tuple[Any, ...]]:
    """The tables' rows (their `columns`), each behind the name of its table."""
    rows: list[tuple[Any, ...]] = []
    for name in names:
        path = lake_table(config.lake, layer, config.source.database, name).path
        # A query, not `to_pyarrow_table()`: only delta-rs's query engine applies deletion vectors.
        query = QueryBuilder().register("t", DeltaTable(path))
        quoted = ", ".join(f'"{c}"' for c in columns)
        table = pa.table(query.execute(f"SELECT {quoted} FROM t").read_all())
        rows += [(name, *row.values()) for row in table.to_pylist()]
    return rows
