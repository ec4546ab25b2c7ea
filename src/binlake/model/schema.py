"""binlake's model of a source table: its columns as information_schema describes them, its row
key and split column, and how its identifiers are quoted in SQL text.

It sits below every module that reads, decodes or lands rows (`source`, `typemap`,
`row_images`, `binlog`, `schema_history`, ...), so none of them imports another to reach it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any


def quote(identifier: str) -> str:
    """Quote a MySQL identifier for binlake's SQL text (the one place SQL names are built from
    strings).

    Backticks double inside the backticks, and so does `%`: binlake runs all SQL text with a
    parameter tuple (`query`, the chunk SELECT; an empty tuple when nothing is bound), and both
    drivers %-format that text, turning `%%` back into `%`. A name such as `tab%s` would
    otherwise consume a parameter or fail the formatting.
    """
    return typed_identifier(identifier).replace("%", "%%")


def typed_identifier(identifier: str) -> str:
    """A quoted MySQL identifier as a person types it (in advice such as a GRANT statement)."""
    return "`" + identifier.replace("`", "``") + "`"


@dataclass(frozen=True, slots=True)
class Column:
    """One source column, as information_schema describes it."""

    name: str
    data_type: str  # lower case: int, bigint, decimal, varchar, datetime, ...
    column_type: str  # full type: "bigint(20) unsigned", "decimal(10,2)", "enum('a','b')"
    nullable: bool
    precision: int | None = None
    scale: int | None = None
    datetime_precision: int | None = None
    charset: str | None = None
    collation: str | None = None
    #: Single-byte charsets: the server's decoding of each byte (`binlake.mysql.charsets`).
    charmap: str | None = None
    #: COLUMN_DEFAULT as the server reports it (a literal, `NULL`, or an expression).
    default: str | None = None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()


@dataclass(frozen=True)
class TableSchema:
    """A captured table: its columns in ordinal order, its row key and its split column."""

    database: str
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # primary key, or the unique split key of a key-less table
    split_column: str
    #: A system-versioned table's (row start, row end) period columns (MariaDB `WITH SYSTEM
    #: VERSIONING`); None for any other table. Implicit ones (`row_start`, `row_end`) are
    #: not among `columns`: information_schema does not list them, nor does silver hold them.
    system_period: tuple[str, str] | None = None

    # Asked once per binlog change by the stream's filter: computed once per schema.
    @cached_property
    def qualified(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def sql_name(self) -> str:
        return f"{quote(self.database)}.{quote(self.name)}"

    @property
    def typed_name(self) -> str:
        """The quoted name to show in advice (`sql_name` is for binlake's own SQL text)."""
        return f"{typed_identifier(self.database)}.{typed_identifier(self.name)}"

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def key_indexes(self) -> tuple[int, ...]:
        names = self.column_names
        return tuple(names.index(k) for k in self.key)

    def key_of(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """The row key of a row tuple in column order."""
        return tuple(row[i] for i in self.key_indexes)

    @cached_property
    def split_index(self) -> int:
        return self.column_names.index(self.split_column)

    def to_json(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "name": self.name,
            "columns": [asdict(c) for c in self.columns],
            "key": list(self.key),
            "split_column": self.split_column,
            "system_period": list(self.system_period) if self.system_period else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableSchema:
        return cls(
            data["database"],
            data["name"],
            tuple(Column(**c) for c in data["columns"]),
            tuple(data["key"]),
            data["split_column"],
            tuple(period) if (period := data.get("system_period")) else None,
        )
