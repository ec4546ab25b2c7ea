"""Column rules (`source.column_rules`): columns left out, hashed or masked before anything lands.

A rule applies where values leave the source, in the process that read them: the chunk reader's
rows (after the binlog replay that brings them to their high watermark) and each binlog change's
images, before either becomes an Arrow batch for Spark. The raw value therefore reaches no Spark
job, no shuffle or spill file, no bronze, changelog or silver file and no log.

The lake sees each table through its rules (`lake_view`): excluded columns are gone, hashed ones
are 64-character hex text, masked ones text. A hash is the SHA-256 of the salt and the value's
canonical bytes, so equal values hash alike on both paths and a hashed key column still
identifies its row (MERGE stays exact); the salt comes from the environment or a secret, never
from the config, and a lake hashed with one salt must keep it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from binlake.config.secrets import hash_salt
from binlake.config.settings import ColumnRule, SourceConfig
from binlake.errors import ConfigError
from binlake.model.schema import Column, TableSchema
from binlake.mysql.ddl import parse_ddl
from binlake.mysql.schema_history import SchemaChange

MASK = "****"
#: The types a hash reads the same way on the snapshot's path and the stream's: text, bytes and
#: integers (a time or a float could print differently on the two).
HASHABLE = frozenset({
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set",
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
    "tinyint", "smallint", "mediumint", "int", "integer", "bigint",
})  # fmt: skip
MASKABLE = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})

Value = Callable[[Any], Any]


def lake_view(source: SourceConfig, table: TableSchema) -> TableSchema:
    """`table` as the lake holds it: without its excluded columns, its hashed and masked ones
    as text. Idempotent: the view of a view is itself."""
    rule = source.column_rule_of(table.qualified)
    if rule is None:
        return table
    columns = tuple(
        _as_landed(c, rule) for c in table.columns if c.name.lower() not in _lower(rule.exclude)
    )
    return replace(table, columns=columns)


def _lower(names: Sequence[str]) -> set[str]:
    return {n.lower() for n in names}


def _as_landed(column: Column, rule: ColumnRule) -> Column:
    name = column.name.lower()
    if name in _lower(rule.hash):
        return Column(column.name, "char", "char(64)", column.nullable, charset="ascii")
    if name in _lower(rule.mask):
        return Column(column.name, "varchar", "varchar(4)", column.nullable, charset="utf8mb4")
    return column


@dataclass(frozen=True)
class Projection:
    """One table's rows as read from the source → as they land."""

    width: int  # the source's columns
    keep: tuple[int, ...]  # the source positions that land, in order
    values: tuple[Value | None, ...]  # per kept column: its rule's function (None: as it is)

    @property
    def identity(self) -> bool:
        return all(v is None for v in self.values) and self.keep == tuple(range(self.width))

    def row(self, row: Sequence[Any] | None) -> tuple[Any, ...] | None:
        if row is None:
            return None
        return tuple(
            row[i] if f is None or row[i] is None else f(row[i])
            for i, f in zip(self.keep, self.values, strict=True)
        )

    def arrays(self, arrays: Sequence[pa.Array]) -> list[pa.Array]:
        landed = []
        for i, f in zip(self.keep, self.values, strict=True):
            if f is None:
                landed.append(arrays[i])
            else:
                values = [None if v is None else f(v) for v in arrays[i].to_pylist()]
                landed.append(pa.array(values, pa.string()))
        return landed


def projection(source: SourceConfig, table: TableSchema) -> Projection:
    """How rows of `table` (as the source holds them) land under its rules."""
    rule = source.column_rule_of(table.qualified)
    if rule is None:
        n = len(table.columns)
        return Projection(n, tuple(range(n)), (None,) * n)
    excluded, hashed, masked = _lower(rule.exclude), _lower(rule.hash), _lower(rule.mask)
    salt = hash_salt(source).encode() if hashed & {c.lower() for c in table.column_names} else b""
    keep, values = [], []
    for i, column in enumerate(table.columns):
        name = column.name.lower()
        if name in excluded:
            continue
        keep.append(i)
        values.append(_hasher(salt) if name in hashed else _mask if name in masked else None)
    return Projection(len(table.columns), tuple(keep), tuple(values))


def _hasher(salt: bytes) -> Value:
    def digest(value: Any) -> str:
        return hashlib.sha256(salt + b"\0" + _canonical(value)).hexdigest()

    return digest


