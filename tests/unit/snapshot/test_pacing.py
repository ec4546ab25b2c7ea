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
    """Three tables, two at a time, two readers each, Spark with tasks to spare: the third,
    read alone at the end, takes all of the cap (a split fixed at the start left it half)."""
    shares = CapShares(6000, slots=2, tables=3, parallelism=2, task_slots=None)
    assert shares.reader() == 1500  # two tables of two readers
    shares.table_done()
    assert shares.reader() == 1500  # the third starts beside the second
    shares.table_done()
    assert shares.reader() == 3000


def test_readers_queued_for_a_task_slot_leave_their_share_to_the_running_ones() -> None:
    """2 cores, two tables of two readers: the second table's tasks wait for the first's (the
    bench's three tables ran at 0.49x the cap with each reader held to a quarter)."""
    shares = CapShares(6000, slots=2, tables=3, parallelism=2, task_slots=2)
    assert shares.reader() == 3000
    shares.table_done()
    shares.table_done()
    assert shares.reader() == 3000  # the last table's two readers: still two tasks at once
    assert CapShares(6000, slots=4, tables=4, parallelism=4, task_slots=64).reader() == 375


def test_tables_waiting_for_a_slot_keep_the_split() -> None:
    shares = CapShares(1000, slots=4, tables=10, parallelism=1, task_slots=None)
    for _ in range(6):
        assert shares.reader() == 250
        shares.table_done()
    assert shares.reader() == 250  # 4 left: still 4 at once
    shares.table_done()
    assert shares.reader() == pytest.approx(1000 / 3)


def test_no_cap_splits_to_no_cap() -> None:
    shares = CapShares(0, slots=2, tables=3, parallelism=4, task_slots=0)
    assert shares.reader() == 0
    for _ in range(3):
        shares.table_done()
    assert shares.reader() == 0  # and no division by zero once every table is done


@pytest.mark.parametrize("seed", range(30))
def test_readers_running_at_once_never_sum_past_the_cap(seed: int) -> None:
    """A random snapshot: tables of random batch counts, batch sizes and lengths, `slots` at
    once, each table taking the first slot to come free, a reader's share asked as its batch
    starts, in the order of time; Spark runs at most `task_slots` of the readers in flight,
    at worst the fastest. At every moment the readers running sum to at most the cap; with
    every reader running, a lone table's readers take all of it."""
    rng = random.Random(seed)
    cap, slots, parallelism = 10_000, rng.randint(1, 4), rng.randint(1, 4)
    task_slots = rng.choice([None, 1, 2, 3, 8])
    tables = rng.randint(1, 9)
    batches = [
        [(rng.uniform(0.1, 5.0), rng.randint(1, parallelism)) for _ in range(rng.randint(1, 6))]
        for _ in range(tables)
    ]  # (length, readers: fewer than parallelism where a batch has fewer chunks)
    shares = CapShares(cap, slots, tables, parallelism, task_slots)
    flights: list[tuple[float, float, int, float, int]] = []  # start, end, readers, rate, left
    waiting, left = list(range(tables)), tables
    running: dict[int, list[tuple[float, int]]] = {}  # slot → its table's batches left
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
            length, readers = running[slot].pop(0)
            flights.append((now, now + length, readers, shares.reader(), left))
            heapq.heappush(events, (now + length, slot))
    for moment in sorted({start for start, *_ in flights}):
        rates = sorted(
            (rate for start, end, readers, rate, _ in flights if start <= moment < end
             for _ in range(readers)),
            reverse=True,
        )  # fmt: skip
        running_now = rates[: task_slots or len(rates)]
        assert sum(running_now) <= cap * (1 + 1e-9), (moment, running_now)
    if task_slots is None:
        assert all(rate == cap / parallelism for *_, rate, n in flights if n == 1)
