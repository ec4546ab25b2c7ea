"""`snapshot.max_rows_per_second`: the rows a snapshot reads from the source, capped.

Chunk reads run in Spark tasks, up to `parallelism` per table and `concurrent_tables` tables at
once, in executor processes that share no memory. So the cap is split as each commit batch
starts (`CapShares`): each of its readers paces itself to the cap over the readers that can run
at once, counting only the tables still to read and no more readers than Spark has task slots.
Together they never read faster than the cap, whichever of them run at a given moment, and the
readers that do run take the whole cap between them, not the share of readers that are queued
or of tables already done.

A reader learns how many rows it read only once its SELECT has returned, so it pays after each
read and may go into debt (a chunk can hold more rows than its share allows in a second), then
waits the debt off before it reads again: a token bucket that holds no saved tokens. A reader
slower than its share saves nothing for later, so the cap holds over every stretch of a run,
never only on average; a reader's rows by time `t` stay within `share × t` plus the read in
flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def reader_share(max_rows_per_second: float, readers: int) -> float:
    """Each of `readers` readers' share of the cap (0: no cap)."""
    return max_rows_per_second / readers if max_rows_per_second > 0 else 0.0


class CapShares:
    """The cap split over the readers of one snapshot run: `slots` tables read at once, each
    batch by up to `parallelism` readers, and at most `task_slots` Spark tasks running at once
    (the cores Spark has; None where it cannot say, as on Spark Connect: every reader is taken
    to run).

    A reader of a batch starting now gets the cap over `min(task_slots, tables at once ×
    parallelism)`, the tables at once being `min(slots, tables not yet done)`. That count never
    grows during a run, so a reader started earlier had at most the share of one started now;
    the readers running at once are at most that many (no more than Spark's task slots, nor
    than the tables in flight can have), so together they never pass the cap. Where Spark has
    fewer task slots than readers (2 cores, 2 tables of 2 readers: the second table's tasks
    wait), each running reader takes a larger share, and the run reads at the cap, not at the
    share of readers that are only queued. Thread-safe: each table's driver thread asks as its
    batches start and says when it is done.
    """

    def __init__(
        self, cap: float, slots: int, tables: int, parallelism: int, task_slots: int | None
    ) -> None:
        self.cap = cap
        self.slots = slots
        self.parallelism = parallelism
        self.task_slots = task_slots
        self._left = tables
        self._lock = threading.Lock()

    def reader(self) -> float:
        """Rows a second each reader of a batch starting now may read (0: no cap)."""
        with self._lock:
            readers = max(1, min(self.slots, self._left)) * self.parallelism
        if self.task_slots is not None:
            readers = min(readers, max(1, self.task_slots))
        return reader_share(self.cap, readers)

    def table_done(self) -> None:
        """A table has nothing more to read in this run: the rest share its part."""
        with self._lock:
            self._left -= 1


class RowBudget:
    """One reader's pacing: `rate` rows a second (0: unpaced). `spend` after each read says how
    long to wait before the next."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._at = clock()
        self._balance = 0.0  # rows the reader may read now: never above 0, below it a debt

    def spend(self, rows: int) -> float:
        """Account `rows` just read; the seconds to wait before the next read (0: none). The
        time since the last call earned `rate` rows a second towards them, but earns nothing
        past a zero balance. A caller that does not wait keeps its debt."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        self._balance = min(0.0, self._balance + (now - self._at) * self.rate - rows)
        self._at = now
        return -self._balance / self.rate
