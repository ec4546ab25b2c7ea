"""One error family: every failure binlake reports on purpose is a `BinlakeError`.

Messages say what was expected, what was found and what to do; they never contain secrets.
"""


class BinlakeError(Exception):
    """Root of binlake's errors; the CLI prints these as one line and exits 2."""


class ConfigError(BinlakeError):
    """The configuration file is missing, malformed or inconsistent."""


class SourceError(BinlakeError):
    """The source database cannot be used as configured (connection, binlog settings, privileges,
    tables, keys)."""


class BinlogPurgedError(SourceError):
    """A start offset points into binlog the source has already purged: data would be lost."""


class SnapshotIncompleteError(BinlakeError):
    """The stream cannot start because the snapshot's ledger is not complete."""


class LedgerError(BinlakeError):
    """The chunk ledger disagrees with the configuration (for example a changed split key)."""


class SchemaChangeError(BinlakeError):
    """The stream stopped before a DDL: `stream.schema_changes: stop`, or a change silver cannot
    follow (a new row key, a narrowed or incompatible column type)."""
