"""`paths.meta_columns`: the one list of binlake's own columns in a table's silver, which a
source column may not take (refused before any work, or stopping the stream at its DDL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.config.settings import parse_config
from binlake.lake.paths import meta_columns


@pytest.mark.parametrize(
    ("silver", "table", "expected"),
    [
        ({}, "shop.orders", ("_binlake_offset",)),
        ({"deletes": "soft"}, "shop.orders", ("_binlake_offset", "_deleted_at")),
        # scd2 keeps versions, not soft deletes: `_deleted_at` is the source's to use there.
        (
            {"deletes": "soft", "history_tables": {"orders": "scd2"}},
            "shop.orders",
            ("_binlake_offset", "_valid_from", "_valid_to", "_is_current", "_binlake_end_offset"),
        ),
        # Per table: another table of the same job keeps its own.
        ({"history_tables": {"orders": "scd2"}}, "shop.items", ("_binlake_offset",)),
        (
            {"routes": [{"source": r"shop\.orders_[0-9]+", "target": "orders"}]},
            "shop.orders_1",
            ("_source_db", "_source_table", "_binlake_offset"),
        ),
    ],
)
def test_binlakes_own_columns_follow_the_tables_settings(
    tmp_path: Path, silver: dict[str, Any], table: str, expected: tuple[str, ...]
) -> None:
    config = parse_config(
        {"source": {"database": "shop"}, "lake": {"root": str(tmp_path)}, "silver": silver}
    )
    assert meta_columns(config, table) == expected
