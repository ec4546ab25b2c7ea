"""Fixtures of the integration tests: one MariaDB per test run (the project's, started by
scripts/db.sh) and a database per test; throwaway servers for tests that need other server
settings; users, writers and extra databases on the shared server; and what starts something of
its own (a Spark Connect server, a fake Databricks workspace)."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from .accounts import accounts
from .connect_server import REMOTE_TZ, connect_server
from .items import Racer
from .replay import ROOT, connect
from .servers import PrivateServer, private_server
from .workspace_api import TOKEN, Workspace, serving


@pytest.fixture(scope="session")
def db_env() -> dict[str, str]:
    """Start the project's MariaDB (idempotent) and export its port and password."""
    subprocess.run([str(ROOT / "scripts" / "db.sh"), "up"], check=True, capture_output=True)
    exported = subprocess.run(
        [str(ROOT / "scripts" / "db.sh"), "env"], check=True, capture_output=True, text=True
    ).stdout
    env = dict(re.findall(r"(\w+)=(\S+)", exported))
    os.environ.update(env)
    return env


@pytest.fixture
def database(db_env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database named after the test, dropped afterwards."""
    name = re.sub(r"\W", "_", request.node.name)[:40] + "_" + uuid.uuid4().hex[:6]
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
    yield name
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def sql(db_env: dict[str, str], database: str) -> Callable[..., list[tuple[Any, ...]]]:
    """Run SQL in the test's database: sql("INSERT ... %s", (1,)) → fetched rows."""

    def run(statement: str, args: Any = None) -> list[tuple[Any, ...]]:
        with connect(db_env, database) as conn, conn.cursor() as cur:
            cur.execute(statement, args)
            return list(cur.fetchall())

    return run


def _config(source: dict[str, Any], lake: Path, sections: dict[str, dict[str, Any]]) -> Any:
    """A validated Config: `source` (port, password, database) on 127.0.0.1, the lake at `lake`,
    a fresh range of replica server ids, `sections` merged over the test defaults."""
    from binlake.config.settings import parse_config

    low = 6000 + (uuid.uuid4().int % 1000) * 20
    raw: dict[str, Any] = {
        "source": {
            "host": "127.0.0.1",
            "user": "binlake",
            **source,
            "server_id_range": [low, low + 19],
        },
        "snapshot": {"chunk_size": 100, "parallelism": 2},
        # The event log is on by default; its tests turn it on (an append per run start, end
        # and stream batch would cost the suite minutes where nothing reads it).
        "lake": {"root": str(lake), "event_log": False},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return parse_config(raw)


@pytest.fixture
def make_config(db_env: dict[str, str], database: str, tmp_path: Path) -> Callable[..., Any]:
    """A validated Config for the test's database and a lake under tmp_path."""

    def build(**sections: dict[str, Any]) -> Any:
        source = {
            "port": int(db_env["BINLAKE_DB_PORT"]),
            "password_env": "BINLAKE_SOURCE_PASSWORD",
            "database": database,
        }
        return _config(source, tmp_path / "lake", sections)

    return build


@pytest.fixture
def private_mariadb() -> Iterator[Callable[[Mapping[str, str]], PrivateServer]]:
    """Start throwaway MariaDBs with extra my.cnf settings, stopped when the test ends:
    `server = private_mariadb({"transaction-isolation": "READ-UNCOMMITTED"})`. For settings the
    shared server must not get: other tests run against it at the same time."""
    with ExitStack() as servers:
        yield lambda settings: servers.enter_context(private_server(settings))


@pytest.fixture
def make_private_config(tmp_path: Path) -> Callable[..., Any]:
    """make_config for a throwaway server: `make_private_config(server, database, **sections)`
    (the password inline, the environment untouched)."""

    def build(server: PrivateServer, database: str, **sections: dict[str, Any]) -> Any:
        source = {
            "port": server.port,
            "password": server.password,
            "password_env": None,
            "database": database,
        }
        return _config(source, tmp_path / "lake", sections)

    return build


@pytest.fixture
def racer(db_env: dict[str, str], database: str) -> Callable[..., Racer]:
    """A writer racing the stream on a table of the test's database: `with racer("items"): ...`."""
    return lambda table="items": Racer(db_env, database, table)


@pytest.fixture
def in_database(
    db_env: dict[str, str], database: str
) -> Iterator[Callable[[str], Callable[..., list[tuple[Any, ...]]]]]:
    """`in_database(suffix)`: an SQL runner in database `<test database>_<suffix>`, created on
    first use and dropped after the test."""
    made: list[str] = []

    def runner(suffix: str) -> Callable[..., list[tuple[Any, ...]]]:
        name = f"{database}_{suffix}"
        if name not in made:
            with connect(db_env) as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE `{name}`")
            made.append(name)

        def run(statement: str, args: Any = None) -> list[tuple[Any, ...]]:
            with connect(db_env, name) as conn, conn.cursor() as cur:
                cur.execute(statement, args)
                return list(cur.fetchall())

        return run

    yield runner
    with connect(db_env) as conn, conn.cursor() as cur:
        for name in made:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def account(
    db_env: dict[str, str], database: str, make_config: Callable[..., Any]
) -> Iterator[Callable[..., Any]]:
    """`account(*grants, role_grants=())` → a config for a new user holding `grants` (each
    "PRIVILEGES ON target", target `{db}` for the test's database), and `role_grants` only
    through its default role (accounts.py)."""
    with accounts(database, make_config) as create:
        yield create


@pytest.fixture(scope="session")
def spark_remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Spark Connect server with Delta for the run, started by the first test that asks, in
    `REMOTE_TZ`: (its URL, its work dir, which holds its log)."""
    workdir = tmp_path_factory.mktemp("connect")
    with connect_server(workdir, tz=REMOTE_TZ) as url:
        yield url, workdir


@pytest.fixture
def workspace_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fake Databricks workspace on loopback (`workspace_api.Workspace`) that the SDK's default
    client reaches: `DATABRICKS_HOST` and `DATABRICKS_TOKEN` point at it for the test."""
    workspace = Workspace()
    with serving(workspace) as url:
        workspace.url = url
        monkeypatch.setenv("DATABRICKS_HOST", url)
        monkeypatch.setenv("DATABRICKS_TOKEN", TOKEN)
        yield workspace
