"""String keys ordered the way the column's collation orders them.

"Which chunk holds key k" must be answered in MySQL's order: under `utf8mb4_general_ci`, `'a'`
and `'A'` are one key and `'b' > 'A'`. Rather than re-implementing collations, binlake asks the
server for `WEIGHT_STRING(k COLLATE c)`, the collation's own sort key, and compares those bytes.
PAD SPACE collations ignore trailing spaces in comparisons but not in `WEIGHT_STRING`, so those
are stripped first. Weights are fetched in batches and cached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pymysql

from binlake.source import Column, query

_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_BATCH = 500


class CollationOrder:
    """A sort key for values of one string column, computed by the server and cached."""

    def __init__(self, conn: pymysql.Connection, column: Column) -> None:
        charset, collation = column.charset or "utf8mb4", column.collation or "utf8mb4_bin"
        if not (_NAME.match(charset) and _NAME.match(collation)):
            raise ValueError(f"unexpected charset/collation {charset!r}/{collation!r}")
        self._conn = conn
        self._pad_space = "_nopad_" not in collation and not collation.endswith("_bin")
        # charset/collation come from information_schema and are checked above, never user data.
        self._expr = f"WEIGHT_STRING(CONVERT(%s USING {charset}) COLLATE {collation})"
        self._cache: dict[str, bytes] = {}

    def prime(self, values: Iterable[Any]) -> None:
        missing = sorted({self._prepare(v) for v in values if v is not None} - set(self._cache))
        for i in range(0, len(missing), _BATCH):
            batch = missing[i : i + _BATCH]
            sql = "SELECT " + ", ".join([self._expr] * len(batch))
            weights = query(self._conn, sql, batch)[0]
            self._cache.update(zip(batch, (bytes(w) for w in weights), strict=True))

    def __call__(self, value: Any) -> bytes:
        text = self._prepare(value)
        if text not in self._cache:
            self.prime([text])
        return self._cache[text]

    def _prepare(self, value: Any) -> str:
        text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
        return text.rstrip(" ") if self._pad_space else text


def needs_collation(column: Column) -> bool:
    return column.collation is not None
