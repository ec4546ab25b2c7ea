"""The checks every job runs against the source before any work: binlog settings, the low
watermark's guarantee, the tables and their keys, the privileges (asked of the server by doing
what the job does) and the column types binlake can land.

The privilege check opens a binlog dump as the binlog readers do (`replication.open_stream`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import pymysql

from binlake.config.secrets import hash_salt
from binlake.config.settings import Config, SourceConfig
from binlake.errors import ConfigError, SourceError
from binlake.lake.paths import (
    DELETED_COLUMN,
    EVENTS_TABLE,
    HISTORY_COLUMNS,
    ROUTE_COLUMNS,
    meta_columns,
)
from binlake.model.capture import table_matches
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.model.typemap import map_table
from binlake.mysql.column_rules import check_column_rules, lake_view
from binlake.mysql.connection import query
from binlake.mysql.discovery import discover
from binlake.mysql.replication import open_stream
from binlake.mysql.server import (
    ER_SPECIFIC_ACCESS_DENIED,
    check_binlog_settings,
    check_low_watermark,
    current_account,
    current_offset,
)
from binlake.mysql.xa_transactions import prepared_xids

#: The server's refusal of a SELECT of a table, or of some of its columns, the user lacks.
ER_TABLEACCESS_DENIED = 1142
ER_COLUMNACCESS_DENIED = 1143


def check_privileges(
    conn: pymysql.Connection, source: SourceConfig, tables: list[TableSchema], server_id: int
) -> None:
    """Ask the server, by doing what the job does, instead of reading `SHOW GRANTS`: its text
    misses privileges that come through roles and varies between servers and versions.

    The binlog position (BINLOG MONITOR / REPLICATION CLIENT) is read by `validate` already; here
    a short non-blocking binlog dump from the head (REPLICATION SLAVE), `XA RECOVER`
    (XA_RECOVER_ADMIN on MySQL 8) and a `LIMIT 0` SELECT of each table. Each refusal names the
    missing grant as the GRANT statement that adds it.
    """
    account = current_account(conn)
    check_binlog_dump(source, server_id, current_offset(conn), account)
    prepared_xids(conn)
    for table in tables:
        try:
            query(conn, f"SELECT * FROM {table.sql_name} LIMIT 0")
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] in (ER_TABLEACCESS_DENIED, ER_COLUMNACCESS_DENIED):
                raise SourceError(
                    f"the source user {account} may not SELECT every column of "
                    f"{table.qualified}: run `GRANT SELECT ON {table.typed_name} TO {account}` "
                    "(MariaDB and MySQL alike)"
                ) from None
            raise


def check_binlog_dump(
    source: SourceConfig, server_id: int, head: BinlogOffset, account: str
) -> None:
    """Open a binlog dump at `head` as the job's readers do and take its first event: the
    server refuses the dump without REPLICATION SLAVE (however the user holds it: directly,
    through a role, through ALL PRIVILEGES). Non-blocking, from the head: nothing is decoded."""
    stream = open_stream(source, server_id, head)
    try:
        next(iter(stream), None)
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
            raise SourceError(
                f"the source user {account} may not read the binlog (a binlog dump needs "
                f"REPLICATION SLAVE): run `GRANT REPLICATION SLAVE ON *.* TO {account}` "
                "(MariaDB and MySQL alike)"
            ) from None
        raise
    finally:
        stream.close()


def validate(
    conn: pymysql.Connection, config: Config, server_id: int | None = None
) -> list[TableSchema]:
    """Check everything the snapshot and the stream rely on, before any work starts.

    `server_id` is the replica id of the job's own first binlog reader, which the privilege
    check's binlog dump borrows (the snapshot's first chunk reader by default; the stream
    passes its own): that reader has not started yet, and no other binlake job uses it, so
    the probe evicts no one (the server drops an older dump connection with the same id).
    """
    check_server_settings(conn)
    tables = discover(conn, config)
    _check_event_table_name(config, tables)
    _check_soft_delete_column(config, tables)
    _check_history(config, tables)
    _check_routes(config, tables)
    _check_own_columns(config, tables)
    _check_table_keys("source.row_filters", config.source.row_filters, tables)
    _check_table_keys("source.column_rules", config.source.column_rules, tables)
    check_column_rules(config.source, tables)
    _check_table_keys("lake.table_layout", config.lake.table_layout, tables)
    _check_table_layout(config, tables)
    if any((r := config.source.column_rule_of(t.qualified)) and r.hash for t in tables):
        hash_salt(config.source)  # unset: refused now, not in a Spark task
    if server_id is None:
        server_id = config.snapshot_server_id(0)
    check_privileges(conn, config.source, tables, server_id)
    for table in tables:
        try:
            map_table(table)
        except SourceError as exc:
            raise SourceError(f"table {table.qualified}: {exc}") from None
    return tables


def check_server_settings(conn: pymysql.Connection) -> None:
    """The server's side of every job: the binlog settings, a binlog position the user may read,
    and the low watermark's guarantee. `init` and `plan`, which start no job, warn with the same
    refusal."""
    check_binlog_settings(conn)
    current_offset(conn)
    check_low_watermark(conn)


def _check_table_layout(config: Config, tables: list[TableSchema]) -> None:
    """Each layout clusters by columns its tables land (else the closest name): a column a
    column rule excludes is not in the lake."""
    for table in tables:
        layout = config.lake.layout_of(table.qualified)
        if layout is None:
            continue
        landed = list(lake_view(config.source, table).column_names)
        for name in layout.cluster_by:
            if name not in landed:
                close = difflib.get_close_matches(name, landed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(
                    f"lake.table_layout of {table.qualified} clusters by {name!r}, which is not "
                    f"a column its lake tables have{hint}"
                )


def _check_soft_delete_column(config: Config, tables: list[TableSchema]) -> None:
    """With `silver.deletes: soft`, silver's `_deleted_at` is binlake's: refuse a captured table
    with a column of that name, whose values would have nowhere to go."""
    if config.silver.deletes != "soft":
        return
    for table in tables:
        if any(name.lower() == DELETED_COLUMN for name in table.column_names):
            raise ConfigError(
                f"table {table.qualified} has a column {DELETED_COLUMN!r}, which silver.deletes: "
                "soft adds to silver for the delete's time: leave the table out of "
                "source.tables, or keep silver.deletes: hard"
            )


def _check_own_columns(config: Config, tables: list[TableSchema]) -> None:
    """Refuse a captured table with a column named like one of binlake's own in its silver
    (`meta_columns`; those a setting adds are refused above, with that setting's remedy)."""
    for table in tables:
        own = {c.lower() for c in meta_columns(config, table.qualified)}
        clash = [n for n in table.column_names if n.lower() in own]
        if clash:
            raise ConfigError(
                f"table {table.qualified} has a column {clash[0]!r}, a column binlake keeps in "
                "its silver table: rename it on the source, or leave the table out of "
                "source.tables"
            )


def _check_table_keys(key: str, patterns: Iterable[str], tables: list[TableSchema]) -> None:
    """Each table name, `db.table` or regex of a per-table config section names a captured
    table."""
    for pattern in patterns:
        if not any(table_matches(pattern, t.qualified) for t in tables):
            names = [t.qualified if "." in pattern else t.name for t in tables]
            closest = difflib.get_close_matches(pattern, names, n=1)
            hint = f" (did you mean {closest[0]!r}?)" if closest else ""
            raise ConfigError(f"{key} names {pattern!r}, which matches no captured table{hint}")


def _check_history(config: Config, tables: list[TableSchema]) -> None:
    """`silver.history_tables` names captured tables, and an scd2 silver's own columns are
    binlake's: refuse a captured table with a column of one of their names."""
    _check_table_keys("silver.history_tables", config.silver.history_tables, tables)
    for table in tables:
        if config.silver.history_of(table.qualified) != "scd2":
            continue
        clash = [n for n in table.column_names if n.lower() in HISTORY_COLUMNS]
        if clash:
            raise ConfigError(
                f"table {table.qualified} has a column {clash[0]!r}, which silver.history: scd2 "
                "adds to silver for each version: leave the table out of scd2 "
                "(silver.history_tables), or out of source.tables"
            )


def _check_routes(config: Config, tables: list[TableSchema]) -> None:
    """Each route takes a captured table; a route's silver keeps latest rows (an scd2 join
    restores the whole table, every member's rows), has the route columns to itself, and is no
    unrouted table's silver."""
    _check_table_keys("silver.routes", [r.source for r in config.silver.routes], tables)
    unrouted = {t.qualified for t in tables if config.silver.route_of(t.qualified) is None}
    for table in tables:
        target = config.silver.route_of(table.qualified)
        if target is None:
            continue
        if config.silver.history_of(table.qualified) == "scd2":
            raise ConfigError(
                f"silver.routes routes {table.qualified} into {target}, and silver.history makes "
                "it scd2: a route's silver keeps each member's latest rows. Leave the table out "
                "of scd2 (silver.history_tables), or out of the route"
            )
        clash = [n for n in table.column_names if n.lower() in ROUTE_COLUMNS]
        if clash:
            raise ConfigError(
                f"table {table.qualified} has a column {clash[0]!r}, which silver.routes adds to "
                f"its route's silver {target} to tell the shards apart: leave it out of the route"
            )
        if target in unrouted:
            raise ConfigError(
                f"silver.routes routes {table.qualified} into {target}, which is the silver table "
                f"of the captured table {target} too: route {target} as well (its rows then "
                "carry its name), or give the route another target"
            )


def _check_event_table_name(config: Config, tables: list[TableSchema]) -> None:
    """With `lake.catalog`, the event log is a table of `source.database`'s silver schema:
    refuse a captured table of that name, whose silver would be the same table (with several
    databases it is in `lake.silver_schema`, no database's)."""
    if config.lake.catalog is None or not config.lake.event_log or not config.source.database:
        return
    for table in tables:
        if table.name.lower() == EVENTS_TABLE:
            raise ConfigError(
                f"table {table.qualified} would share its silver table with binlake's event log "
                f"({config.lake.catalog}.{config.lake.catalog_schema('silver', table.database)}"
                f".{EVENTS_TABLE}): leave it out of source.tables, or set lake.event_log: false"
            )
