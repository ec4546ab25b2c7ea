"""`snapshot.max_rows_per_second`: each reader's token bucket, on a fake clock (nothing sleeps).
The cases are the ones that break a naive bucket: bursts, a reader slower than its share saving
up, many readers, a chunk larger than a second's rows, and the cap off. Then the cap's split
over tables (`CapShares`): the last tables left take all of it, and the batches in flight never
sum past it, on random schedules of tables, slots and batch lengths."""

from __future__ import annotations

import heapq
import random

import pytest

from binlake.snapshot.pacing import CapShares, RowBudget, reader_share


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


def test_the_last_table_left_is_read_at_the_whole_cap() -> None:
    """Three tables, two at a time: the third, read alone at the end, takes all of the cap (a
    split fixed at the start left it half, and the run at 0.5-0.7x the cap)."""
    shares = CapShares(6000, slots=2, tables=3)
    assert shares.batch() == 3000  # two tables read at once
    shares.table_done()
    assert shares.batch() == 3000  # the third starts beside the second
    shares.table_done()
    assert shares.batch() == 6000


def test_tables_waiting_for_a_slot_keep_the_split() -> None:
    shares = CapShares(1000, slots=4, tables=10)
    for _ in range(6):
        assert shares.batch() == 250
        shares.table_done()
    assert [shares.batch() for _ in range(1)] == [250]  # 4 left: still 4 at once
    shares.table_done()
    assert shares.batch() == pytest.approx(1000 / 3)


def test_no_cap_splits_to_no_cap() -> None:
    shares = CapShares(0, slots=2, tables=3)
    assert shares.batch() == 0
    shares.table_done()
    shares.table_done()
    shares.table_done()
    assert shares.batch() == 0  # and no division by zero once every table is done


@pytest.mark.parametrize("seed", range(20))
def test_batches_in_flight_never_sum_past_the_cap(seed: int) -> None:
    """A random snapshot: tables of random batch counts and lengths, `slots` at once, each
    table taking the first slot to come free, a batch's share asked as it starts, in the order
    of time. At every moment the batches in flight sum to at most the cap; a batch that starts
    with no other table left reads at all of it."""
    rng = random.Random(seed)
    cap, slots, tables = 10_000, rng.randint(1, 4), rng.randint(1, 9)
    batches = [[rng.uniform(0.1, 5.0) for _ in range(rng.randint(1, 6))] for _ in range(tables)]
    shares = CapShares(cap, slots, tables)
    flights: list[tuple[float, float, float, int]] = []  # (start, end, share, tables left)
    waiting = list(range(tables))
    left = tables
    running: dict[int, list[float]] = {}  # slot → the batch lengths its table has left
    events = [(0.0, slot) for slot in range(slots)]  # (when, slot): the slot's next step
    heapq.heapify(events)
    while events:
        now, slot = heapq.heappop(events)
        if slot in running and not running[slot]:  # its table's last batch has ended
            del running[slot]
            shares.table_done()
            left -= 1
        if slot not in running and waiting:
            running[slot] = list(batches[waiting.pop(0)])
        if slot in running:
            length = running[slot].pop(0)
            flights.append((now, now + length, shares.batch(), left))
            heapq.heappush(events, (now + length, slot))
    for moment in sorted({start for start, *_ in flights}):
        in_flight = sum(share for start, end, share, _ in flights if start <= moment < end)
        assert in_flight <= cap * (1 + 1e-9), (moment, in_flight)
    assert all(share == cap for _, _, share, alone in flights if alone == 1)
    assert all(share == cap / min(slots, n) for _, _, share, n in flights)
