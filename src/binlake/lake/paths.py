"""Where each part of the lake lives: every module asks here, so each place is named once (the
table of docs/lakehouse.md#layout).

Bronze, the changelog and silver are tables, at a path under `lake.root` or in a catalog
(`lake.lake_table`). binlake's own state lives under `lake.root/_system` in both cases: the
chunk ledger (a Delta table), the schema history, each stream job's checkpoint with its table
list, the jobs' leases, the pending resets and the event log (a catalog table with `lake.catalog`).
"""

from __future__ import annotations

from binlake.config.settings import Config
from binlake.lake.files import join

#: The `StreamTables` of a stream job, in its checkpoint folder: `binlake-tables/<version>.json`
#: (one file, `binlake-tables.json`, in lakes from before versions).
TABLES_FOLDER = "binlake-tables"


def system_path(config: Config, *parts: str) -> str:
    return config.lake.path("_system", *parts)


def ledger_path(config: Config) -> str:
    return system_path(config, "chunks")


#: Silver's (and the changelog's) column holding the position of the change that last wrote
#: each row (each version, with `silver.history: scd2`).
OFFSET_COLUMN = "_binlake_offset"
#: With `silver.deletes: soft`, the silver column holding when the source deleted the row.
DELETED_COLUMN = "_deleted_at"
#: With `silver.history: scd2`, silver's columns of each version beside `_binlake_offset`: when
#: it began and ended (binlog commit times), whether it is its key's live one, and the position
#: of the change that ended it.
VALID_FROM, VALID_TO, IS_CURRENT = "_valid_from", "_valid_to", "_is_current"
END_OFFSET = "_binlake_end_offset"
HISTORY_COLUMNS = (VALID_FROM, VALID_TO, IS_CURRENT, END_OFFSET)
#: With `silver.routes`, the columns of a route's silver naming each row's source database and
#: table (the leading part of its key).
SOURCE_DB, SOURCE_TABLE = "_source_db", "_source_table"
ROUTE_COLUMNS = (SOURCE_DB, SOURCE_TABLE)


def meta_columns(config: Config, table: str) -> tuple[str, ...]:
    """Silver's columns that are binlake's, not the source's, for `table` ("db.table"): a
    source column of one of these names has nowhere to land."""
    if config.silver.history_of(table) == "scd2":
        return (OFFSET_COLUMN, *HISTORY_COLUMNS)
    route = ROUTE_COLUMNS if config.silver.route_of(table) is not None else ()
    soft = (DELETED_COLUMN,) if config.silver.deletes == "soft" else ()
    return (*route, OFFSET_COLUMN, *soft)


#: The event log's table name in the silver schema, with `lake.catalog`.
EVENTS_TABLE = "binlake_events"


def events_path(config: Config) -> str:
    """The event log (a Delta table; with `lake.catalog`, a catalog table instead)."""
    return system_path(config, "events")


def schema_root(config: Config) -> str:
    return system_path(config, "schemas")


def checkpoints_root(config: Config) -> str:
    return system_path(config, "checkpoints")


def checkpoint_path(config: Config, job: str | None = None) -> str:
    """The streaming checkpoint of `stream.job_name` (or of `job`)."""
    return join(checkpoints_root(config), job or config.stream.job_name)


def tables_path(config: Config, job: str | None = None) -> str:
    """The `StreamTables` of a stream job: the tables it applies."""
    return join(checkpoint_path(config, job), TABLES_FOLDER)


def leases_root(config: Config) -> str:
    return system_path(config, "leases")


def resets_root(config: Config) -> str:
    return system_path(config, "resets")


def restart_path(config: Config) -> str:
    """A stream job being started anew after a purged binlog (`stream.on_binlog_purged`):
    present from the decision until the new snapshot finished."""
    return system_path(config, "restarts", f"{config.stream.job_name}.json")
