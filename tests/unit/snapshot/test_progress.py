"""The snapshot's progress lines: a rate a person can trust (now, not averaged over Spark's start),
an ETA from it, and a line while a long batch is read and nothing is marked."""

from __future__ import annotations

import logging

import pytest

from binlake.model.offsets import BinlogOffset
from binlake.snapshot.chunk_states import ChunkState
from binlake.snapshot.chunks import ChunkRange
from binlake.snapshot.ledger import ChunkResult
from binlake.snapshot.progress import QUIET_AT_MOST_S, Progress, Reading, duration

HW = BinlogOffset("b.000001", 4)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _plan(table: str, chunks: int, finished: int = 0) -> list[ChunkState]:
    return [
        ChunkState(table, i, "id", ChunkRange.all(), "finished" if i < finished else "pending")
        for i in range(chunks)
    ]


def _read(table: str, chunk_id: int, rows: int) -> ChunkResult:
    return ChunkResult(table, chunk_id, HW, HW, rows)


def test_the_rate_now_leaves_out_the_start_and_the_eta_divides_by_it() -> None:
    """40 s of Spark start and planning, then 1,000 rows/s: the average says 500 rows/s after
    80 s, the rate now 1,000; 6 chunks of ~10,000 rows left take about a minute."""
    clock = Clock()
    progress = Progress({"d.t": _plan("d.t", 10)}, started=clock.now, clock=clock)
    clock.now += 40
    for chunk_id in range(4):
        clock.now += 10
        progress.add([_read("d.t", chunk_id, 10_000)])
    line = progress.line()
    assert "chunks 4/10 done, tables 0/1, 40,000 rows read" in line
    assert progress.rate_now() == pytest.approx(500.0)  # no sample yet older than the window
    for chunk_id in range(4, 8):
        clock.now += 10
        progress.add([_read("d.t", chunk_id, 10_000)])
    assert progress.rate_now() == pytest.approx(1_000.0)
    assert progress.seconds_left() == pytest.approx(20.0)  # 2 chunks × 10,000 rows at 1,000/s
    line = progress.line()
    assert "1,000 rows/s now (667 since the start)" in line
    assert line.endswith("about 20 s left")


def test_no_eta_before_a_chunk_is_read_nor_once_all_are() -> None:
    clock = Clock()
    progress = Progress({"d.t": _plan("d.t", 2, finished=1)}, started=clock.now, clock=clock)
    clock.now += 5
    assert progress.seconds_left() is None and "left" not in progress.line()
    progress.add([_read("d.t", 1, 7)])
    assert progress.line().startswith("snapshot: chunks 2/2 done, tables 1/1, 7 rows read")
    assert "left" not in progress.line()


def test_the_rate_cap_is_shown_beside_the_rates() -> None:
    clock = Clock()
    progress = Progress({"d.t": _plan("d.t", 3)}, clock.now, cap=5_000, clock=clock)
    clock.now += 1
    progress.add([_read("d.t", 0, 100)])
    assert "(100 since the start, capped at 5,000)" in progress.line()


def test_a_long_batch_gets_a_line_once_the_last_is_old_enough(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    progress = Progress({"d.t": _plan("d.t", 30)}, clock.now, clock=clock)
    reading = [Reading("d.t", 26, clock.now)]
    caplog.set_level(logging.INFO)
    clock.now += QUIET_AT_MOST_S - 1
    progress.report_if_quiet(reading)
    assert not caplog.records
    clock.now += 1
    progress.report_if_quiet(reading)
    progress.report_if_quiet(reading)  # said just now: not again
    assert [r.getMessage() for r in caplog.records] == [
        "snapshot: reading 26 chunks of d.t (30 s so far); chunks 0/30 done"
    ]
    clock.now += QUIET_AT_MOST_S
    progress.report_if_quiet([])  # nothing in flight: nothing to say
    assert len(caplog.records) == 1


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.2, "about 1 s"), (59.4, "about 59 s"), (60, "about 1 min"), (3_569, "about 59 min"),
     (3_599, "about 1 h"), (3_600, "about 1 h"), (3_900, "about 1 h 5 min")],
)  # fmt: skip
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text
