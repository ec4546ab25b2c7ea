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


#: The setting Amazon RDS for MySQL and Aurora MySQL keep binlogs by, in place of the server's
#: own expiry, read with `CALL mysql.rds_show_configuration` (Amazon's "Setting and showing
#: binary log configuration"): NULL by default, which RDS for MySQL reads as 0 hours (binlogs
#: purged as soon as possible) and Aurora as "cleaned up lazily, usually within a day".
RDS_RETENTION = "binlog retention hours"
#: Errors that mean a server is not RDS (no such procedure) or answers no system variable.
_ER_SP_DOES_NOT_EXIST, _ER_UNKNOWN_SYSTEM_VARIABLE = 1305, 1193


@dataclass(frozen=True)
class ManagedRetention:
    """An Amazon RDS or Aurora MySQL source's `binlog retention hours` (None: NULL)."""

    hours: float | None
    aurora: bool

    @property
    def expiry_s(self) -> float:
        """How long binlogs are certain to be kept: NULL promises nothing (0)."""
        return (self.hours or 0.0) * 3600

    def warning(self) -> str | None:
        """What to tell the operator at start, where the setting cannot carry a stream through
        a pause; None once it keeps binlogs for hours."""
        if self.hours is not None:
            return None
        service = "Aurora MySQL" if self.aurora else "Amazon RDS for MySQL"
        kept = (
            "cleans binlogs up lazily, usually within a day"
            if self.aurora
            else "purges binlogs as soon as it can"
        )
        return (
            f"the source is {service}, whose {RDS_RETENTION!r} is NULL: it {kept}, so a stream "
            "paused or behind loses its position and its tables need a re-snapshot. Keep "
            "binlogs longer than the longest pause, e.g. CALL mysql.rds_set_configuration("
            f"'{RDS_RETENTION}', 72)"
        )


def managed_retention(conn: pymysql.Connection) -> ManagedRetention | None:
    """The source's RDS/Aurora binlog retention; None on a server that is neither (MariaDB,
    self-managed MySQL), or when the user may not call the procedure (then the server's own
    expiry is all binlake can read)."""
    try:
        rows = query(conn, "CALL mysql.rds_show_configuration")
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] != _ER_SP_DOES_NOT_EXIST:
            log.debug("mysql.rds_show_configuration unreadable: %s", exc)
        return None
    value = next((row[1] for row in rows if str(row[0]).lower() == RDS_RETENTION), None)
    return ManagedRetention(None if value is None else float(value), _is_aurora(conn))


def _is_aurora(conn: pymysql.Connection) -> bool:
    try:
        return bool(query(conn, "SELECT @@aurora_version")[0][0])
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == _ER_UNKNOWN_SYSTEM_VARIABLE:
            return False
        raise


def warn_if_managed_retention_short(conn: pymysql.Connection) -> None:
    """At a job's start: warn when an RDS or Aurora source keeps its binlogs only as long as its
    NULL default `binlog retention hours` says."""
    managed = managed_retention(conn)
    message = None if managed is None else managed.warning()
    if message is not None:
        log.warning(message)


def expiry_seconds(conn: pymysql.Connection) -> float | None:
    """How long the source keeps binlog files, in seconds; None if it never purges them on its
    own. On Amazon RDS and Aurora their `binlog retention hours` decides (`managed_retention`).
    MySQL 8 and MariaDB 10.6+ keep `binlog_expire_logs_seconds` (MariaDB in step with
    `expire_logs_days`), older servers only `expire_logs_days`."""
    managed = managed_retention(conn)
    if managed is not None:
        return managed.expiry_s
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
