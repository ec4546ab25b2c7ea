"""What a DDL did to a table, in the terms silver is changed by: columns added, dropped, renamed
or retyped, and whether silver can follow at all.

The schemas before and after the DDL (read from the server, see `schema_history`) say which
columns exist and how they land; only the statement says whether a column that disappeared and
one that appeared are one column renamed, so renames come from the statement (`ddl`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.lake.tables import column_name
from binlake.model.schema import TableSchema
from binlake.model.typemap import spark_schema
from binlake.mysql.ddl import parse_ddl

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ColumnChange:
    kind: str  # add, drop, rename, retype
    column: str  # the column's name after the change (before it, for a drop)
    old_name: str | None = None  # a renamed column's name before the change
    old_type: T.DataType | None = None
    new_type: T.DataType | None = None

    def describe(self) -> str:
        if self.kind == "add":
            return f"ADD COLUMN {self.column} ({_type_name(self.new_type)})"
        if self.kind == "drop":
            return f"DROP COLUMN {self.column}"
        if self.kind == "rename":
            return f"RENAME COLUMN {self.old_name} TO {self.column}"
        return (
            f"MODIFY COLUMN {self.column} "
            f"({_type_name(self.old_type)} -> {_type_name(self.new_type)})"
        )


def _type_name(kind: T.DataType | None) -> str:
    return kind.simpleString() if kind is not None else "?"


def column_changes(before: TableSchema, after: TableSchema, *statements: str) -> list[ColumnChange]:
    """The column changes from `before` to `after`, renames as the statements name them (an
    online schema-change tool's cut-over: the ALTERs it ran on its shadow, in order)."""
    old = {f.name: f.dataType for f in spark_schema(before).fields}
    # MySQL, Spark and Delta compare column names case-insensitively: a column whose name only
    # changed case (CHANGE qty Qty) is the same column, known by silver's spelling.
    spelled = {name.lower(): name for name in old}
    new = {spelled.get(f.name.lower(), f.name): f.dataType for f in spark_schema(after).fields}
    renames = _renames(statements, old, new)
    changes: list[ColumnChange] = []
    for old_name, new_name in renames.items():
        changes.append(ColumnChange("rename", new_name, old_name, old[old_name], new[new_name]))
        if old[old_name] != new[new_name]:
            changes.append(ColumnChange("retype", new_name, None, old[old_name], new[new_name]))
    renamed_to = set(renames.values())
    for name, kind in new.items():
        if name in renamed_to:
            continue
        if name not in old:
            changes.append(ColumnChange("add", name, new_type=kind))
        elif old[name] != kind:
            changes.append(ColumnChange("retype", name, None, old[name], kind))
    changes += [
        ColumnChange("drop", name, old_type=kind)
        for name, kind in old.items()
        if name not in new and name not in renames
    ]
    return changes


def _renames(
    statements: tuple[str, ...], old: dict[str, T.DataType], new: dict[str, T.DataType]
) -> dict[str, str]:
    """Old name → new name for each column the statements rename (and the schemas confirm).
    The renames of one statement name the columns as they were before it and happen at once
    (`a` → `b`, `b` → `a` swaps them); those of later statements follow on (`a` → `b`, then
    `b` → `c` is one rename, `a` → `c`; then `c` → `a` is none)."""
    names: dict[str, str] = {}  # a column's name before the statements -> its name after them
    for statement in statements:
        ddl = parse_ddl(statement)
        names = _renamed_at_once(names, ddl.column_renames if ddl else ())
    found = {}
    for old_name, new_name in names.items():
        source = next((n for n in old if n.lower() == old_name.lower()), None)
        target = next((n for n in new if n.lower() == new_name.lower()), None)
        if source is not None and target is not None and source.lower() != target.lower():
            found[source] = target
    return _confirmed(found, new)


def _renamed_at_once(names: dict[str, str], step: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """`names` (first name → current name) after one statement's renames (`step`: current name
    → next name, all applied at once); a column the step renames that no earlier step did is
    known by its current name."""
    moves = {current.lower(): following for current, following in step}
    result = {first: moves.get(current.lower(), current) for first, current in names.items()}
    renamed = {current.lower() for current in names.values()}
    first_names = {first.lower() for first in names}
    for current, following in step:
        if current.lower() not in renamed and current.lower() not in first_names:
            result[current] = following
    return result


def _confirmed(renames: dict[str, str], new: dict[str, T.DataType]) -> dict[str, str]:
    """The renames the schema after confirms: a renamed column's old name is gone from it, or
    is the name another confirmed rename took (a swap, a cycle or a chain of names)."""
    present = {name.lower() for name in new}
    while True:
        targets = {target.lower() for target in renames.values()}
        kept = {
            source: target
            for source, target in renames.items()
            if source.lower() not in present or source.lower() in targets
        }
        if kept == renames:
            return kept
        renames = kept


def widens(old: T.DataType, new: T.DataType) -> bool:
    """Whether every value of `old` is a value of `new` and Delta can widen the column in place
    (type widening): integers to long, float to double, decimals gaining digits, date to a
    timestamp without zone."""
    if isinstance(old, T.ByteType | T.ShortType | T.IntegerType):
        return isinstance(new, T.ShortType | T.IntegerType | T.LongType) and _int_rank(
            new
        ) >= _int_rank(old)
    if isinstance(old, T.FloatType):
        return isinstance(new, T.DoubleType)
    if isinstance(old, T.DecimalType) and isinstance(new, T.DecimalType):
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    return isinstance(old, T.DateType) and isinstance(new, T.TimestampNTZType)


def _int_rank(kind: T.DataType) -> int:
    order = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    return next(i for i, t in enumerate(order) if isinstance(kind, t))


def unapplicable(before: TableSchema, after: TableSchema, changes: list[ColumnChange]) -> str:
    """Why silver cannot follow the change ("" if it can)."""
    if [k.lower() for k in before.key] != [k.lower() for k in after.key]:
        return (
            f"its row key changed from ({', '.join(before.key)}) to ({', '.join(after.key)}), "
            "which silver's MERGE identifies rows by"
        )
    for change in changes:
        if change.kind == "retype":
            assert change.old_type is not None and change.new_type is not None
            if not widens(change.old_type, change.new_type):
                return (
                    f"column {change.column} changed from {change.old_type.simpleString()} to "
                    f"{change.new_type.simpleString()}, which does not hold every old value "
                    "(narrowing) or is another kind of value"
                )
    return ""


def literal_default(table: TableSchema, column: str) -> str | None:
    """The column's default as text Spark can cast, or None (no default, or an expression such
    as CURRENT_TIMESTAMP, whose value for existing rows the server does not report)."""
    try:
        text = table.column(column).default
    except KeyError:
        return None
    if text is None or text.upper() == "NULL":
        return None
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text):
        return text
    log.warning(
        "%s.%s defaults to the expression %s: rows that existed before it was added read NULL "
        "in the lake",
        table.qualified, column, text,
    )  # fmt: skip
    return None


def rows_after(
    rows: DataFrame, before: TableSchema, after: TableSchema, *statements: str
) -> DataFrame:
    """`rows` (in `before`'s layout) as the DDL left them, in `after`'s layout: an added column
    holds the source's literal default (what the server gave the rows it held), a renamed one
    its old values, a widened one its values cast; dropped columns go. Columns of `rows` beyond
    `before`'s (bronze's own) follow unchanged."""
    changes = column_changes(before, after, *statements)
    renamed = {c.column: c.old_name for c in changes if c.kind == "rename"}
    moved = {name.lower() for name in renamed.values() if name is not None}
    spelled = {n.lower(): n for n in before.column_names if n.lower() not in moved}
    data = []
    for field in spark_schema(after).fields:
        source = renamed.get(field.name) or spelled.get(field.name.lower())
        value = (
            F.col(column_name(source))
            if source is not None
            else F.lit(literal_default(after, field.name))
        )
        data.append(value.cast(field.dataType).alias(field.name))
    extra = [F.col(column_name(n)) for n in rows.columns if n not in before.column_names]
    return rows.select(*data, *extra)
