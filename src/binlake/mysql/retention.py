"""Binlog retention: a warning before the source purges binlog the stream has not read yet.

A source purges binlog files older than its expiry (`binlog_expire_logs_seconds`, or
`expire_logs_days`); a stream paused or behind for longer loses its position and needs a
re-snapshot of its tables. A binlog file is purged no earlier than the expiry after its last
write, which comes after every change in it, so the oldest change the stream has not applied
gives a safe bound: its position survives at least until that change's time plus the expiry.
The stream warns once half of that time has passed, while a catch-up can still save it: at its
start, and every few minutes while it is behind (`warn_if_purge_near`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import pymysql

from binlake.config.settings import Config, SourceConfig
from binlake.lake.event_log import event
from binlake.model.offsets import BinlogOffset
from binlake.mysql.connection import connection, query
from binlake.mysql.transactions import unapplied_since

log = logging.getLogger(__name__)

#: The share of the expiry after which the stream warns.
WARN_AT = 0.5


def expiry_seconds(conn: pymysql.Connection) -> float | None:
    """How long the source keeps binlog files, in seconds; None if it never purges them on its
    own. MySQL 8 and MariaDB 10.6+ keep `binlog_expire_logs_seconds` (MariaDB in step with
    `expire_logs_days`), older servers only `expire_logs_days`."""
    rows = query(
        conn,
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
        "('binlog_expire_logs_seconds', 'expire_logs_days')",
    )
    values = {str(name): float(value or 0) for name, value in rows}
    seconds = values.get("binlog_expire_logs_seconds", 0.0)
    if not seconds:
        seconds = values.get("expire_logs_days", 0.0) * 86400
    return seconds or None


@dataclass(frozen=True)
class Retention:
    """The source's expiry and the age of the oldest change the stream has not applied."""

    expiry_s: float | None
    oldest_unapplied_age_s: float | None  # None: the stream has applied everything

    @property
    def left_s(self) -> float | None:
        """Seconds the stream's position is certain to survive; None: no purge ahead."""
        if self.expiry_s is None or self.oldest_unapplied_age_s is None:
            return None
        return self.expiry_s - self.oldest_unapplied_age_s

    def warning(self, job: str) -> str | None:
        """What to tell the operator once half the expiry has passed; None before that."""
        left = self.left_s
        if left is None or self.expiry_s is None or self.oldest_unapplied_age_s is None:
            return None
        if self.oldest_unapplied_age_s < WARN_AT * self.expiry_s:
            return None
        when = f"within {duration(left)}" if left > 0 else "now: it may be purged at any time"
        return (
            f"stream {job}: the oldest change it has not applied was written "
            f"{duration(self.oldest_unapplied_age_s)} ago, and the source purges binlogs "
            f"{duration(self.expiry_s)} after their last write: catch up {when}, or raise the "
            "source's binlog_expire_logs_seconds. A purged position needs a re-snapshot of "
            "the stream's tables."
        )


def duration(seconds: float) -> str:
    """`seconds` as an operator reads it: 90 s, 45 min, 3.5 h, 12.0 days."""
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def warn_if_purge_near(config: Config, source: SourceConfig, position: BinlogOffset) -> None:
    """Warn once half the source's binlog expiry has passed since the oldest change the stream
    has not applied (after `position`): it is lost, and its tables need a re-snapshot, if the
    stream does not catch up in time. Reads the binlog with the stream's own server id, so only
    while its reader is idle: before the query starts, or during a batch."""
    with connection(source) as conn:
        expiry = expiry_seconds(conn)
    if expiry is None:
        return
    written = unapplied_since(source, config.stream_server_id, position)
    age = None if written is None else max(time.time() - written, 0.0)
    message = Retention(expiry, age).warning(config.stream.job_name)
    if message is not None:
        log.warning(message, extra=event("retention_warning", offset=position))
