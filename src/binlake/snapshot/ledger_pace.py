"""A snapshot's rate as its ledger's marks show it: what `binlake status` says of a snapshot in
progress, read from the ledger alone (no Spark, no word from the job that runs it).

The ledger marks chunks a commit batch at a time, so rows arrive in steps. The rate is taken
between the marks of a recent stretch (`WINDOW`): the rows marked after its first mark over the
time from that mark to the last. The first mark's own rows were read before it, in time the
ledger does not show, so they are left out: counting them would overstate the rate, by a whole
batch when the stretch holds two marks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from binlake.snapshot.chunk_states import ChunkState

#: The stretch of recent marks the rate is taken over, back from the newest.
WINDOW = timedelta(minutes=15)


@dataclass(frozen=True)
class SnapshotPace:
    """A snapshot in progress: its rate between recent marks and its newest mark."""

    #: Rows a second between the marks of the last `WINDOW` before the newest mark; None with
    #: fewer than two marks in it (the first batch is still being read, or batches are slower).
    rows_per_second: float | None
    #: When the ledger last marked a chunk of it (UTC); None before its first batch is marked.
    last_mark: datetime | None
    #: `snapshot.max_rows_per_second` of the config status was given (0: no cap).
    cap: int


def snapshot_pace(chunks: Iterable[ChunkState], cap: int) -> SnapshotPace | None:
    """The pace of the snapshot `chunks` record, or None when no table's snapshot is in
    progress (every planned chunk finished, or nothing planned)."""
    chunks = list(chunks)
    if all(c.finished for c in chunks):
        return None
    rows_at: dict[datetime, int] = defaultdict(int)
    for chunk in chunks:
        if chunk.finished and chunk.marked_at is not None:
            rows_at[_utc(chunk.marked_at)] += chunk.rows or 0
    if not rows_at:
        return SnapshotPace(None, None, cap)
    last = max(rows_at)
    recent = sorted(t for t in rows_at if t > last - WINDOW)
    first = recent[0]
    if first == last:
        return SnapshotPace(None, last, cap)
    rows = sum(rows_at[t] for t in recent[1:])
    return SnapshotPace(rows / (last - first).total_seconds(), last, cap)


def _utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC time: the ledger's timestamps are UTC (delta-rs says so; a time
    without a zone is taken as UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
