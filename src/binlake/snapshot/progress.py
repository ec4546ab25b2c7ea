"""What a snapshot's progress lines say: chunks and tables finished, rows read, the rate now
and since the start, and about how long the rest takes.

The rate since the start includes Spark's start and the planning, so early in a run it
understates what the readers do; the rate now (over the last `RATE_WINDOW_S`) is what the ETA
divides by. The rows left are estimated from the chunks left at the rows per chunk read so far,
so a table whose keys thin out or thicken moves the ETA as its chunks come in. While a batch
of chunks is being read and nothing is marked, a line every `QUIET_AT_MOST_S` says what is in
flight: a batch of large chunks is one Spark job and can take minutes.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from binlake.lake.event_log import Event
from binlake.model.counts import counted
from binlake.model.tally import Tally
from binlake.snapshot.chunk_states import ChunkState
from binlake.snapshot.ledger import ChunkResult

log = logging.getLogger(__name__)

#: The window the rate "now" is measured over.
RATE_WINDOW_S = 60.0
#: The longest a running snapshot goes without a line.
QUIET_AT_MOST_S = 30.0


@dataclass(frozen=True)
class Reading:
    """A batch of one table's chunks being read: how many, since when."""

    table: str
    chunks: int
    since: float


class Progress:
    """Chunks and tables finished (marked in the ledger) so far, for the progress lines; with
    `cap`, the rate they show is against `snapshot.max_rows_per_second`. `clock` is
    `time.monotonic` but for tests."""

    def __init__(
        self,
        plans: dict[str, list[ChunkState]],
        started: float,
        cap: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.started = started
        self.cap = cap
        self._clock = clock
        self._chunks = {table: {c.chunk_id for c in plan} for table, plan in plans.items()}
        self.done = sum(1 for p in plans.values() for c in p if c.finished)
        self._unfinished = {
            table: {c.chunk_id for c in plan if not c.finished} for table, plan in plans.items()
        }
        self.read = self.rows = 0
        self._samples: deque[tuple[float, int]] = deque([(clock(), 0)])  # (when, rows by then)
        self.said_at = clock()

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self._chunks.values())

    @property
    def finished(self) -> int:
        """Chunks marked: before this run, and by it."""
        return self.done + self.read

    def chunks(self, table: str) -> int:
        """`table`'s chunks: its plan's, and those its reads added."""
        return len(self._chunks[table])

    def add(self, results: list[ChunkResult], planned: Sequence[ChunkState] = ()) -> None:
        """Chunks read and marked; `planned`: the plan rows their reads added (`replanned`),
        the chunks a table grew by among them."""
        for state in planned:
            self._chunks[state.table].add(state.chunk_id)
            self._unfinished[state.table].add(state.chunk_id)
        for result in results:
            self._unfinished[result.table].discard(result.chunk_id)
        self.read += len(results)
        self.rows += sum(r.rows for r in results)
        now = self._clock()
        self._samples.append((now, self.rows))
        while len(self._samples) > 2 and self._samples[1][0] <= now - RATE_WINDOW_S:
            self._samples.popleft()  # keep one sample at or before the window's start

    def rate_now(self) -> float:
        """Rows a second over about the last `RATE_WINDOW_S` (since the start, when shorter)."""
        (then, rows_then), now = self._samples[0], self._clock()
        return (self.rows - rows_then) / (now - then) if now > then else 0.0

    def seconds_left(self) -> float | None:
        """About how long the chunks left take at the rate now; None before a chunk is read."""
        rate = self.rate_now()
        if not self.read or rate <= 0:
            return None
        return (self.total - self.finished) * (self.rows / self.read) / rate

    def line(self) -> str:
        """The progress line: chunks, tables, rows, rates, and the time left."""
        return f"snapshot: chunks {self.finished}/{self.total} done, {self._detail()}"

    def _detail(self) -> str:
        """The line after its chunks: tables, rows, rates, and the time left."""
        elapsed = self._clock() - self.started
        tables_done = sum(1 for chunks in self._unfinished.values() if not chunks)
        average = self.rows / elapsed if elapsed > 0 else 0.0
        cap = f", capped at {self.cap:,}" if self.cap else ""
        left = self.seconds_left()
        eta = "" if left is None or self.finished >= self.total else f", {duration(left)} left"
        return (
            f"tables {tables_done}/{len(self._unfinished)}, {counted(self.rows, 'row')} read, "
            f"{self.rate_now():,.0f} rows/s now ({average:,.0f} since the start{cap}){eta}"
        )

    def report(self, commit: dict[str, Event] | None = None) -> None:
        """Log the progress so far; `commit`: the event of the ledger commit it follows."""
        tally = Tally("chunks", self.finished, self.total, self._detail())
        log.info("%s", self.line(), extra={**(commit or {}), "tally": tally})
        self.said_at = self._clock()

    def report_if_quiet(self, reading: Sequence[Reading]) -> None:
        """A line of what is being read, if the last line is `QUIET_AT_MOST_S` old."""
        now = self._clock()
        if not reading or now - self.said_at < QUIET_AT_MOST_S:
            return
        batches = ", ".join(
            f"{counted(r.chunks, 'chunk')} of {r.table} ({now - r.since:.0f} s so far)"
            for r in reading
        )
        tally = Tally("chunks", self.finished, self.total, f"reading {batches}")
        log.info(
            "snapshot: reading %s; chunks %d/%d done", batches, self.finished, self.total,
            extra={"tally": tally},
        )  # fmt: skip
        self.said_at = now


def duration(seconds: float) -> str:
    """`seconds` as a person reads a time left: `about 40 s`, `about 3 min`, `about 1 h 5 min`."""
    if seconds < 60:
        return f"about {max(round(seconds), 1)} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes} min" if minutes else f"about {hours} h"
