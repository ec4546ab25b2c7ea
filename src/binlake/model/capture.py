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

Database and table names compare as the server compares them (`TableNames`, its
`lower_case_table_names`): case-sensitively by default on Linux, case-insensitively on a server
that stores them lower-case (1: Azure's default, Windows) or compares them lower-cased (2: macOS).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from binlake.errors import SourceError
from binlake.model.shadow_tables import is_shadow_name

#: The server's own databases: never captured by a pattern over several databases.
SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


@dataclass(frozen=True)
class TableNames:
    """How the source compares database and table names: its `lower_case_table_names`. 0: as
    written, case-sensitively; 1: stored lower-case, compared case-insensitively; 2: stored as
    created, compared lower-cased. A DDL may spell a table `Orders` or `ORDERS` under 1 or 2 and
    change `orders` all the same, so binlake compares `key`s and keeps the stored spelling
    (`stored`) for the lake's paths: a table's path never follows a statement's spelling."""

    lower_case: int = 0

    @property
    def folds(self) -> bool:
        return self.lower_case != 0

    def key(self, name: str) -> str:
        """What the server compares a name by."""
        return name.lower() if self.folds else name

    def same(self, one: str, other: str) -> bool:
        return self.key(one) == self.key(other)

    def stored(self, name: str) -> str:
        """The spelling the server stores a name a statement creates by (its catalog's)."""
        return name.lower() if self.lower_case == 1 else name

    def matches(self, pattern: str, name: str) -> bool:
        """`name_matches`, case-insensitively where the server compares names so."""
        return name_matches(pattern, name, re.IGNORECASE if self.folds else 0)


def qualified(database: str, table: str) -> str:
    return f"{database}.{table}"


def split_qualified(name: str) -> tuple[str, str]:
    """("db", "table") of "db.table" (a database name holds no dot binlake can capture)."""
    database, table = name.split(".", 1)
    return database, table


def name_matches(pattern: str, name: str, flags: int = 0) -> bool:
    """`name` is `pattern`, or `pattern` is a regex matching all of it (with re `flags`)."""
    if name == pattern or (flags & re.IGNORECASE and name.lower() == pattern.lower()):
        return True
    try:
        return re.fullmatch(pattern, name, flags) is not None
    except re.error:
        return False


def table_matches(pattern: str, table: str) -> bool:
    """Whether a per-table config key (a table name or `db.table`, either a name or a
    fully-matching regex) names the table `table` ("db.table")."""
    return name_matches(pattern, table) or name_matches(pattern, split_qualified(table)[1])


@dataclass(frozen=True)
class Capture:
    """`source.database` (None: several databases) and `source.tables` (None: every table of
    the one database), with names compared as the server compares them (`names`: the default
    is case-sensitive; `under` gives a server's rule)."""

    database: str | None
    patterns: tuple[str, ...] | None
    names: TableNames = TableNames()

    def under(self, names: TableNames) -> Capture:
        """This capture on a server comparing names by `names`."""
        return replace(self, names=names)

    def in_database(self, database: str) -> bool:
        """Whether `database` is the one database captured (any one, with several)."""
        return self.database is None or self.names.same(database, self.database)

    def captures(self, database: str, table: str) -> bool:
        """Whether a table of this name is captured (one that exists now or is created later)."""
        if self.patterns is None:
            captured = self.database is not None and self.in_database(database)
            return captured and not is_shadow_name(table)
        return any(self._matches(database, table, p) for p in self.patterns)

    def _matches(self, database: str, table: str, pattern: str) -> bool:
        if self.database is None:
            name = qualified(database, table)
            if database in SYSTEM_DATABASES:
                return False
        elif self.in_database(database):
            name = table
        else:
            return False
        if self.names.same(name, pattern):
            return True
        return not is_shadow_name(table) and self.names.matches(pattern, name)

    @property
    def schemas(self) -> list[str] | None:
        """The databases a binlog read may keep to (None: any, a matching one may appear). Its
        events name a database as the server stores it; under `lower_case_table_names=2` that
        may be another spelling than `source.database`'s, so the read keeps to none there."""
        if self.database is None or self.names.lower_case == 2:
            return None
        return [self.names.stored(self.database)]

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
