"""Checks the CLI runs before it starts Spark: a bad source or lake root ends in one line, in
seconds, with no JVM started and nothing written.

The source checks are the jobs' own (`validation.validate`, and `--tables` as the snapshot resolves
it), so the CLI refuses exactly what the jobs would refuse, only earlier; the jobs keep running
them for callers that skip the CLI. Added here, where no job depends on them: the lake root must
be writable, and `source.server_id_range` must not hold a server id the replication topology
already uses.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pymysql

from binlake.config.settings import Config, LakeConfig, SourceConfig
from binlake.errors import ConfigError, LakeError, SourceError
from binlake.mysql.binlog_archive import BinlogArchive
from binlake.mysql.connection import connection, query
from binlake.mysql.prerequisites import validate
from binlake.mysql.retention import warn_if_managed_retention_short
from binlake.mysql.server import ER_SPECIFIC_ACCESS_DENIED

log = logging.getLogger(__name__)


def preflight(
    config: Config, writes_lake: bool, only: list[str] | None = None, server_id: int | None = None
) -> None:
    """Run every check that needs no Spark; `only` are the snapshot's `--tables`, `server_id`
    the job's own first binlog reader (`validation.validate`)."""
    if writes_lake:
        check_lake(config)
    else:
        check_lake_root(config.lake)
    # No waiting for a source that was never reached: that is a wrong host, port or password.
    with connection(config.source, wait=False) as conn:
        tables = validate(conn, config, server_id)
        check_server_ids(conn, config.source)
        warn_if_managed_retention_short(conn)
    if only is not None:
        from binlake.snapshot.task import chosen_tables  # pulls in Delta: only when it is needed

        chosen_tables(tables, only)


def check_archive(config: Config, command: str) -> None:
    """A binlog archive (`source.binlog_archive`) is read by the stream alone (`status` reads
    how far the stream is in it), and must hold binlog files; the stream's lake must be
    writable. Nothing connects to a server."""
    if command not in ("stream", "status"):
        raise ConfigError(
            f"source.binlog_archive is read by `binlake stream` alone: `binlake {command}` "
            "reads the server (leave source.binlog_archive out of its config)"
        )
    if command == "stream":
        check_lake(config)
    else:
        check_lake_root(config.lake)
    BinlogArchive(config.source.binlog_archive or "").files()


def check_reachable(source: SourceConfig) -> None:
    """The source answers and takes the login: what `status` needs before it starts reading the
    lake, so a wrong host or password ends in one line instead of after Spark's start."""
    with connection(source, wait=False):
        pass


def check_lake(config: Config) -> None:
    """The lake root is writable, and with `lake.catalog` the schemas' names (which hold
    `source.database`) are ones a catalog can hold (with several databases, the tables'
    databases are known only once the source is read: `catalog_schema` refuses one then)."""
    check_lake_writable(config.lake)
    if config.lake.catalog is not None and config.source.database is not None:
        config.lake.catalog_schema("bronze", config.source.database)
        config.lake.catalog_schema("silver", config.source.database)


def check_lake_root(lake: LakeConfig) -> tuple[Path, Path] | None:
    """A local lake root (a path or a `file:` URI) is a directory or a path where one can be
    created: what the commands that only read the lake (`status`, `verify`) check too, so a
    root that names a file ends in one line instead of a file-system error from deep inside a
    read. Returns the root and the nearest existing directory at or above it; None for other
    URIs (s3://, abfss://, dbfs:/), which only the runtime reaches with the cluster's
    credentials."""
    from binlake.lake.files import local_path  # pulls in pyarrow: only when it is needed

    local = local_path(lake.root)
    if local is None:
        return None
    root = Path(local).absolute()
    existing = next(p for p in (root, *root.parents) if p.exists())
    if not existing.is_dir():
        where = "is a file" if existing == root else f"cannot be created: {existing} is a file"
        raise LakeError(
            f"lake.root {str(root)!r} {where}, not a directory: point lake.root at a directory "
            "(or a path where one can be created)"
        )
    return root, existing


def check_lake_writable(lake: LakeConfig) -> None:
    """A local lake root (a path or a `file:` URI) must be a directory binlake can create files
    in (or create). Probed with a temporary file in the root, or in its nearest existing parent,
    which is removed again: a refused start leaves the lake as it was. Other URIs (s3://,
    abfss://, dbfs:/) are the runtime's to check: only Spark reaches them with the cluster's
    credentials.
    """
    found = check_lake_root(lake)
    if found is None:
        return
    root, existing = found
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".binlake-probe-"):
            pass
    except OSError as exc:
        raise LakeError(
            f"lake.root {str(root)!r} is not writable: creating a file in {str(existing)!r} "
            f"failed ({exc.strerror}); fix its permissions or point lake.root elsewhere"
        ) from None


def check_server_ids(conn: pymysql.Connection, source: SourceConfig) -> None:
    """binlake's binlog readers connect as replicas with ids from `source.server_id_range`; an id
    the source itself or a registered replica uses makes the server drop one of the two."""
    low, high = source.server_id_range
    used = {int(query(conn, "SELECT @@server_id")[0][0]): "the source's own @@server_id"}
    for replica in _replica_ids(conn):
        used.setdefault(replica, "a replica registered with the source, SHOW SLAVE HOSTS")
    colliding = [f"{sid} ({whose})" for sid, whose in sorted(used.items()) if low <= sid <= high]
    if colliding:
        raise SourceError(
            f"source.server_id_range [{low}, {high}] contains server ids already in use: "
            f"{'; '.join(colliding)}; a binlake reader with such an id would evict that "
            "connection or be evicted by it: choose another source.server_id_range"
        )


def _replica_ids(conn: pymysql.Connection) -> list[int]:
    """Server ids of the replicas registered with the source (binlake's readers do not register);
    none if the user may not list them."""
    try:
        try:
            rows = query(conn, "SHOW SLAVE HOSTS")
        except pymysql.err.ProgrammingError:  # MySQL 8.4 knows only the new spelling
            rows = query(conn, "SHOW REPLICAS")
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
            log.debug("cannot list the source's replicas (%s): not checking their server ids", exc)
            return []
        raise
    return [int(row[0]) for row in rows]
