"""The rules each table's snapshot was read with: its row filter and its column rules.

Bronze and silver hold a table's rows as those rules shaped them. A job under other rules would
mix two shapes in one table (rows the new filter drops kept, values the old rules hashed beside
raw ones), so it is refused until the table is snapshotted again (`--reset`), which records
the new ones. Kept in `_system/table_rules.json`, tables by qualified name; a table missing
from it was read whole, with no rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from binlake.config.settings import Config
from binlake.errors import ConfigError
from binlake.lake.files import LakeFiles, VersionedText
from binlake.lake.paths import system_path
from binlake.model.schema import TableSchema


class TableRules:
    def __init__(self, config: Config, files: LakeFiles) -> None:
        self.config = config
        self.document = VersionedText(system_path(config, "table_rules.json"), files)

    def configured(self, table: TableSchema) -> dict[str, Any]:
        """`table`'s rules in the config (empty: none)."""
        rules: dict[str, Any] = {}
        row_filter = self.config.source.row_filter_of(table.qualified)
        if row_filter is not None:
            rules["row_filter"] = row_filter
        columns = self.config.source.column_rule_of(table.qualified)
        if columns is not None and columns.ruled():
            rules["columns"] = columns.model_dump()
        return rules

    def record(self, tables: Iterable[TableSchema]) -> None:
        """The rules `tables` are snapshotted with from now on (a first snapshot, a reset)."""
        rules = {t.qualified: self.configured(t) for t in tables}
        if not rules:
            return

        def recorded(text: str | None) -> str | None:
            before = json.loads(text) if text else {}
            after = {t: r for t, r in sorted({**before, **rules}.items()) if r}
            return None if after == before else json.dumps(after, indent=1)

        self.document.update(recorded)

    def require_unchanged(self, tables: Iterable[TableSchema]) -> None:
        """Refuse a table whose configured rules are not those its snapshot was read with."""
        text = self.document.read()
        recorded = json.loads(text) if text else {}
        for table in tables:
            was, now = recorded.get(table.qualified, {}), self.configured(table)
            if was != now:
                raise ConfigError(
                    f"the rules of {table.qualified} (source.row_filters, "
                    f"source.column_rules) are {_shown(now)}, but its snapshot was read with "
                    f"{_shown(was)}: bronze and silver hold its rows as those shaped them. Set "
                    "them back, or snapshot the table again under the new ones: "
                    f"`binlake snapshot --tables {table.name} --reset`"
                )


def _shown(rules: dict[str, Any]) -> str:
    return json.dumps(rules, sort_keys=True) if rules else "none"
