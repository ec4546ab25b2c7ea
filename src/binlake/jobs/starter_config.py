"""`binlake init`: a commented starter config written from what a source holds.

It connects as the jobs do (`mysql.connection`), lists the database's base tables, each with the
key binlake would read it by (discovery's own `load_schema`, so a table binlake would refuse is
named with that refusal's words and remedy) and the server's row estimate, and writes a config
whose every key `load_config` accepts. Refused tables are left out of `source.tables` (shown
commented out), so the file is one `binlake plan` and the jobs take as written.

The password is never written: the file names the environment variable that holds it
(`source.password_env`, the form docs/configuration.md prefers). When that variable is unset,
the password is asked for at the terminal, without echo, and used for this connection only.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import yaml
from pydantic import SecretStr

from binlake.config.settings import Config, SourceConfig, parse_config
from binlake.errors import ConfigError, SourceError
from binlake.model.capture import qualified
from binlake.model.counts import counted
from binlake.model.schema import TableSchema
from binlake.model.typemap import map_table
from binlake.mysql.connection import connection
from binlake.mysql.discovery import (
    captured_tables,
    estimated_rows,
    load_schema,
    split_key_candidates,
)
from binlake.mysql.prerequisites import check_server_settings

#: The column where a line's comment starts (as in docs/configuration.md's listing).
COMMENT_COLUMN = 43
WIDTH = 100


@dataclass(frozen=True)
class FoundTable:
    """A base table as binlake would read it."""

    name: str
    key: tuple[str, ...]  # the row key; () for a refused table
    split_column: str
    #: The `snapshot.split_keys` entry it needs (no primary key, or one binlake cannot split
    #: by its first column); None where the default applies.
    split_key: str | None
    estimated_rows: int
    refusal: str | None = None  # why binlake refuses it: the jobs' own message, with the remedy


@dataclass(frozen=True)
class Starter:
    """What `init` found: the connection settings, the tables, and the server's refusal of its
    settings, if any (a warning: the file is still worth writing)."""

    config: Config
    tables: list[FoundTable]
    warning: str | None


def connection_settings(settings: dict[str, Any]) -> Config:
    """A validated config from `init`'s options (host, port, user, database, password_env;
    those not given take the model's defaults)."""
    given = {k: v for k, v in settings.items() if v is not None}
    return parse_config({"source": given})


def with_password(source: SourceConfig) -> SourceConfig:
    """`source` able to log in: as it is when its `password_env` is set, else carrying the
    password typed at the terminal (never echoed); refused without one."""
    variable = source.password_env
    if variable and variable in os.environ:
        return source
    if not sys.stdin.isatty():
        raise ConfigError(
            f"the environment variable {variable!r} (source.password_env) holding the source's "
            "password is not set: export it, or run binlake init at a terminal to be asked"
        )
    typed = getpass.getpass(f"password of {source.user}@{source.host}:{source.port}: ")
    return source.with_secrets(password=SecretStr(typed))


def survey(config: Config, source: SourceConfig) -> Starter:
    """The database's base tables, keys and row estimates, as binlake would read them."""
    # No waiting for a source that was never reached: that is a wrong host, port or password.
    with connection(source, wait=False) as conn:
        try:
            check_server_settings(conn)
            warning = None
        except SourceError as exc:
            warning = str(exc)
        names = captured_tables(conn, config.source.capture)
        estimates = estimated_rows(conn, names)
        tables = [_found(conn, d, t, estimates[qualified(d, t)]) for d, t in names]
    return Starter(config, tables, warning)


def _found(conn: pymysql.Connection, database: str, table: str, rows: int) -> FoundTable:
    """A table as binlake would read it, or refused with the jobs' own reason: no usable key,
    or a column type binlake cannot land."""
    try:
        schema, split_key = _keyed_schema(conn, database, table)
        map_table(schema)
    except SourceError as exc:
        return FoundTable(table, (), "", None, rows, str(exc))
    return FoundTable(table, schema.key, schema.split_column, split_key, rows)


def _keyed_schema(
    conn: pymysql.Connection, database: str, table: str
) -> tuple[TableSchema, str | None]:
    """The table's schema split by its primary key's first column, else by the first column
    discovery accepts as its split key (returned: the `snapshot.split_keys` entry it needs);
    raises discovery's refusal of the default when none is accepted."""
    try:
        return load_schema(conn, database, table, {}), None
    except SourceError as refused:
        for column in split_key_candidates(conn, database, table):
            try:
                return load_schema(conn, database, table, {table: column}), column
            except SourceError:
                continue
        raise refused from None


