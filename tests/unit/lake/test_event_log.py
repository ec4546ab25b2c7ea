"""The event log's handler: which log lines become rows, what a row holds, and that a failed
append loses nothing (the Delta append itself: tests/integration/test_event_log.py)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pyarrow as pa
import pytest

from binlake.errors import SourceError
from binlake.lake import event_log
from binlake.lake.event_log import EventLog, _ended_by, event, event_row
from binlake.model.offsets import BinlogOffset


def _line(name: str, level: int, message: str, *args: Any, **extra: Any) -> logging.LogRecord:
    return logging.getLogger(name).makeRecord(
        name, level, __file__, 0, message, args, None, extra=extra or None
    )


def test_an_event_line_becomes_a_row_with_its_message_offset_and_figures() -> None:
    line = _line(
        "binlake.stream.sink", logging.INFO, "batch %d applied", 4,
        **event("stream_batch", ["db.b", "db.a"], BinlogOffset("bin.000002", 120), 17, 1.5, 300,
                2.0),
    )  # fmt: skip
    ts, job, kind, tables, file, position, gtid, rows, seconds, lag_bytes, lag_s, message = (
        event_row("silver", line)
    )
    assert ts.timestamp() == pytest.approx(line.created)
    assert (job, kind, tables, file, position, gtid) == (
        "silver", "stream_batch", ["db.a", "db.b"], "bin.000002", 120, None
    )  # fmt: skip
    assert (rows, seconds, lag_bytes, lag_s, message) == (17, 1.5, 300, 2.0, "batch 4 applied")


def test_warnings_and_errors_are_events_of_their_own_kind() -> None:
    warned = event_row("j", _line("binlake.stream.task", logging.WARNING, "purge near"))
    failed = event_row("j", _line("binlake.stream.task", logging.ERROR, "broke"))
    assert (warned[2], warned[4], warned[-1]) == ("warning", None, "purge near")
    assert (failed[2], failed[-1]) == ("error", "broke")


class _Frame:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows
        self.options: dict[str, str] = {}

    def coalesce(self, _: int) -> _Frame:
        return self

    @property
    def write(self) -> _Frame:
        return self

    def format(self, _: str) -> _Frame:
        return self

    def mode(self, _: str) -> _Frame:
        return self

    def option(self, key: str, value: str) -> _Frame:
        self.options[key] = value
        return self


class _Spark:
    def createDataFrame(self, table: pa.Table, _: Any) -> _Frame:
        """The rows of the Arrow table the handler hands Spark, as tuples."""
        return _Frame([tuple(row.values()) for row in table.to_pylist()])


class _FlakyTable:
    """Refuses its first append, as a lake that is briefly unreachable would."""

    def __init__(self) -> None:
        self.appends: list[_Frame] = []
        self.refused = 0

    def save(self, writer: _Frame) -> None:
        if not self.refused:
            self.refused += 1
            raise OSError("lake unreachable")
        self.appends.append(writer)


def test_only_binlake_events_warnings_and_errors_are_kept_and_a_failed_append_loses_none() -> None:
    table = _FlakyTable()
    handler = EventLog(_Spark(), table, "silver", background=False)  # type: ignore[arg-type]
    assert not handler.handle(_line("py4j.clientserver", logging.WARNING, "not ours"))
    assert not handler.handle(_line("binlake.snapshot.task", logging.INFO, "a progress line"))
    assert handler.handle(_line("binlake.stream.task", logging.WARNING, "purge near"))
    batch = event("stream_batch", rows=2, txn=("binlake-stream-q", 3))
    assert handler.handle(_line("binlake.stream.sink", logging.INFO, "batch 3", **batch))  # refused
    assert table.refused == 1 and not table.appends
    handler.flush()
    (written,) = table.appends
    assert [r[-1] for r in written.rows] == ["purge near", "batch 3"]
    assert written.options == {"txnAppId": "binlake-stream-q", "txnVersion": "3"}  # still once


def test_an_error_that_ends_a_job_is_recorded_in_the_words_the_cli_prints() -> None:
    known = _ended_by("silver", SourceError("binlog purged\nre-snapshot"))
    unexpected = _ended_by("silver", KeyError("x"))
    assert known.getMessage() == "silver ended: binlog purged re-snapshot"
    assert unexpected.getMessage() == "silver ended: unexpected KeyError: 'x'"
    assert event_row("silver", known)[2] == "error"


def test_a_run_s_start_is_appended_at_once_and_a_progress_commit_waits_for_company() -> None:
    table = _FlakyTable()
    table.refused = 1  # accepts every append
    handler = EventLog(_Spark(), table, "silver", background=False)  # type: ignore[arg-type]
    progress = event("snapshot_commit", rows=100)
    handler.handle(_line("binlake.snapshot.task", logging.INFO, "chunks 2/9", **progress))
    assert not table.appends  # a commit every few seconds: batched
    handler.handle(_line("binlake.stream.task", logging.INFO, "starting", **event("stream_start")))
    (written,) = table.appends  # a continuous stream may be killed right after its start
    assert [r[2] for r in written.rows] == ["snapshot_commit", "stream_start"]


def test_the_writer_thread_appends_a_batch_s_rows_without_the_batch_waiting() -> None:
    table = _FlakyTable()
    table.refused = 1
    handler = EventLog(_Spark(), table, "silver")  # type: ignore[arg-type]
    batch = event("stream_batch", rows=1, txn=("binlake-stream-q", 1))
    handler.handle(_line("binlake.stream.sink", logging.INFO, "batch 1", **batch))
    deadline = time.monotonic() + 10
    while not table.appends and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [w.options["txnVersion"] for w in table.appends] == ["1"]
    handler.handle(_line("binlake.stream.task", logging.WARNING, "left for the end"))
    handler.close()  # the job's end: what is left goes out, the thread stops
    assert [r[-1] for r in table.appends[-1].rows] == ["left for the end"]
    assert handler._writer is not None and not handler._writer.is_alive()


def test_batches_closer_than_the_batch_interval_share_one_append_under_the_newest_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(event_log.time, "monotonic", lambda: clock[0])
    table = _FlakyTable()
    table.refused = 1
    handler = EventLog(_Spark(), table, "silver", background=False)  # type: ignore[arg-type]

    def batch(n: int) -> None:
        found = event("stream_batch", rows=1, txn=("binlake-stream-q", n))
        handler.handle(_line("binlake.stream.sink", logging.INFO, f"batch {n}", **found))
        clock[0] += 1.0  # a 1 s trigger

    batch(1)  # the first goes out at once
    for n in range(2, 2 + int(event_log.BATCH_FLUSH_S)):
        batch(n)
    assert [w.options["txnVersion"] for w in table.appends] == [
        "1",
        str(1 + int(event_log.BATCH_FLUSH_S)),
    ]
    assert [r[-1] for r in table.appends[1].rows] == [
        f"batch {n}" for n in range(2, 2 + int(event_log.BATCH_FLUSH_S))
    ]
    batch(20)  # waits for company, or for the writer thread's FLUSH_EVERY_S
    assert len(table.appends) == 2
    handler.handle(_line("binlake.stream.task", logging.INFO, "starting", **event("stream_start")))
    assert table.appends[-1].options["txnVersion"] == "20"


def test_rows_of_batches_spark_committed_go_out_without_the_version_of_another_job_s_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(event_log.time, "monotonic", lambda: clock[0])
    mine, theirs = _FlakyTable(), _FlakyTable()
    mine.refused = theirs.refused = 1
    handlers = [
        EventLog(_Spark(), table, job, background=False)  # type: ignore[arg-type]
        for table, job in ((mine, "silver"), (theirs, "other"))
    ]
    root = logging.getLogger("binlake")
    for handler in handlers:
        root.addHandler(handler)
    try:
        for n in (1, 2):  # the first goes out at once, the second waits for company
            found = event("stream_batch", rows=1, txn=("binlake-stream-q", n))
            for handler in handlers:
                handler.handle(_line("binlake.stream.sink", logging.INFO, f"batch {n}", **found))
            clock[0] += 1.0
        event_log.batches_committed("silver")  # its available-now query ended by itself
    finally:
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
    assert [w.options.get("txnVersion") for w in mine.appends] == ["1", None]
    assert [r[-1] for r in mine.appends[1].rows] == ["batch 2"]
    assert [w.options.get("txnVersion") for w in theirs.appends] == ["1", "2"]  # may be replayed


def test_a_batch_worker_appends_each_batch_s_rows_before_the_batch_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark Connect stops a query's `foreachBatch` worker as soon as the query ends: a row
    left to a writer thread, or waiting for company, would die with it."""
    clock = [100.0]
    monkeypatch.setattr(event_log.time, "monotonic", lambda: clock[0])
    table = _FlakyTable()
    table.refused = 1
    handler = EventLog(_Spark(), table, "silver", in_batch_worker=True)  # type: ignore[arg-type]
    assert handler._writer is None  # nothing that outlives the batch
    for n in (1, 2, 3):  # a 1 s trigger: well inside BATCH_FLUSH_S
        handler.handle(_line("binlake.stream.sink", logging.INFO, "ddl", **event("ddl_applied")))
        found = event("stream_batch", rows=n, txn=("binlake-stream-q", n))
        handler.handle(_line("binlake.stream.sink", logging.INFO, f"batch {n}", **found))
        assert [r[-1] for r in table.appends[-1].rows] == ["ddl", f"batch {n}"]
        assert table.appends[-1].options["txnVersion"] == str(n)  # a replay appends it once
        clock[0] += 1.0
    assert len(table.appends) == 3
