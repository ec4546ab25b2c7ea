"""One error family: every failure binlake reports on purpose is a `BinlakeError`.

Messages say what was expected, what was found and what to do; they never contain secrets.
Each kind of failure has its own `exit_code`, so a scheduler or a script can tell a typo in the
config from a source that is down without parsing the message (docs/operations.md#exit-codes).
"""

from __future__ import annotations

import re


class BinlakeError(Exception):
    """Root of binlake's errors; the CLI prints these as one line and exits with `exit_code`.

    `retry_helps` says whether running the same command again, unchanged, can succeed (a source
    that was down, a lease another process held): a job scheduler may retry those. The others
    need a person or a changed setting, so a Databricks job that runs into one is paused
    (`binlake.jobs.pause`) instead of failing the same way at every restart."""

    exit_code = 2
    retry_helps = False


class ConfigError(BinlakeError):
    """The configuration file is missing, malformed or inconsistent."""

    exit_code = 2


class SourceError(BinlakeError):
    """The source database cannot be used as configured (binlog settings, privileges, tables,
    keys, column types)."""

    exit_code = 4


class SourceConnectionError(SourceError):
    """The source cannot be reached or refuses the login: a network, host, port or credential
    problem rather than one of the database's contents."""

    exit_code = 3
    retry_helps = True


class BinlogPurgedError(SourceError):
    """A start offset points into binlog the source has already purged: data would be lost."""

    exit_code = 6


class BinlogResetError(BinlogPurgedError):
    """The source's binlog ends before the stream's position (`RESET MASTER`, another server at
    its address): never re-snapshotted on its own, since the source may not be the one the lake
    was built from."""


class SourceReplacedError(BinlogPurgedError):
    """Another server answers at the source's address while the stream runs (a failover): the
    stream starts again, and its start finds its position on the new server (`lineage`)."""

    retry_helps = True


class SnapshotIncompleteError(BinlakeError):
    """The stream cannot start because the snapshot's ledger is not complete."""

    exit_code = 8


class LedgerError(BinlakeError):
    """The chunk ledger disagrees with the configuration (for example a changed split key)."""

    exit_code = 9


class SchemaChangeError(BinlakeError):
    """The stream stopped before a DDL: `stream.schema_changes: stop`, or a change silver cannot
    follow (a new row key, a narrowed or incompatible column type)."""

    exit_code = 7


class LakeError(BinlakeError):
    """The lake root cannot be written (a file in its way, no permission, a read-only disk)."""

    exit_code = 5


class UnfollowableChange(SchemaChangeError):
    """A DDL silver cannot follow from the binlog; with `stream.on_unfollowable_ddl: resnapshot`
    the stream snapshots the table again instead of stopping."""


class LeaseError(BinlakeError):
    """Another process holds the lease of this job's ledger or checkpoint (`binlake.lake.lease`), or
    took it over from this one."""

    exit_code = 10
    retry_helps = True


def carried_by(failure: BaseException) -> BinlakeError | None:
    """The binlake error a Spark failure carries in its text: raised in a Spark task (a chunk
    read, a binlog read), it reaches the driver as a Python traceback inside a Java exception,
    and the user should read its message, not a plan dump."""
    found = re.findall(r"binlake\.errors\.(\w+): (.*)", str(failure))
    if not found:
        return None
    name, message = found[-1]
    kind = globals().get(name)
    if isinstance(kind, type) and issubclass(kind, BinlakeError):
        return kind(message.strip())
    return None


class BundleError(BinlakeError):
    """bundle.yml or a resource file is malformed, or a bundle job cannot be run or deployed."""
