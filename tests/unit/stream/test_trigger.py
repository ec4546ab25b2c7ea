"""`stream_task.trigger`: how a continuous stream runs where the compute refuses a processing-time
trigger (Databricks serverless runs only AvailableNow and Once). The catch-up runs themselves
are the real stream's, tested against the real database (`test_spark_connect`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.config.settings import Config, parse_config
from binlake.lake.files import ArrowFiles
from binlake.stream import task as stream_task

REFUSED = (
    "[INFINITE_STREAMING_TRIGGER_NOT_SUPPORTED] Trigger type ProcessingTime is not supported "
    "for this cluster type. Use a different trigger type e.g. AvailableNow, Once."
)


class _Stop(Exception):
    """Ends the otherwise endless repetition of catch-up runs."""


def _config(tmp_path: Path, trigger: str) -> Config:
    return parse_config(
        {
            "source": {"database": "shop"},
            "lake": {"root": str(tmp_path / "lake")},
            "stream": {"trigger": trigger, "trigger_interval": "10ms"},
        }
    )


def _runs(monkeypatch: pytest.MonkeyPatch, refusal: str, runs: int = 3) -> list[bool]:
    """Stand in for the query runs: a processing-time start fails with `refusal`; the catch-up
    runs succeed until the `runs`th. Returns `available_now` of each run, as it happens."""
    calls: list[bool] = []

    def run(
        spark: Any, config: Config, lease: Any, available_now: bool
    ) -> stream_task.StreamSummary:
        calls.append(available_now)
        if not available_now:
            raise RuntimeError(refusal)
        if len(calls) >= runs:
            raise _Stop
        return stream_task.StreamSummary(1, 1, 0.0)

    monkeypatch.setattr(stream_task, "_run_stream", run)
    monkeypatch.setattr(stream_task, "driver_files", lambda spark: ArrowFiles())
    return calls


def test_auto_turns_a_refused_processing_time_trigger_into_repeated_catch_ups(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _runs(monkeypatch, REFUSED)
    with pytest.raises(_Stop):
        stream_task.run_stream(None, _config(tmp_path, "auto"))  # type: ignore[arg-type]
    assert calls == [False, True, True]


def test_available_now_never_starts_a_processing_time_query(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _runs(monkeypatch, REFUSED, runs=2)
    with pytest.raises(_Stop):
        stream_task.run_stream(None, _config(tmp_path, "available_now"))  # type: ignore[arg-type]
    assert calls == [True, True]


@pytest.mark.parametrize(
    ("trigger", "refusal"),
    [("processing_time", REFUSED), ("auto", "Connection refused: the source went away")],
    ids=["processing-time-is-kept", "other-failures-are-not-a-refusal"],
)
def test_any_other_failure_ends_the_stream(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trigger: str, refusal: str
) -> None:
    calls = _runs(monkeypatch, refusal)
    with pytest.raises(RuntimeError, match=refusal[:20].replace("[", r"\[")):
        stream_task.run_stream(None, _config(tmp_path, trigger))  # type: ignore[arg-type]
    assert calls == [False]


def test_the_config_refuses_an_unknown_trigger(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="trigger"):
        _config(tmp_path, "continuous")
