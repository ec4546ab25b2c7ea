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
from binlake.mysql.connection import connection
from binlake.mysql.prerequisites import validate
from binlake.snapshot.task import run_snapshot

from .assertions import assert_bronze_equals_source
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
    assert server.port != int(db_env["BINLAKE_SOURCE_PORT"])
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
