"""The stream's per-batch log line reads Spark's progress, which a Spark Connect client may
report with fields left out: the counts and rates must still be the batch's own."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.stream.task import _input_rows, _rate


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
