"""Shared fixtures: one Spark session and one MariaDB per test run; a database per test."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.replay import connect

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.fixture(scope="session")
def spark(db_env: dict[str, str]) -> Iterator[Any]:
    from binlake.spark import local_session

    session = local_session("binlake-tests", cores=2)
    yield session
    session.stop()


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


@pytest.fixture
def make_config(db_env: dict[str, str], database: str, tmp_path: Path) -> Callable[..., Any]:
    """A validated Config for the test's database and a lake under tmp_path."""
    from binlake.config import parse_config

    def build(**sections: dict[str, Any]) -> Any:
        raw: dict[str, Any] = {
            "source": {
                "host": "127.0.0.1",
                "port": int(db_env["BINLAKE_SOURCE_PORT"]),
                "user": "binlake",
                "password_env": "BINLAKE_SOURCE_PASSWORD",
                "database": database,
                "server_id_range": [6000 + (uuid.uuid4().int % 1000) * 20, 0],
            },
            "snapshot": {"chunk_size": 100, "parallelism": 2},
            "lake": {"root": str(tmp_path / "lake")},
        }
        raw["source"]["server_id_range"][1] = raw["source"]["server_id_range"][0] + 19
        for section, values in sections.items():
            raw.setdefault(section, {}).update(values)
        return parse_config(raw)

    return build
