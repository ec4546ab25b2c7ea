"""Sources whose global settings differ from the shared server's, each on a throwaway server
(tests/integration/servers.py): the snapshot under another default isolation level, and settings
binlake refuses before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.errors import SourceError
from binlake.jobs import commands
from binlake.mysql.connection import connection
from binlake.mysql.prerequisites import validate
from binlake.snapshot.task import run_snapshot

from .assertions import (
    assert_bronze_equals_source,
    assert_changelog_holds_each_change_once,
    assert_silver_is_source,
    source_columns,
)
from .items import ITEMS, Racer
from .replay import Oracle, connect, subprocess_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _global(db_env: dict[str, str], name: str) -> Any:
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT @@GLOBAL.{name}")
        return cur.fetchone()[0]


def _create(db_env: dict[str, str], database: str, *statements: str) -> None:
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        cur.execute(f"USE `{database}`")
        for statement in statements:
            cur.execute(statement)


def test_private_server_has_its_settings_and_leaves_the_shared_one_alone(
    db_env: dict[str, str], private_mariadb: Any
) -> None:
    server = private_mariadb({"transaction-isolation": "READ-UNCOMMITTED", "skip-log-bin": ""})
    assert server.port != int(db_env["BINLAKE_DB_PORT"])
    assert _global(server.db_env, "tx_isolation") == "READ-UNCOMMITTED"
    assert _global(server.db_env, "log_bin") == 0
    assert _global(db_env, "tx_isolation") == "REPEATABLE-READ"
    assert _global(db_env, "log_bin") == 1


# ---------------------------------------------------------------------------------------------
# A server defaulting to READ UNCOMMITTED: bronze holds committed rows only


def test_snapshot_on_read_uncommitted_server_reads_committed_rows_only(
    spark: Any, private_mariadb: Any, make_private_config: Any
) -> None:
    server = private_mariadb({"transaction-isolation": "READ-UNCOMMITTED"})
    _create(
        server.db_env,
        "shop",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)",
        "INSERT INTO t WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
        "WHERE n < 300) SELECT n, CONCAT('v', n) FROM s",
    )
    config = make_private_config(server, "shop", snapshot={"chunk_size": 100, "parallelism": 2})
    # A transaction that is never committed, open for the whole snapshot: an insert past the
    # last chunk, updates in the first, deletes in the last.
    with connect(server.db_env, "shop") as dirty, dirty.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute("INSERT INTO t VALUES (1001, 'uncommitted'), (1002, 'uncommitted')")
        cur.execute("UPDATE t SET v = 'uncommitted' WHERE id <= 50")
        cur.execute("DELETE FROM t WHERE id > 250")
        try:
            run_snapshot(spark, config)
        finally:
            dirty.rollback()
    with connect(server.db_env) as conn:
        oracle = Oracle.load(conn, "shop", "t")
        assert len(oracle.rows(conn)) == 300
    assert_bronze_equals_source(spark, server.db_env, config, oracle)


# ---------------------------------------------------------------------------------------------
# Binlog settings whose row events the reader cannot decode: refused before any work


def test_compressed_binlog_is_refused_before_any_work(
    private_mariadb: Any, make_private_config: Any, tmp_path: Path
) -> None:
    server = private_mariadb({"log_bin_compress": "ON"})
    _create(server.db_env, "shop", "CREATE TABLE t (id INT PRIMARY KEY, note TEXT)")
    config = make_private_config(server, "shop")

    with connection(config.source) as conn, pytest.raises(SourceError) as raised:
        validate(conn, config)
    message = str(raised.value)
    assert "log_bin_compress=ON" in message and "log_bin_compress=OFF" in message, message

    raw = config.model_dump(mode="json")
    raw["source"]["password"] = server.password  # dumped masked
    config_file = tmp_path / "binlake.yml"
    config_file.write_text(yaml.safe_dump(raw))
    cli = subprocess.run(
        [sys.executable, "-m", "binlake", "snapshot", "--config", str(config_file)],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 4, cli.stderr[-3000:]
    assert "binlake: error: " in cli.stderr and "log_bin_compress=ON" in cli.stderr
    assert "Traceback" not in cli.stderr, cli.stderr[-3000:]
    assert not Path(config.lake.root).exists(), "a refused start wrote to the lake"


# ---------------------------------------------------------------------------------------------
# lower_case_table_names=1 (Azure's default, Windows): DDL naming a table in another case


def test_ddl_naming_a_table_in_another_case_is_followed_under_lower_case_table_names(
    spark: Any, private_mariadb: Any, make_private_config: Any
) -> None:
    """Issue 68 item 7: the server stores `shop`.`orders` and compares names case-insensitively,
    so `TRUNCATE TABLE SHOP.Orders` and `ALTER TABLE ORDERS` change it; the stream follows both
    (silver empties, a column lands second), writes racing the snapshot and the DDL. The config
    names the database `Shop`; the lake keeps the server's spelling."""
    server = private_mariadb({"lower_case_table_names": "1"})
    rows = ", ".join(f"({i}, 'item{i}', {i % 17}, {i}.25, NULL)" for i in range(1, 301))
    _create(server.db_env, "Shop", ITEMS.replace("items", "Orders"),
            f"INSERT INTO ORDERS VALUES {rows}")  # fmt: skip
    config = make_private_config(server, "Shop", snapshot={"chunk_size": 100, "parallelism": 2})
    with connect(server.db_env, "SHOP") as conn, conn.cursor() as cur:  # the DDL's `USE`

        def sql(statement: str, args: Any = None) -> list[tuple[Any, ...]]:
            cur.execute(statement, args)
            return list(cur.fetchall())

        with Racer(server.db_env, "shop", "orders", pause=0.05) as racer:
            run_snapshot(spark, config)
            sql("TRUNCATE TABLE SHOP.Orders")
            sql("INSERT INTO Orders (id, name, qty, price) VALUES (1, 'again', 1, 2.00)")
            sql("ALTER TABLE ORDERS ADD COLUMN extra INT NOT NULL DEFAULT 7 AFTER id")
            sql("INSERT INTO orders (id, name, qty, price, extra) VALUES (2, 'b', 2, 3.00, 8)")
            sql("UPDATE Shop.ORDERS SET note = 'after' WHERE id <= 2")
        assert racer.statements > 0
        commands.stream(spark, config, available_now=True)
        assert [n for n, _ in source_columns(sql, "orders")][:2] == ["id", "extra"]
        assert_silver_is_source(spark, sql, config, "orders", database="shop")
    assert_changelog_holds_each_change_once(spark, config, "orders", database="shop")
