"""Which tables a job captures: `source.tables` read against one `source.database`, or, with no
`source.database`, against `db.table` across the server's databases.

One database: each entry is a table name or a regex fully matching a table name, as always.
Several databases: each entry is matched, as a name or a fully-matching regex, against the
qualified name `db.table` (Debezium's convention): `shop_[0-9]+\\.orders` takes `orders` of every
`shop_<n>` database, including one created while the stream runs. Either way a name of an online
schema-change tool's shadow (`_t_new`, `_t_gho`, ...) is captured only when an entry names it
exactly: its rows are the tool's copy.

The per-table config sections (`source.row_filters`, `source.column_rules`,
`silver.history_tables`, `lake.table_layout`, `snapshot.split_keys`) name a table the same way,
by its name or by `db.table` (`table_matches`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from binlake.errors import SourceError
from binlake.model.shadow_tables import is_shadow_name

#: The server's own databases: never captured by a pattern over several databases.
SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def qualified(database: str, table: str) -> str:
    return f"{database}.{table}"


def split_qualified(name: str) -> tuple[str, str]:
    """("db", "table") of "db.table" (a database name holds no dot binlake can capture)."""
    database, table = name.split(".", 1)
    return database, table


def name_matches(pattern: str, name: str) -> bool:
    """`name` is `pattern`, or `pattern` is a regex matching all of it."""
    if name == pattern:
        return True
    try:
        return re.fullmatch(pattern, name) is not None
    except re.error:
        return False


def table_matches(pattern: str, table: str) -> bool:
    """Whether a per-table config key (a table name or `db.table`, either a name or a
    fully-matching regex) names the table `table` ("db.table")."""
    return name_matches(pattern, table) or name_matches(pattern, split_qualified(table)[1])


@dataclass(frozen=True)
class Capture:
    """`source.database` (None: several databases) and `source.tables` (None: every table of
    the one database)."""

    database: str | None
    patterns: tuple[str, ...] | None

    def captures(self, database: str, table: str) -> bool:
        """Whether a table of this name is captured (one that exists now or is created later)."""
        if self.patterns is None:
            return database == self.database and not is_shadow_name(table)
        return any(self._matches(database, table, p) for p in self.patterns)

    def _matches(self, database: str, table: str, pattern: str) -> bool:
        if self.database is None:
            name = qualified(database, table)
            if database in SYSTEM_DATABASES:
                return False
        elif database == self.database:
            name = table
        else:
            return False
        if name == pattern:
            return True
        return not is_shadow_name(table) and name_matches(pattern, name)

    @property
    def schemas(self) -> list[str] | None:
        """The databases a binlog read may keep to (None: any, a matching one may appear)."""
        return None if self.database is None else [self.database]

    def select(self, available: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """The captured (database, table)s among the existing ones, in `source.tables` order
        (name order without it); an entry matching nothing is refused with the closest name."""
        available = list(available)
        if self.patterns is None:
            return [t for t in available if self.captures(*t)]
        chosen: list[tuple[str, str]] = []
        for pattern in self.patterns:
            matched = [t for t in available if self._matches(*t, pattern)]
            if not matched:
                raise self._missing(pattern, available)
            chosen.extend(t for t in matched if t not in chosen)
        return chosen

    def _missing(self, pattern: str, available: list[tuple[str, str]]) -> SourceError:
        if self.database is not None:
            names = [t for d, t in available if d == self.database]
            what = f"table {self.database}.{pattern} does not exist"
        else:
            names = [qualified(d, t) for d, t in available]
            what = f"table {pattern} does not exist (no db.table matches it)"
        close = difflib.get_close_matches(pattern, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return SourceError(
            f"{what}{hint}: a table the source user holds no privilege on is not listed. Fix "
            "source.tables, or GRANT SELECT on the table to the source user"
        )
