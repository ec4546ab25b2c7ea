"""Large changes through the snapshot's windows and the stream's batches: rows of several MB
(LONGBLOB, LONGTEXT) updated while their chunks are read, and one transaction of 100,000 rows.
Silver must equal the source byte for byte (chispa), each change once in the changelog."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest

from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .replay import connect

pytestmark = pytest.mark.integration

MB = 1 << 20


def _body(seed: int, size: int) -> bytes:
    """`size` bytes that differ per seed everywhere (no two rows share a prefix)."""
    block = hashlib.sha256(str(seed).encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def test_multi_megabyte_rows_and_a_100k_row_transaction(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    sql("CREATE TABLE blobs (id INT PRIMARY KEY, body LONGBLOB NOT NULL, note LONGTEXT)")
    sql("CREATE TABLE bulk (id INT PRIMARY KEY, n INT NOT NULL, tag VARCHAR(16) NOT NULL)")
    for i in range(1, 9):
        sql("INSERT INTO blobs VALUES (%s, %s, %s)", (i, _body(i, 3 * MB), "é" * (MB // 2)))
    with connect(db_env, database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION max_recursive_iterations = 200000")
        cur.execute(
            "INSERT INTO bulk WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
            "WHERE n < 20000) SELECT n, n, 'seed' FROM s"
        )
    config = make_config(snapshot={"chunk_size": 2, "parallelism": 2})
    stop = threading.Event()

    def rewrite_blobs() -> None:
        """Multi-MB updates landing inside the snapshot's chunk windows."""
        with connect(db_env, database) as conn, conn.cursor() as cur:
            for version in range(100, 116):  # ~16 × 8 MB of binlog (before and after images)
                if stop.wait(0.3):
                    return
                cur.execute(
                    "UPDATE blobs SET body = %s, note = %s WHERE id = %s",
                    (_body(version, 4 * MB), f"v{version}" * 1000, version % 8 + 1),
                )

    writer = threading.Thread(target=rewrite_blobs, daemon=True)
    writer.start()
    try:
        commands.snapshot(spark, config)
    finally:
        stop.set()
        writer.join()

    # One transaction of 100,000 row changes, then more multi-MB images, for the stream.
    with connect(db_env, database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION max_recursive_iterations = 200000")
        cur.execute("BEGIN")
        cur.execute("UPDATE bulk SET n = n + 1, tag = 'updated'")  # 20,000 updates
        cur.execute(
            "INSERT INTO bulk WITH RECURSIVE s(n) AS (SELECT 20001 UNION ALL SELECT n + 1 "
            "FROM s WHERE n < 90000) SELECT n, n, 'txn' FROM s"
        )  # 70,000 inserts
        cur.execute("DELETE FROM bulk WHERE id % 2 = 0 AND id <= 20000")  # 10,000 deletes
        cur.execute("COMMIT")
        cur.execute("UPDATE blobs SET body = %s WHERE id IN (1, 2)", (_body(999, 6 * MB),))
        cur.execute("DELETE FROM blobs WHERE id = 3")
    commands.stream(spark, config, available_now=True)

    for table in ("blobs", "bulk"):
        assert_silver_is_source(spark, sql, config, table)
        assert_changelog_holds_each_change_once(spark, config, table)
    changes = spark.read.format("delta").load(
        config.lake.path("bronze", database, "bulk__changelog")
    )
    assert changes.count() == 100_000
