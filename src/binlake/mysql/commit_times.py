"""Commit times: when the transaction of each change committed, from event headers alone.

Every binlog event carries the start time of the statement that wrote it (whole seconds). A
transaction's row events carry the times of its statements; its GTID event, which begins it, and
its commit event (XID, or the COMMIT query of a non-transactional engine) are both written when
it commits, stamped with the start of the statement that commits it: COMMIT, or an autocommit
statement itself. So an autocommit UPDATE that waited on a row lock carries the time it started,
and commits after a transaction that began later and committed while it waited: its events
read earlier than those of the transaction before it in the binlog, which holds transactions in
commit order.

A change's commit time is therefore the running maximum of the event times read up to it, in
binlog order: its own transaction's commit statement (the GTID event comes before any row), and
never earlier than any transaction before it. Versions of a key (SCD2 `_valid_from` and
`_valid_to`), the changelog's `_commit_ts` and `_deleted_at` keep the binlog's order: no interval
of a key is inverted, and an as-of query finds one version of it. MySQL's GTID events also carry
the commit's microseconds (`immediate_commit_timestamp`), which python-mysql-replication does
not decode: there too the header's second, raised the same way, is the commit time.

A read that starts at an offset has not seen the events before it: its `since` is the commit
time reached there (the stream carries it from batch to batch), 0 when unknown.
"""

from __future__ import annotations

from contextlib import closing

from binlake.config.settings import SourceConfig
from binlake.model.offsets import BinlogOffset
from binlake.mysql.replication import reconnecting_read
from binlake.mysql.transactions import transactions


class CommitClock:
    """The commit time of the transaction a binlog read is in: `observe` the header time of
    every event the read receives, in binlog order (the transactions' GTID events among them),
    then read `now`."""

    def __init__(self, since: int = 0) -> None:
        self.now = since  # epoch seconds

    def observe(self, written: float | None) -> int:
        """Move the clock past an event written at `written` (its header's epoch seconds; 0 or
        None on the events the server makes up, such as a rotation's); the commit time of the
        transaction it belongs to."""
        self.now = max(self.now, int(written or 0))
        return self.now


def commit_times_at(
    source: SourceConfig, server_id: int, start: BinlogOffset, since: int, at: list[BinlogOffset]
) -> list[int]:
    """The commit time reached at each transaction boundary of `at` (in binlog order, after
    `start`, where it was `since`): the read that starts there begins with it. Reads the GTID
    events' headers from `start` to the last of `at`, no row; a dropped connection is retried
    like any binlog read."""
    return reconnecting_read(source)(_commit_times_at, source, server_id, start, since, at)


def _commit_times_at(
    source: SourceConfig, server_id: int, start: BinlogOffset, since: int, at: list[BinlogOffset]
) -> list[int]:
    reached: list[int] = []
    clock = CommitClock(since)
    with closing(transactions(source, server_id, start)) as read:
        for begins, written, _ in read:
            while len(reached) < len(at) and begins >= at[len(reached)]:
                reached.append(clock.now)
            if len(reached) == len(at):
                break
            clock.observe(written)
    return reached + [clock.now] * (len(at) - len(reached))
