"""The stream's per-batch log line reads Spark's progress, which a Spark Connect client may
report with fields left out: the counts and rates must still be the batch's own."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from binlake.stream.sink import lag_text
from binlake.stream.task import RunningBatch, _input_rows, _rate, offset_text


def _progress(**fields: Any) -> dict[str, Any]:
    return {"batchId": 3, "sources": [{"numInputRows": 120}, {"numInputRows": 30}], **fields}


def test_input_rows_prefer_the_query_total() -> None:
    assert _input_rows(_progress(numInputRows=151)) == 151


def test_input_rows_sum_the_sources_when_the_total_is_left_out() -> None:
    assert _input_rows(_progress()) == 150


@pytest.mark.parametrize(
    ("fields", "rate"),
    [
        ({"processedRowsPerSecond": 42.5, "durationMs": {"triggerExecution": 1000}}, 42.5),
        ({"processedRowsPerSecond": 0.0, "durationMs": {"triggerExecution": 4000}}, 37.5),
        ({"durationMs": {"triggerExecution": 500}}, 300.0),
        ({"durationMs": {}}, 0.0),
        ({}, 0.0),
    ],
    ids=["reported", "reported-as-zero", "left-out", "no-duration", "nothing"],
)
def test_rate_falls_back_to_the_batch_run_time(fields: dict[str, Any], rate: float) -> None:
    assert _rate(_progress(**fields), 150) == rate


@pytest.mark.parametrize(
    "offset",
    [
        '{"file": "mysql-bin.000012", "pos": 4711, "commit_ts": 1765000000}',
        {"file": "mysql-bin.000012", "pos": 4711, "gtid": "0-1-9"},
    ],
    ids=["json-text", "parsed"],
)
def test_offsets_read_as_file_and_position_whatever_form_the_progress_holds(
    offset: str | dict[str, Any],
) -> None:
    """Before: the line showed the offset's JSON, beside `file:pos` in every other line."""
    assert offset_text(offset) == "mysql-bin.000012:4711"


@pytest.mark.parametrize(
    ("offset", "text"),
    [(None, "-"), ("null", "-"), ("", "-"), ("  ", "-"), ("{}", "{}"), ("x", "x")],
)
def test_an_offset_the_progress_does_not_hold_never_fails_the_line(
    offset: str | None, text: str
) -> None:
    """On Spark 4.0 the catch-up ended with exit 70, JSONDecodeError: the progress of a Python
    source has an empty `latestOffset` there."""
    assert offset_text(offset) == text


@pytest.mark.parametrize(
    ("lag", "text"),
    [
        ((0, 0.0), "caught up"),
        ((12_345, 61.4), "12,345 binlog bytes, 61 s behind the source"),
        ((None, None), "lag unknown"),
    ],
)
def test_a_batch_line_says_how_far_behind_the_source_it_is(
    lag: tuple[int | None, float | None], text: str
) -> None:
    assert lag_text(*lag) == text


class _Query:
    """What `RunningBatch` reads of a streaming query: its status and last progress."""

    def __init__(self) -> None:
        self.status: dict[str, Any] = {"isTriggerActive": False, "isDataAvailable": False}
        self.lastProgress: dict[str, Any] | None = None

    def running(self, message: str = "Processing new data") -> None:
        self.status = {"isTriggerActive": True, "isDataAvailable": True, "message": message}

    def idle(self, last_batch: int) -> None:
        self.status = {"isTriggerActive": False, "isDataAvailable": False}
        self.lastProgress = {"batchId": last_batch}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _running_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "running" in r.getMessage()]


def test_a_long_batch_gets_a_line_every_thirty_seconds(caplog: pytest.LogCaptureFixture) -> None:
    """The first batch of a large backlog runs for minutes: on an earlier commit nothing was
    said between `starting at` and its end."""
    caplog.set_level(logging.INFO, "binlake.stream.task")
    query, clock = _Query(), _Clock()
    batch = RunningBatch("silver", clock)
    query.running()
    for clock.now in (0.0, 10.0, 20.0, 31.0, 45.0, 62.0):
        batch.report_if_long(query)  # type: ignore[arg-type]
    assert _running_lines(caplog) == [
        "stream silver: batch 0 running, 31 s so far (processing new data)",
        "stream silver: batch 0 running, 62 s so far (processing new data)",
    ]


def test_short_batches_and_idle_polls_say_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Each batch's own 20 s does not add up across batches, and an idle stream (no trigger
    with data) never claims a batch is running."""
    caplog.set_level(logging.INFO, "binlake.stream.task")
    query, clock = _Query(), _Clock()
    batch = RunningBatch("silver", clock)
    for n in range(5):
        query.running()
        batch.report_if_long(query)  # type: ignore[arg-type]
        clock.now += 20
        batch.report_if_long(query)  # type: ignore[arg-type]
        query.idle(n)
        clock.now += 20
        batch.report_if_long(query)  # type: ignore[arg-type]
    assert _running_lines(caplog) == []
