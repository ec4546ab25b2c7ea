"""TLS to the source (`source.tls`, `source.tls_ca`): every connection binlake opens (PyMySQL for
metadata, MySQLdb for bulk reads, the binlog reader) honours the mode.

Two throwaway servers, one per module: `tls_server` holds a certificate for 127.0.0.1 and
localhost signed by a test CA and refuses every plaintext connection
(`require_secure_transport=ON`), so a run that works there used TLS on every connection;
`plain_server` offers no TLS at all, where `required` and stronger must refuse to connect.
"""

from __future__ import annotations

import random
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.config.settings import Config, parse_config
from binlake.errors import SourceError
from binlake.jobs import commands
from binlake.jobs.verify import verify_silver
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.mysql.binlog import read_changes
from binlake.mysql.connection import bulk_connection, connection

from .assertions import assert_silver_equals_source
from .replay import Writers, connect
from .servers import PrivateServer, private_server
from .tls_certs import TlsFiles, make_tls_files, session_cipher
from .workload import TABLES, Workload, create_tables, seed

pytestmark = pytest.mark.integration

DATABASE = "shop"
FIRST = BinlogOffset("mysql-bin.000001", 4)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def _with_shop(server: PrivateServer) -> None:
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"USE {DATABASE}")
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO t VALUES (1), (2)")


@pytest.fixture(scope="module")
def tls_server(tls_files: TlsFiles) -> Iterator[PrivateServer]:
    settings = {
        "ssl_ca": str(tls_files.ca),
        "ssl_cert": str(tls_files.cert),
        "ssl_key": str(tls_files.key),
        "require_secure_transport": "ON",  # MariaDB ≥ 10.5.2
    }
    with private_server(settings) as server:
        # The oracle's plain PyMySQL connections negotiate TLS (PyMySQL's default, unverified).
        with connect(server.db_env) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@have_ssl, @@require_secure_transport")
            assert cur.fetchone() == ("YES", 1), "the server did not take its TLS settings"
        _with_shop(server)
        yield server


@pytest.fixture(scope="module")
def plain_server() -> Iterator[PrivateServer]:
    with private_server({}) as server:
        with connect(server.db_env) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@have_ssl")
            assert cur.fetchone()[0] != "YES", "the server offers TLS"
        _with_shop(server)
        yield server


def _config(server: PrivateServer, lake: Path | None = None, **source: Any) -> Config:
    low = 7000 + (uuid.uuid4().int % 1000) * 20
    raw: dict[str, Any] = {
        "source": {
            "host": "127.0.0.1",
            "port": server.port,
            "user": "binlake",
            "password": server.password,
            "password_env": None,
            "database": DATABASE,
            "server_id_range": [low, low + 19],
            **source,
        },
        "snapshot": {"chunk_size": 100, "parallelism": 2},
        "lake": {"root": str(lake or "unused-lake")},
    }
    return parse_config(raw)


def _pymysql_cipher(config: Config) -> str:
    with connection(config.source) as conn:
        return session_cipher(conn)


def _bulk_cipher(config: Config) -> str:
    with bulk_connection(config.source) as conn:
        return session_cipher(conn)


#: The table `_with_shop` creates, as the binlog reader needs it.
TABLE = TableSchema(DATABASE, "t", (Column("id", "int", "int", False),), ("id",), "id")


def _binlog_read(config: Config) -> None:
    """Read the binlog from its start (a fresh server's first file) through the binlog reader,
    whose control and stream connections are the only ones opened."""
    list(read_changes(config.source, config.stream_server_id, [TABLE], FIRST))


#: The three ways binlake connects, each a function of the config.
PATHS: dict[str, Callable[[Config], Any]] = {
    "pymysql": _pymysql_cipher,
    "mysqldb": _bulk_cipher,
    "binlog": _binlog_read,
}


# ---------------------------------------------------------------------------------------------
# Each mode against the TLS-only server


@pytest.mark.parametrize("mode", ["preferred", "required", "verify_ca", "verify_identity"])
def test_every_tls_mode_connects_with_tls(
    mode: str, tls_server: PrivateServer, tls_files: TlsFiles
) -> None:
    ca = {"tls_ca": str(tls_files.ca)} if mode.startswith("verify") else {}
    config = _config(tls_server, tls=mode, **ca)
    assert _pymysql_cipher(config)
    assert _bulk_cipher(config)
    _binlog_read(config)  # the server refuses plaintext: reading at all proves TLS


