"""`snapshot.max_rows_per_second`: each reader's token bucket, on a fake clock (nothing sleeps).
The cases are the ones that break a naive bucket: bursts, a reader slower than its share saving
up, many readers, a chunk larger than a second's rows, and the cap off."""

from __future__ import annotations

import random

import pytest

from binlake.snapshot.pacing import RowBudget, reader_share


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(budget: RowBudget, clock: Clock, reads: list[tuple[float, int]]) -> int:
    """Reads of (seconds, rows) one after another, each followed by the wait asked for; the
    rows read."""
    for seconds, rows in reads:
        clock.now += seconds
        clock.now += budget.spend(rows)
    return sum(rows for _, rows in reads)


def test_reads_faster_than_the_rate_wait_the_difference() -> None:
    clock = Clock()
    budget = RowBudget(100, clock)
    clock.now += 0.5
    assert budget.spend(100) == pytest.approx(0.5)  # 100 rows take 1 s at 100/s


def test_a_chunk_larger_than_a_seconds_rows_waits_several_seconds() -> None:
    clock = Clock()
    assert RowBudget(10, clock).spend(8096) == pytest.approx(809.6)


def test_a_burst_without_waiting_keeps_its_debt() -> None:
    clock = Clock()
    budget = RowBudget(100, clock)
    assert [budget.spend(50) for _ in range(4)] == pytest.approx([0.5, 1.0, 1.5, 2.0])


def test_a_reader_slower_than_its_share_saves_nothing_for_later() -> None:
    clock = Clock()
    budget = RowBudget(100, clock)
    clock.now += 60  # a minute on one slow read of 10 rows
    assert budget.spend(10) == 0
    assert budget.spend(100) == pytest.approx(1.0)  # not 50 s of saved rows spent at once


@pytest.mark.parametrize("seed", range(5))
def test_over_a_run_the_rate_stays_within_ten_percent(seed: int) -> None:
    """Chunks of any size read at any speed: rows / time at the end is at most the rate (the
    reader waits after its last read too), and close to it for a fast reader."""
    rng = random.Random(seed)
    clock = Clock()
    began = clock.now
    budget = RowBudget(1000, clock)
    reads = [(rng.uniform(0.001, 0.3), rng.randint(0, 5000)) for _ in range(300)]
    rows = _run(budget, clock, reads)
    rate = rows / (clock.now - began)
    assert 900 <= rate <= 1000 * 1.000001


def test_many_readers_share_the_cap() -> None:
    """`parallelism × concurrent_tables` readers, each paced alone, read no more than the cap
    together, a chunk each beyond it at most."""
    readers, cap, chunk = 16, 4000, 500
    clocks = [Clock() for _ in range(readers)]
    budgets = [RowBudget(reader_share(cap, readers), clock) for clock in clocks]
    totals = [_run(b, c, [(0.01, chunk)] * 40) for b, c in zip(budgets, clocks, strict=True)]
    elapsed = max(c.now for c in clocks) - 100.0
    assert sum(totals) <= cap * elapsed + readers * chunk
    assert sum(totals) / elapsed == pytest.approx(cap, rel=0.1)


def test_no_cap_never_waits() -> None:
    clock = Clock()
    budget = RowBudget(reader_share(0, 8), clock)
    assert [budget.spend(10**9) for _ in range(3)] == [0, 0, 0]
    assert reader_share(0, 8) == 0
    assert reader_share(800, 8) == 100
