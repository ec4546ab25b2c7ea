"""Issue 25: on a Databricks runtime the job uses the runtime's session. A wheel task can start
before a session is active, and binlake then built a local one through
`configure_spark_with_delta_pip`, which fails there (Delta's jars come with the runtime, not
from Maven): the job exited 70."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from binlake.runtime import spark as sessions


class _Builder:
    def __init__(self) -> None:
        self.created = 0

    def getOrCreate(self) -> str:
        self.created += 1
        return "the runtime's session"


@pytest.fixture
def no_active_session(monkeypatch: pytest.MonkeyPatch) -> _Builder:
    builder = _Builder()
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(SparkSession, "builder", builder)

    def local(*args: Any, **kwargs: Any) -> str:
        return "a local session"

    monkeypatch.setattr(sessions, "local_session", local)
    return builder


def test_a_databricks_runtime_gets_its_own_session(
    no_active_session: _Builder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    assert sessions.get_or_create() == "the runtime's session"
    assert no_active_session.created == 1


def test_elsewhere_a_local_session_is_built(
    no_active_session: _Builder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    assert sessions.get_or_create() == "a local session"
    assert no_active_session.created == 0
