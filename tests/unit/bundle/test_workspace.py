"""The workspace client binlake's job pause uses (binlake.runtime.workspace): its timeouts are
bounded. binlake asks no workspace to validate a bundle and deploys nothing itself (`databricks
bundle deploy` does)."""

from __future__ import annotations

import pytest
from databricks.sdk.core import Config

from binlake.jobs import cli
from binlake.runtime.workspace import (
    HTTP_TIMEOUT_SECONDS,
    RETRY_TIMEOUT_SECONDS,
    Connection,
    workspace_client,
)

from .bundles import REPO


def test_client_timeouts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABRICKS_TOKEN", "test-token")
    # The SDK asks an unreachable host for its metadata until the retry timeout (17 s): skipped.
    monkeypatch.setattr(Config, "_resolve_host_metadata", lambda self: None)

    client = workspace_client(Connection.of({"host": "http://127.0.0.1:9", "profile": None}))

    assert client.config.http_timeout_seconds == HTTP_TIMEOUT_SECONDS <= 30
    assert client.config.retry_timeout_seconds == RETRY_TIMEOUT_SECONDS <= 60


def test_validate_asks_no_workspace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/databrickscfg")

    code = cli.main(["bundle", "validate", "--target", "dev", "--root", str(REPO)])

    out = capsys.readouterr().out
    assert code == 0, out
    assert "silver_catchup (binlake silver catch-up): snapshot → stream" in out


def test_deploy_is_the_databricks_clis(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bundle", "deploy", "--target", "dev", "--root", str(REPO)])

    err = capsys.readouterr().err
    assert code == 2
    assert "databricks bundle deploy -t dev" in err