@pytest.mark.parametrize("path", sorted(PATHS))
def test_disabled_tls_is_refused_by_a_tls_only_server(path: str, tls_server: PrivateServer) -> None:
    with pytest.raises(SourceError) as raised:
        PATHS[path](_config(tls_server, tls="disabled"))
    assert "Access denied" in str(raised.value) or "access denied" in str(raised.value)


# ---------------------------------------------------------------------------------------------
# Certificate checks


@pytest.mark.parametrize("path", sorted(PATHS))
def test_verify_ca_with_another_ca_fails_clearly(
    path: str, tls_server: PrivateServer, tls_files: TlsFiles
) -> None:
    config = _config(tls_server, tls="verify_ca", tls_ca=str(tls_files.other_ca))
    with pytest.raises(SourceError) as raised:
        PATHS[path](config)
    message = str(raised.value)
    assert f"127.0.0.1:{tls_server.port}" in message, message
    assert "verify_ca" in message and "source.tls_ca" in message, message
    assert tls_server.password not in message


def _unlisted_name() -> str:
    """A name of this machine that resolves to 127.0.0.1 but is not in the certificate."""
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        address = None
    if name in ("localhost", "127.0.0.1") or address != "127.0.0.1":
        pytest.skip(f"the host name {name!r} does not resolve to 127.0.0.1 ({address})")
    return name


@pytest.mark.parametrize("path", sorted(PATHS))
def test_verify_identity_checks_the_host_name_and_verify_ca_does_not(
    path: str, tls_server: PrivateServer, tls_files: TlsFiles
) -> None:
    name = _unlisted_name()
    ca = str(tls_files.ca)
    PATHS[path](_config(tls_server, host=name, tls="verify_ca", tls_ca=ca))
    with pytest.raises(SourceError) as raised:
        PATHS[path](_config(tls_server, host=name, tls="verify_identity", tls_ca=ca))
    message = str(raised.value)
    assert f"{name}:{tls_server.port}" in message and "verify_identity" in message, message


# ---------------------------------------------------------------------------------------------
# A server without TLS: `required` and stronger never fall back to plaintext


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("mode", ["required", "verify_ca", "verify_identity"])
def test_required_tls_never_falls_back_to_plaintext(
    mode: str, path: str, plain_server: PrivateServer, tls_files: TlsFiles
) -> None:
    ca = {"tls_ca": str(tls_files.ca)} if mode.startswith("verify") else {}
    with pytest.raises(SourceError) as raised:
        PATHS[path](_config(plain_server, tls=mode, **ca))
    message = str(raised.value)
    assert f"127.0.0.1:{plain_server.port} does not offer TLS" in message, message
    assert mode in message, message


def test_preferred_tls_falls_back_to_plaintext(plain_server: PrivateServer) -> None:
    config = _config(plain_server, tls="preferred")
    assert _pymysql_cipher(config) == _bulk_cipher(config) == ""
    _binlog_read(config)


# ---------------------------------------------------------------------------------------------
# End to end: snapshot and stream under verify_identity, every connection over TLS


def test_snapshot_and_stream_under_verify_identity(
    spark: Any, tls_server: PrivateServer, tls_files: TlsFiles, tmp_path: Path
) -> None:
    rows = 300
    with connect(tls_server.db_env) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE e2e")
        cur.execute("USE e2e")
        create_tables(cur)
        seed(cur, rows, random.Random(1))
    config = _config(
        tls_server, tmp_path / "lake", database="e2e", tls="verify_identity",
        tls_ca=str(tls_files.ca),
    )  # fmt: skip
    workload = Workload(rows)
    writers = Writers(tls_server.db_env, "e2e", workload.step, threads=2, max_ops=3000,
                      pause_s=0.03)  # fmt: skip
    with writers:
        summary = commands.snapshot(spark, config)
    assert writers.ops > 0 and summary.chunks_read == summary.chunks
    commands.stream(spark, config, available_now=True)
    for table in TABLES:
        assert_silver_equals_source(spark, tls_server.db_env, config, table)
    assert verify_silver(spark, config).identical