def render_config(starter: Starter, path: Path) -> str:
    """The config file's text: the connection, the tables with their keys and estimates as
    comments, the split keys they need, and the defaults most worth a look."""
    source = starter.config.source
    low, high = source.server_id_range
    snapshot, lake = starter.config.snapshot, starter.config.lake
    lines = [
        f"# binlake config for database {source.database} at {source.host}:{source.port}, "
        "written by `binlake init`.",
        "# Every key and its default: docs/configuration.md#every-key.",
        f"# Next: `binlake plan --config {path}` shows what a snapshot would read.",
        *_comment_block(starter.warning, "# WARNING: binlake refuses this source now: ", "# "),
        "source:",
        f"  host: {_scalar(source.host)}",
        f"  port: {source.port}",
        f"  user: {_scalar(source.user)}",
        _commented(
            f"  password_env: {_scalar(source.password_env or '')}",
            "never the password itself",
        ),
        f"  database: {_scalar(source.database or '')}",
        _commented(
            "  tables:" if any(t.refusal is None for t in starter.tables) else "  tables: []",
            "null: every table, new ones too",
        ),
        *[line for table in starter.tables for line in _table_lines(table)],
        _commented(f"  server_id_range: {low}-{high}", "replica ids: one per reader + stream"),
        "snapshot:",
        _commented(f"  chunk_size: {snapshot.chunk_size}", "rows per chunk"),
        _commented(f"  parallelism: {snapshot.parallelism}", "chunks of one table read at once"),
        _commented(f"  concurrent_tables: {snapshot.concurrent_tables}", "tables read at once"),
        *_split_key_lines(starter.tables),
        "lake:",
        _commented(f"  root: {_scalar(lake.root)}", "a path, /Volumes/..., or a URI"),
    ]
    return "\n".join(lines) + "\n"


def _table_lines(table: FoundTable) -> list[str]:
    """A table's entry in `source.tables`, its key and estimate as the comment; a refused table
    commented out, followed by the refusal."""
    rows = f"~{table.estimated_rows:,} rows"
    if table.refusal is not None:
        item = _commented(f"    # - {_scalar(table.name)}", f"refused, {rows}:")
        return [item, *_comment_block(table.refusal, "    #   ", "    #   ")]
    # A split key standing for a missing primary key is the key itself: named once.
    about = [f"key {', '.join(table.key)}"] if table.key != (table.split_key,) else []
    if len(table.key) > 1 or table.split_key is not None:
        entry = " (snapshot.split_keys)" if table.split_key is not None else ""
        about.append(f"split by {table.split_column}{entry}")
    return [_commented(f"    - {_scalar(table.name)}", ", ".join([*about, rows]))]


def _split_key_lines(tables: list[FoundTable]) -> list[str]:
    needed = [t for t in tables if t.split_key is not None]
    if not needed:
        return [_commented("  split_keys: {}", "per table: the column to split by")]
    return [
        _commented("  split_keys:", "tables binlake cannot split by a primary key"),
        *(f"    {_scalar(t.name)}: {_scalar(t.split_column)}" for t in needed),
    ]


def _commented(line: str, comment: str) -> str:
    return f"{line.ljust(COMMENT_COLUMN - 1)} # {comment}"


def _comment_block(text: str | None, first: str, rest: str) -> list[str]:
    """`text` as comment lines within `WIDTH`, the first starting with `first`, the others with
    `rest`; nothing for None."""
    if text is None:
        return []
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,  # names and settings stay whole
        break_on_hyphens=False,
    )


def _scalar(text: str) -> str:
    """`text` as a YAML scalar: plain where YAML reads it back as the same string, else
    double-quoted (JSON's quoting is YAML's)."""
    plain = re.fullmatch(r"[\w./-]+", text) is not None and not text.startswith("-")
    if plain and yaml.safe_load(text) == text:
        return text
    return json.dumps(text)


def init(settings: dict[str, Any], path: Path, force: bool) -> Starter:
    """Survey the source and write its starter config to `path`. An existing file is refused
    unless `force`, before a password is asked for or the source is reached."""
    config = connection_settings(settings)
    if path.exists() and not force:
        raise _exists(path)
    starter = survey(config, with_password(config.source))
    write_config(path, render_config(starter, path), force)
    return starter


def write_config(path: Path, text: str, force: bool) -> None:
    """Write the config; an existing file is replaced only with `force` (created exclusively
    otherwise, so no file appearing meanwhile is overwritten either)."""
    try:
        with path.open("w" if force else "x") as out:
            out.write(text)
    except FileExistsError:
        raise _exists(path) from None
    except OSError as exc:
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror}") from None


def _exists(path: Path) -> ConfigError:
    return ConfigError(
        f"{str(path)!r} exists: binlake init does not overwrite it (pass --force to replace it, "
        "or --output to write another file)"
    )


def summary(starter: Starter, path: Path) -> str:
    """What `init` prints: the file written, its tables, and the next step."""
    refused = [t.name for t in starter.tables if t.refusal is not None]
    taken = len(starter.tables) - len(refused)
    line = f"wrote {path}: {counted(taken, 'table')}"
    if refused:
        line += f"; left out, refused (the file says why): {', '.join(refused)}"
    return f"{line}\nnext: binlake plan --config {path}"