def _canonical(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return str(value).encode()


def _mask(_: Any) -> str:
    return MASK


def check_column_rules(source: SourceConfig, tables: list[TableSchema]) -> None:
    """Each rule names columns its tables have (else the closest name), of a type its rule
    takes; the row key and the split column stay whole (see the checks)."""
    import difflib

    for table in tables:
        rule = source.column_rule_of(table.qualified)
        if rule is None:
            continue
        by_name = {c.name.lower(): c for c in table.columns}
        for name in rule.ruled():
            if name.lower() not in by_name:
                close = difflib.get_close_matches(name, list(table.column_names), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(
                    f"source.column_rules of {table.qualified} names column {name!r}, which "
                    f"the table does not have{hint}. Renamed or dropped since? Name the column "
                    "it has now (or drop the rule), then snapshot the table again under the new "
                    f"rules: `binlake snapshot --tables {table.name} --reset`"
                )
        _check_kinds(table, rule, by_name)


def _check_kinds(table: TableSchema, rule: ColumnRule, by_name: dict[str, Column]) -> None:
    key = {k.lower() for k in table.key}
    split = table.split_column.lower()
    for name in rule.exclude:
        if name.lower() in key:
            raise ConfigError(
                f"source.column_rules of {table.qualified} excludes {name!r}, part of its row "
                "key: silver could not tell its rows apart (hash it instead)"
            )
    for name in [*rule.hash, *rule.mask]:
        if name.lower() == split:
            raise ConfigError(
                f"source.column_rules of {table.qualified} rules {name!r}, the column its "
                "snapshot splits by, whose values bound the chunks in the ledger: choose "
                "another split column (snapshot.split_keys) or leave it whole"
            )
    kinds = (
        (rule.hash, HASHABLE, "hash", "text, binary or integer"),
        (rule.mask, MASKABLE, "mask", "text"),
    )
    for names, allowed, what, takes in kinds:
        for name in names:
            kind = by_name[name.lower()].data_type
            if kind not in allowed:
                raise ConfigError(
                    f"source.column_rules of {table.qualified} would {what} {name!r}, a {kind} "
                    f"column: {what} takes {takes} columns"
                )
    for name in rule.mask:
        if name.lower() in key:
            raise ConfigError(
                f"source.column_rules of {table.qualified} masks {name!r}, part of its row key: "
                "masked keys collide (hash it instead)"
            )


def ruled_rename(source: SourceConfig, change: SchemaChange) -> str | None:
    """Why the stream must stop before `change`: it renames a column a rule names, whose values
    would land raw under the new name (None: it does not). Read from the statements, not only
    from renames the schemas confirm: a swap (`ssn` <-> `tax_id`) leaves both names in place,
    yet moves the ruled values under a name no rule covers."""
    rule = None if change.before is None else source.column_rule_of(change.before.qualified)
    if rule is None:
        return None
    ruled = _lower(rule.ruled())
    for old, new in _statement_renames(change):
        if old.lower() in ruled:
            return (
                f"{change.table} changed {change.where()}: it renames {old!r}, which "
                f"source.column_rules names, to {new!r}; the stream stopped before it, "
                "so no value of the new name landed. Name the new column in the rule, then "
                f"snapshot the table again: `binlake snapshot --tables {change.name} --reset`"
            )
    return None


def renamed_into_rule(source: SourceConfig, change: SchemaChange) -> str | None:
    """Why silver cannot follow `change` from the binlog: it renames a column no rule names
    onto a name a rule names (`CHANGE tax_id ssn` under `hash: [ssn]`). A rule follows the name
    the user configured, so every value under the new name must land through it, but the
    column's values landed as they were under the old name: renaming silver's column would put
    them raw under the ruled name. The table is read again instead, through its rules (None:
    `change` renames nothing onto a ruled name, or `ruled_rename` stops it first)."""
    before, after = change.before, change.after
    if before is None or after is None:
        return None
    old_rule, new_rule = (
        source.column_rule_of(before.qualified),
        source.column_rule_of(after.qualified),
    )
    if new_rule is None:
        return None
    was_ruled = _lower(old_rule.ruled()) if old_rule is not None else set()
    for old, new in _statement_renames(change):
        if new.lower() in _lower(new_rule.ruled()) and old.lower() not in was_ruled:
            return (
                f"it renames {old!r} onto {new!r}, which source.column_rules names: the values "
                f"landed under {old!r} as they were and would stay raw under {new!r}. Snapshot "
                f"the table again, so every value under {new!r} lands through its rule: "
                f"`binlake snapshot --tables {change.name} --reset`"
            )
    return None


def _statement_renames(change: SchemaChange) -> list[tuple[str, str]]:
    """(old name, new name) of each column the change's statements rename, a chain (`a` -> `x`
    -> `b`) as one rename, where the old name is a column before and the new one a column
    after (the statements of a change's shadow included, as `column_changes` reads them)."""
    before, after = change.before, change.after
    if before is None or after is None:
        return []
    names: dict[str, str] = {}
    for statement in (change.statement, *change.shadow):
        ddl = parse_ddl(statement)
        for old, new in ddl.column_renames if ddl else ():
            origin = next((o for o, n in names.items() if n.lower() == old.lower()), old)
            names[origin] = new
    had, has = _lower(before.column_names), _lower(after.column_names)
    return [(o, n) for o, n in names.items() if o.lower() in had and n.lower() in has]
