"""Issue 2, "Must show": the lock-free incremental snapshot against a real MariaDB, Spark and Delta.

Chunks are checked against an independent oracle (tests/integration/replay.py): the quiet initial
state of the table plus the binlog replayed with python-mysql-replication directly, up to each
chunk's high watermark.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import functions as F

from binlake.errors import ConfigError, SourceError
from binlake.lake.paths import ledger_path
from binlake.snapshot.ledger import Ledger
from binlake.snapshot.task import run_snapshot

from .assertions import (
    assert_bronze_equals_source,
    assert_chunks_match_replay,
    bronze_path,
)
from .replay import (
    Oracle,
    Writers,
    connect,
    fold_ci,
    head_offset,
    subprocess_env,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# n = 0..9999 without deep recursion (MariaDB's max_recursive_iterations defaults to 1000).
_SEQ = (
    "d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 9), "
    "seq(n) AS (SELECT a.i + 10 * b.i + 100 * c.i + 1000 * e.i FROM d a, d b, d c, d e)"
)


# ---------------------------------------------------------------------------------------------
# 1. Concurrent writes: every chunk equals the source at its own high watermark

_NAMES = ["Zoë", "Ærøskøbing", "東京", "naïve café", "plain", "ÅSA", "emoji 🚀", "", None]
_BASE, _STEP, _ROWS = 1000, 3, 20_000
_MAX_ID = _BASE + _STEP * (_ROWS - 1)


def _item_values(rng: random.Random) -> tuple[Any, ...]:
    amount = Decimal(rng.randint(-10_000_000, 10_000_000)) / 100
    offset = timedelta(seconds=rng.randint(0, 10**8), microseconds=rng.randint(0, 999_999))
    created = None if rng.random() < 0.1 else datetime(2020, 1, 1) + offset
    name = rng.choice(_NAMES)
    note = None if rng.random() < 0.2 else "note " * rng.randint(0, 40) + rng.choice(_NAMES[:-1])
    qty = None if rng.random() < 0.3 else rng.randint(-5, 500)
    return amount, created, name, note, qty


def _existing_id(rng: random.Random) -> int:
    return _BASE + _STEP * rng.randrange(_ROWS)


def _any_id(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.25:
        return rng.randint(1, _BASE - 1)  # below the planned minimum: the first chunk
    if roll < 0.5:
        return rng.randint(_MAX_ID + 1, _MAX_ID + 20_000)  # above the maximum: the last chunk
    return rng.randint(_BASE, _MAX_ID)  # inside, mostly in the gaps


def _item_writer(cur: Any, rng: random.Random) -> None:
    roll = rng.random()
    if roll < 0.3:
        cur.execute(
            "INSERT INTO items (id, amount, created, name, note, qty) VALUES (%s,%s,%s,%s,%s,%s)",
            (_any_id(rng), *_item_values(rng)),
        )
    elif roll < 0.6:
        cur.execute(
            "UPDATE items SET amount=%s, created=%s, name=%s, note=%s, qty=%s WHERE id=%s",
            (*_item_values(rng), _existing_id(rng)),
        )
    elif roll < 0.8:
        cur.execute("UPDATE items SET id=%s WHERE id=%s", (_any_id(rng), _existing_id(rng)))
    else:
        cur.execute("DELETE FROM items WHERE id=%s", (_existing_id(rng),))


def test_snapshot_under_concurrent_writes_matches_source_at_each_chunk_hw(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    sql(
        "CREATE TABLE items (id INT NOT NULL PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, "
        "created DATETIME(6) NULL, "
        "name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, "
        "note TEXT NULL, qty INT NULL)"
    )
    rng = random.Random(2)
    with connect(db_env, database) as conn, conn.cursor() as cur:
        rows = [(_BASE + _STEP * n, *_item_values(rng)) for n in range(_ROWS)]
        for i in range(0, len(rows), 2000):
            cur.executemany(
                "INSERT INTO items (id, amount, created, name, note, qty) "
                "VALUES (%s,%s,%s,%s,%s,%s)",
                rows[i : i + 2000],
            )
        oracle = Oracle.load(conn, database, "items")
        initial = oracle.rows(conn)
        start = head_offset(conn)  # quiet: nothing writes to this database yet
    assert len(initial) == _ROWS

    config = make_config(snapshot={"chunk_size": 500, "parallelism": 2, "chunks_per_commit": 16})
    # Paced to keep writing for the whole snapshot; the bound is only a safety net.
    writers = Writers(db_env, database, _item_writer, threads=3, max_ops=6000, pause_s=0.01)
    with writers:
        time.sleep(0.3)
        began = time.monotonic()
        summary = run_snapshot(spark, config)
        took = time.monotonic() - began
    print(f"\nsnapshot {took:.1f} s; {writers.ops} writes ({writers.conflicts} key conflicts)")
    assert summary.chunks >= 20

    began = time.monotonic()
    result = assert_chunks_match_replay(spark, db_env, config, oracle, initial, start)
    print(f"oracle check {time.monotonic() - began:.1f} s")
    assert result["chunks"] >= 20
    assert result["chunks_with_hw_after_lw"] > 0, "no chunk raced a write: writers too slow"
    assert result["chunks_that_replayed_binlog"] > 0, "no chunk replayed a change of the table"


# ---------------------------------------------------------------------------------------------
# 2. A killed snapshot resumes without re-reading finished chunks


def _finished(spark: Any, path: str) -> dict[int, tuple[str, int, Any]]:
    # Not DeltaTable.isDeltaTable: it caches "no table yet" and never sees the first commit.
    if not any(Path(path, "_delta_log").glob("*.json")):
        return {}
    frame = spark.read.format("delta").load(path).where("status = 'finished'")
    return {
        r["chunk_id"]: (r["hw_file"], r["hw_pos"], r["updated_at"])
        for r in frame.select("chunk_id", "hw_file", "hw_pos", "updated_at").collect()
    }


def test_killed_snapshot_resumes_without_rereading_finished_chunks(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any, tmp_path: Path
) -> None:
    from delta.tables import DeltaTable

    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,3))")
    sql(
        f"INSERT INTO t (id, v, d) WITH RECURSIVE {_SEQ} "
        "SELECT n * 2, CONCAT('v', n), n / 7 FROM seq WHERE n BETWEEN 1 AND 2000"
    )
    config = make_config(snapshot={"chunk_size": 100, "parallelism": 1, "chunks_per_commit": 2})
    config_file = tmp_path / "binlake.yml"
    config_file.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    ledger, bronze = ledger_path(config), bronze_path(config, "t")

    log_file = tmp_path / "snapshot.log"
    with log_file.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "binlake", "snapshot", "--config", str(config_file)],
            cwd=ROOT,
            env=subprocess_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 150
        while True:
            assert proc.poll() is None, (
                f"the snapshot ended (rc {proc.returncode}) before it could be killed:\n"
                + log_file.read_text()[-3000:]
            )
            assert time.monotonic() < deadline, "no progress:\n" + log_file.read_text()[-3000:]
            if len(_finished(spark, ledger)) >= 2:
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    before = _finished(spark, ledger)
    total = len(Ledger(spark, ledger).chunks())
    assert 2 <= len(before) < total, (len(before), total)
    history_before = [
        (r["version"], r["operation"])
        for r in DeltaTable.forPath(spark, bronze).history().collect()
    ]
    rows_before = sorted(
        tuple(r)
        for r in spark.read.format("delta")
        .load(bronze)
        .where(f"_chunk_id IN ({', '.join(map(str, before))})")
        .collect()
    )
    print(f"\nkilled after {len(before)}/{total} chunks; bronze history {history_before}")

    # Resume in-process, in one commit batch (batching is not part of the plan).
    resumed = make_config(snapshot={"chunk_size": 100, "parallelism": 2, "chunks_per_commit": 64})
    assert resumed.lake.root == config.lake.root
    summary = run_snapshot(spark, resumed)
    assert summary.chunks == total
    assert summary.chunks_read == total - len(before), "finished chunks were read again"

    chunks = Ledger(spark, ledger).chunks()
    assert all(c.finished for c in chunks)
    after = _finished(spark, ledger)
    for chunk_id, state in before.items():
        assert after[chunk_id] == state, f"chunk {chunk_id} re-read: {state} -> {after[chunk_id]}"

    history = DeltaTable.forPath(spark, bronze).history().collect()
    versions = {r["version"]: r for r in history}
    for version, operation in history_before:
        assert versions[version]["operation"] == operation, "bronze history was rewritten"
    newer = [r for r in history if r["version"] > max(v for v, _ in history_before)]
    assert newer, "the rerun committed nothing to bronze"
    for r in newer:
        predicate = str((r["operationParameters"] or {}).get("predicate", ""))
        rewritten = {int(x) for x in re.findall(r"\d+", predicate)} & set(before)
        assert not rewritten, f"bronze version {r['version']} replaced finished chunks {rewritten}"

    frame = spark.read.format("delta").load(bronze)
    ids = [r["id"] for r in frame.select("id").collect()]
    assert len(ids) == len(set(ids)), "duplicate keys in bronze"
    assert len(ids) == sql("SELECT COUNT(*) FROM t")[0][0] == 2000
    rows_after = sorted(
        tuple(r) for r in frame.where(f"_chunk_id IN ({', '.join(map(str, before))})").collect()
    )
    assert rows_after == rows_before
    for row in rows_after:
        hw_file, hw_pos, _ = before[row[-3]]
        assert (row[-2], row[-1]) == (hw_file, hw_pos)
    with connect(db_env) as conn:
        oracle = Oracle.load(conn, database, "t")
    assert_bronze_equals_source(spark, db_env, config, oracle)


# ---------------------------------------------------------------------------------------------
# 3. Bad input: a clear error naming the problem, and no ledger left behind


_BAD_INPUTS = {
    "no_primary_key": (
        "CREATE TABLE t (a INT, b INT)",
        {"source": {"tables": ["t"]}},
        SourceError,
        ["t", "no primary key", "split_keys"],
    ),
    "missing_table": (
        "CREATE TABLE t (id INT PRIMARY KEY)",
        {"source": {"tables": ["t", "nowhere"]}},
        SourceError,
        ["nowhere", "does not exist", "source.tables"],
    ),
    "wrong_password": (
        "CREATE TABLE t (id INT PRIMARY KEY)",
        {"source": {"password": "definitely-not-the-password"}},
        SourceError,
        ["access denied", "binlake", "source.password"],
    ),
    "no_replication_privileges": (
        "CREATE TABLE t (id INT PRIMARY KEY)",
        {"source": {"user": "binlake_ro"}},
        SourceError,
        ["REPLICATION"],
    ),
    "split_key_column_missing": (
        "CREATE TABLE t (a INT, b INT)",
        {"snapshot": {"split_keys": {"t": "nope"}}},
        SourceError,
        ["split_keys", "nope", "does not have"],
    ),
    # A configured split key must identify rows: NULLs fall in no chunk, a repeated value is
    # one key for two rows, and with a primary key the replay identifies rows by that key.
    "split_key_nullable": (
        "CREATE TABLE t (a INT NULL, b INT, UNIQUE KEY (a))",
        {"snapshot": {"split_keys": {"t": "a"}}},
        SourceError,
        ["snapshot.split_keys.t", "'a'", "nullable", "NOT NULL", "UNIQUE"],
    ),
    "split_key_not_unique": (
        "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, KEY (a), UNIQUE KEY (b))",
        {"snapshot": {"split_keys": {"t": "a"}}},
        SourceError,
        ["snapshot.split_keys.t", "'a'", "no single-column UNIQUE index", "candidates: b"],
    ),
    "split_key_only_part_of_a_unique_index": (
        "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, UNIQUE KEY (a, b))",
        {"snapshot": {"split_keys": {"t": "a"}}},
        SourceError,
        ["snapshot.split_keys.t", "'a'", "no single-column UNIQUE index"],
    ),
    "split_key_outside_primary_key": (
        "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, UNIQUE KEY (a))",
        {"snapshot": {"split_keys": {"t": "a"}}},
        SourceError,
        ["snapshot.split_keys.t", "'a'", "not in the primary key", "id"],
    ),
    "split_key_double": (
        "CREATE TABLE t (f DOUBLE NOT NULL, b INT, UNIQUE KEY (f))",
        {"snapshot": {"split_keys": {"t": "f"}}},
        SourceError,
        ["split key", "'f'", "double", "floating-point", "snapshot.split_keys.t"],
    ),
    "float_primary_key": (
        "CREATE TABLE t (f FLOAT NOT NULL, n INT NOT NULL, PRIMARY KEY (f, n))",
        {},
        SourceError,
        ["split key", "'f'", "float", "snapshot.split_keys.t", "(n)"],
    ),
    "uuid_split_key": (
        "CREATE TABLE t (u UUID NOT NULL PRIMARY KEY, v INT)",
        {},
        SourceError,
        ["split key", "'u'", "uuid", "binary form", "snapshot.split_keys.t"],
    ),
}


@pytest.mark.parametrize("case", sorted(_BAD_INPUTS))
def test_bad_input_fails_clearly_without_a_ledger(
    spark: Any, sql: Any, make_config: Any, case: str
) -> None:
    table_sql, sections, error, words = _BAD_INPUTS[case]
    sql(table_sql)
    config = make_config(**sections)
    with pytest.raises((SourceError, ConfigError)) as raised:
        run_snapshot(spark, config)
    assert isinstance(raised.value, error)
    message = str(raised.value)
    for word in words:
        assert word.lower() in message.lower(), f"{word!r} not in {message!r}"
    assert "definitely-not-the-password" not in message
    assert not Path(ledger_path(config)).exists(), "a failed start left a ledger behind"
    assert not Path(config.lake.path("bronze")).exists()


# ---------------------------------------------------------------------------------------------
# 4. A case-insensitive string key: each key in exactly one chunk, chunks exact at their HW


def _code(rng: random.Random, n: int) -> str:
    letter = chr(ord("a") + n % 26)
    return f"{letter.upper() if rng.random() < 0.5 else letter}-{n:05d}"


def _code_writer(cur: Any, rng: random.Random) -> None:
    roll = rng.random()
    if roll < 0.35:
        pick = rng.random()
        if pick < 0.2:
            code = f"0-{rng.randint(0, 99999):05d}"  # below the planned minimum
        elif pick < 0.4:
            code = f"{rng.choice(['zz', 'ZZ', 'Zz'])}-{rng.randint(0, 99999):05d}"  # above max
        else:
            code = _code(rng, rng.randint(0, 5999))  # half collide (case-insensitively)
        cur.execute(
            "INSERT INTO codes (code, n, label) VALUES (%s, %s, %s)",
            (code, rng.randint(0, 10**6), rng.choice(_NAMES)),
        )
    elif roll < 0.55:
        cur.execute("DELETE FROM codes WHERE code = %s", (_code(rng, rng.randrange(3000)),))
    elif roll < 0.7:
        cur.execute(
            "UPDATE codes SET n = %s, label = %s WHERE code = %s",
            (rng.randint(0, 10**6), rng.choice(_NAMES), _code(rng, rng.randrange(3000))),
        )
    elif roll < 0.85:
        # Same key under the collation, different case: a key change only byte-wise.
        code = _code(rng, rng.randrange(3000))
        cur.execute("UPDATE codes SET code = %s WHERE code = %s", (code.swapcase(), code))
    else:
        cur.execute(
            "UPDATE codes SET code = %s WHERE code = %s",
            (_code(rng, rng.randint(0, 5999)), _code(rng, rng.randrange(3000))),
        )


def test_string_key_ci_collation_chunks_hold_each_key_once(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    sql(
        "CREATE TABLE codes (code VARCHAR(32) CHARACTER SET utf8mb4 "
        "COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, n INT NOT NULL, label VARCHAR(40))"
    )
    rng = random.Random(4)
    with connect(db_env, database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO codes (code, n, label) VALUES (%s, %s, %s)",
            [(_code(rng, n), n, rng.choice(_NAMES)) for n in range(3000)],
        )
        cur.execute("SELECT code FROM codes ORDER BY code")
        server_order = [r[0] for r in cur.fetchall()]
        # The oracle's order (upper-cased ASCII) is MySQL's order for these keys.
        assert server_order == sorted(server_order, key=fold_ci)
        assert server_order != sorted(server_order), "keys must order differently byte-wise"
        oracle = Oracle.load(conn, database, "codes", fold=fold_ci)
        initial = oracle.rows(conn)
        start = head_offset(conn)

    config = make_config(snapshot={"chunk_size": 100, "parallelism": 2})
    writers = Writers(db_env, database, _code_writer, threads=2, max_ops=5000, pause_s=0.005)
    with writers:
        time.sleep(0.3)
        run_snapshot(spark, config)
    print(f"\nwriters: {writers.ops} statements ({writers.conflicts} key conflicts)")

    result = assert_chunks_match_replay(spark, db_env, config, oracle, initial, start)
    assert result["chunks"] >= 20
    assert result["chunks_with_hw_after_lw"] > 0, "no chunk raced a write: writers too slow"


# ---------------------------------------------------------------------------------------------
# 5. A composite key whose first column repeats: no empty-width chunks, bronze == source


def test_composite_key_table_snapshot(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    for table, orders, lines in (("order_lines", 60, 4), ("heavy_lines", 8, 30)):
        sql(
            f"CREATE TABLE {table} (order_id INT NOT NULL, line_no INT NOT NULL, "
            "sku VARCHAR(20) NOT NULL, qty INT, PRIMARY KEY (order_id, line_no))"
        )
        sql(
            f"INSERT INTO {table} (order_id, line_no, sku, qty) WITH RECURSIVE {_SEQ} "
            f"SELECT 100 + n DIV {lines}, n MOD {lines}, CONCAT('sku-', n), "
            f"IF(n MOD 5 = 0, NULL, n) FROM seq WHERE n < {orders * lines}"
        )
    config = make_config(snapshot={"chunk_size": 10, "parallelism": 2, "chunks_per_commit": 16})
    run_snapshot(spark, config)

    ledger = Ledger(spark, ledger_path(config))
    with connect(db_env) as conn:
        for table, orders in (("order_lines", 60), ("heavy_lines", 8)):
            chunks = ledger.chunks(f"{database}.{table}")
            assert all(c.finished for c in chunks)
            for c in chunks:
                assert c.range.start is None or c.range.end is None or c.range.start < c.range.end
                assert c.rows and c.rows > 0, f"{table} chunk {c.chunk_id} {c.range} is empty"
            assert len(chunks) >= (25 if table == "order_lines" else orders)
            oracle = Oracle.load(conn, database, table)
            assert_bronze_equals_source(spark, db_env, config, oracle)
            # All lines of an order sit in one chunk.
            frame = spark.read.format("delta").load(bronze_path(config, table))
            per_order = frame.groupBy("order_id").agg(F.countDistinct("_chunk_id")).collect()
            assert {r[1] for r in per_order} == {1}


# ---------------------------------------------------------------------------------------------
# 6. No primary key, a unique column named in snapshot.split_keys


def test_table_without_primary_key_uses_configured_split_key(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    sql(
        "CREATE TABLE audit_log (event_id BIGINT NOT NULL, actor VARCHAR(30), "
        "at DATETIME(3), UNIQUE KEY (event_id))"
    )
    sql(
        f"INSERT INTO audit_log WITH RECURSIVE {_SEQ} "
        "SELECT n * 10, IF(n MOD 7 = 0, NULL, CONCAT('user', n MOD 13)), "
        "TIMESTAMP('2024-01-01') + INTERVAL n SECOND + INTERVAL n * 1000 MICROSECOND FROM seq "
        "WHERE n BETWEEN 1 AND 450"
    )
    config = make_config(snapshot={"split_keys": {"audit_log": "event_id"}})
    summary = run_snapshot(spark, config)
    assert summary.rows == 450
    chunks = Ledger(spark, ledger_path(config)).chunks()
    assert len(chunks) >= 4 and all(c.finished for c in chunks)
    assert {c.split_column for c in chunks} == {"event_id"}
    with connect(db_env) as conn:
        oracle = Oracle.load(conn, database, "audit_log", {"audit_log": "event_id"})
    assert_bronze_equals_source(spark, db_env, config, oracle)


# ---------------------------------------------------------------------------------------------
# 7. A primary-key table split by a primary-key column other than the first


def test_primary_key_table_split_by_another_primary_key_column(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    sql(
        "CREATE TABLE shipments (order_id INT NOT NULL, line_no INT NOT NULL, sku VARCHAR(20), "
        "PRIMARY KEY (order_id, line_no))"
    )
    sql(
        f"INSERT INTO shipments WITH RECURSIVE {_SEQ} "
        "SELECT n DIV 50, n MOD 50, CONCAT('sku-', n) FROM seq WHERE n < 500"
    )
    config = make_config(snapshot={"split_keys": {"shipments": "line_no"}, "chunk_size": 100})
    assert run_snapshot(spark, config).rows == 500
    chunks = Ledger(spark, ledger_path(config)).chunks()
    assert len(chunks) >= 4 and {c.split_column for c in chunks} == {"line_no"}
    with connect(db_env) as conn:
        oracle = Oracle.load(conn, database, "shipments", {"shipments": "line_no"})
    assert oracle.schema.key == ("order_id", "line_no")
    assert_bronze_equals_source(spark, db_env, config, oracle)
