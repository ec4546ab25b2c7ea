"""`--log-json`: one JSON object a line, the event's facts as fields, for a machine to read."""

from __future__ import annotations

import json
import logging
import sys

from binlake.jobs.cli import build_parser
from binlake.jobs.json_logs import JsonLines
from binlake.lake.event_log import event
from binlake.model.offsets import BinlogOffset


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "binlake.stream.sink", logging.INFO, __file__, 1, message, args, None
    )
    record.__dict__.update(extra)
    return record


def test_a_batch_line_carries_its_event_as_fields() -> None:
    record = _record(
        "batch %d applied", 7,
        **event("stream_batch", ["shop.b", "shop.a"], BinlogOffset("mysql-bin.000003", 4711),
                rows=12, lag_seconds=1.5),
    )  # fmt: skip
    line = JsonLines().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "batch 7 applied"
    assert parsed["level"] == "INFO" and parsed["logger"] == "binlake.stream.sink"
    assert parsed["time"].endswith("+00:00")
    assert parsed["event"]["kind"] == "stream_batch"
    assert parsed["event"]["tables"] == ["shop.a", "shop.b"]
    assert parsed["event"]["offset"]["file"] == "mysql-bin.000003"
    assert parsed["event"]["rows"] == 12 and parsed["event"]["lag_seconds"] == 1.5
    assert "txn" not in parsed["event"] and "lag_bytes" not in parsed["event"]  # unset: left out


def test_a_plain_line_has_no_event_and_an_error_keeps_its_traceback_in_one_line() -> None:
    assert "event" not in json.loads(JsonLines().format(_record("starting Spark")))
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed")
        record.exc_info = sys.exc_info()
    line = JsonLines().format(record)
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["error"]


def test_every_command_takes_the_option_before_or_after_its_name() -> None:
    assert build_parser().parse_args(["--log-json", "status"]).log_json
    assert build_parser().parse_args(["snapshot", "--log-json"]).log_json
    assert not build_parser().parse_args(["stream"]).log_json
