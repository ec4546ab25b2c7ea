"""`--log-json`: each log line as one JSON object on stderr, for machines (a log shipper, a job's
driver log searched by field) rather than people.

A line's event (`lake.event_log.event`: a batch's tables, offset, rows, lag) travels in its
`event` field, the same facts the event log records; the message stays what a person reads.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import UTC, datetime
from typing import Any


class JsonLines(logging.Formatter):
    """A record as `{"time", "level", "logger", "message"[, "event"][, "error"]}`, one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        happened = getattr(record, "event", None)
        if dataclasses.is_dataclass(happened) and not isinstance(happened, type):
            line["event"] = _plain(dataclasses.asdict(happened))
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _plain(fields: dict[str, Any]) -> dict[str, Any]:
    """An event's fields without the empty ones (a batch's line has no `txn` of a commit's)."""
    return {name: value for name, value in fields.items() if value not in (None, (), [])}
