"""`source.password_secret`: the password read from a Databricks secret scope (serverless jobs
take no environment variables), through `workspace_api`'s Secrets API on loopback and the real
`databricks-sdk` client; the value appears in no log line, even at debug level."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.config.secrets import read_secret
from binlake.jobs import cli

from .assertions import assert_silver_is_source
from .items import seed_items
from .workspace_api import Workspace

REFERENCE = "binlake/source-password"


@pytest.fixture(autouse=True)
def _fresh_secrets() -> None:
    read_secret.cache_clear()  # one read per process: each test has a workspace of its own


def _config_file(config: Any, tmp_path: Path) -> Path:
    path = tmp_path / "binlake.yml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    return path


def test_a_snapshot_reads_the_password_from_the_secret_scope_and_never_logs_it(
    spark: Any,
    workspace_api: Workspace,
    db_env: dict[str, str],
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The driver's connections and the Spark tasks' chunk reads all use the secret's value;
    the stream takes the same resolved source (`config.secrets.with_resolved_password`)."""
    password = db_env["BINLAKE_SOURCE_PASSWORD"]
    workspace_api.secrets[("binlake", "source-password")] = password
    monkeypatch.delenv("BINLAKE_SOURCE_PASSWORD")
    seed_items(sql, 300)
    config = make_config(source={"password_secret": REFERENCE}, snapshot={"chunk_size": 50})
    caplog.set_level(logging.DEBUG)

    code = cli.main(["-v", "snapshot", "--config", str(_config_file(config, tmp_path))])

    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    assert_silver_is_source(spark, sql, config, "items", layer="bronze")
    logged = out.out + out.err + caplog.text
    assert password not in logged and base64.b64encode(password.encode()).decode() not in logged
    assert "**REDACTED**" in logged  # the SDK's debug log of the secret's response
    assert any("/api/2.0/secrets/get" in m for m in caplog.messages), "the SDK's call not seen"


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        ({}, "the workspace has no secret 'source-password' in scope 'binlake'"),
        ({("binlake", "other-key"): "x"}, "databricks secrets put-secret binlake source-password"),
    ],
)
def test_a_missing_secret_is_one_clear_error_before_spark_starts(
    workspace_api: Workspace,
    make_config: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stored: dict[tuple[str, str], str],
    message: str,
) -> None:
    workspace_api.secrets.update(stored)
    config = make_config(source={"password_secret": REFERENCE})

    code = cli.main(["snapshot", "--config", str(_config_file(config, tmp_path))])

    lines = capsys.readouterr().err.splitlines()
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"binlake: error: source.password_secret {REFERENCE!r}: ")
    assert message in lines[0]
