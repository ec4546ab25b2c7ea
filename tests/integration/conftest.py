"""Fixtures of the integration tests that start something of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .connect_server import connect_server
from .workspace_api import TOKEN, Workspace, serving

#: The Spark Connect server's and its clients' time zone: not the tests' (UTC), so a value that
#: depends on a process's zone differs.
REMOTE_TZ = "Europe/Paris"


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
