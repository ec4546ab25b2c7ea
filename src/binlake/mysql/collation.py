"""String keys ordered the way the column's collation orders them.

"Which chunk holds key k" must be answered in the server's order: under `utf8mb4_general_ci`,
`'a'` and `'A'` are one key and `'b' > 'A'`. Rather than re-implementing collations, binlake asks
the server for `WEIGHT_STRING(k COLLATE c)`, the collation's own sort key, and compares weights.

For a NO PAD collation the weight strings' byte order is the server's order. Under PAD SPACE the
server compares the shorter value as if padded with spaces, so `'a\\t' < 'a'` (a tab weighs less
than a space) although the weights of `'a'` are a prefix of those of `'a\\t'`: stripping trailing
spaces cannot fix that. A PAD SPACE key is the weights re-encoded to order as if followed by
endless space weights (`padded`), level by level for collations that compare several levels
(letters, then accents, then case). Only the legacy Czech collations really do strip trailing
spaces and compare the rest. Which of the three a collation does, a space's weight and the levels
all come from the server (MariaDB's `information_schema` has no `PAD_ATTRIBUTE`), never from the
collation's name. Keys are fetched in batches and cached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from binlake.errors import SourceError
from binlake.model.schema import Column
from binlake.mysql.connection import query

_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_BATCH = 500
_MAX_LEVELS = 6  # weight levels MariaDB's `WEIGHT_STRING(... LEVEL n)` can name
_RUN = 4  # bytes of a run length in `padded`'s tokens
_BELOW, _END, _ABOVE = b"\x00", b"\x01", b"\x02"


@dataclass(frozen=True)
class _Padding:
    """How the server treats the end of a value: as is (NO PAD, the default), stripped of
    trailing spaces (`trims`), or padded with spaces on each of `levels`, given as the
    `WEIGHT_STRING` clause asking for the level alone and a space's weight on it."""

    trims: bool = False
    levels: tuple[tuple[str, bytes], ...] = ()


class CollationOrder:
    """A sort key for values of one string column, computed by the server and cached."""

    def __init__(self, conn: pymysql.Connection, column: Column) -> None:
        charset, collation = column.charset or "utf8mb4", column.collation or "utf8mb4_bin"
        if not (_NAME.match(charset) and _NAME.match(collation)):
            raise ValueError(f"unexpected charset/collation {charset!r}/{collation!r}")
        self._conn = conn
        # charset/collation come from information_schema and are checked above, never user data.
        value = f"CONVERT(%s USING {charset}) COLLATE {collation}"
        padding = _padding(conn, value, collation)
        self._trims = padding.trims
        self._spaces = tuple(space for _, space in padding.levels)
        clauses = [clause for clause, _ in padding.levels] or [""]
        self._exprs = [f"WEIGHT_STRING({value}{clause})" for clause in clauses]
        self._cache: dict[str, bytes] = {}

    def prime(self, values: Iterable[Any]) -> None:
        missing = sorted({self._prepare(v) for v in values if v is not None} - set(self._cache))
        width = len(self._exprs)
        for i in range(0, len(missing), _BATCH):
            batch = missing[i : i + _BATCH]
            sql = "SELECT " + ", ".join(self._exprs * len(batch))
            weights = query(self._conn, sql, [text for text in batch for _ in self._exprs])[0]
            for j, text in enumerate(batch):
                self._cache[text] = self._key(weights[j * width : (j + 1) * width])

    def __call__(self, value: Any) -> bytes:
        text = self._prepare(value)
        if text not in self._cache:
            self.prime([text])
        return self._cache[text]

    def _prepare(self, value: Any) -> str:
        text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
        return text.rstrip(" ") if self._trims else text

    def _key(self, weights: Sequence[bytes]) -> bytes:
        if not self._spaces:
            return bytes(weights[0])
        return b"".join(padded(bytes(w), s) for w, s in zip(weights, self._spaces, strict=True))


def needs_collation(column: Column) -> bool:
    return column.collation is not None


def _padding(conn: pymysql.Connection, value: str, collation: str) -> _Padding:
    """Ask the server how `collation` treats the end of a value.

    The probes work on MySQL and MariaDB alike: `'a' = 'a '` holds only under PAD SPACE. Where
    values are stripped, `''` is the smallest value; where they are padded, a character weighing
    less than a space sorts before it (a tab under UCA, `\\x01` in the 8-bit tables).
    `WEIGHT_STRING(' ' AS CHAR(1))` is one space's weights, and two spaces weigh twice that on a
    single level. Several levels are asked for one by one (MariaDB's UCA 14 collations; MySQL's
    multi-level ones are all NO PAD) until they add up to the whole weight string.
    """
    pads, below, one, two = query(
        conn,
        f"SELECT {value} = {value}, {value} < {value} OR {value} < {value}, "
        f"WEIGHT_STRING({value} AS CHAR(1)), WEIGHT_STRING({value} AS CHAR(2))",
        ("a", "a ", "\t", "", "\x01", "", " ", "  "),
    )[0]
    if not pads:
        return _Padding()
    if not below:
        return _Padding(trims=True)
    if bytes(two) == bytes(one) * 2:
        return _Padding(levels=(("", bytes(one)),))
    numbers = range(1, _MAX_LEVELS + 1)
    sql = "SELECT " + ", ".join(f"WEIGHT_STRING({value} LEVEL {n})" for n in numbers)
    spaces = [bytes(w) for w in query(conn, sql, [" "] * len(numbers))[0]]
    for count in numbers:
        if b"".join(spaces[:count]) == bytes(one):
            # A level where a space weighs nothing weighs nothing at all (accents under _ai_cs).
            levels = [(f" LEVEL {n}", s) for n, s in enumerate(spaces[:count], start=1) if s]
            return _Padding(levels=tuple(levels))
    raise SourceError(f"cannot split the weights of collation {collation} into levels")


def padded(weights: bytes, space: bytes) -> bytes:
    """`weights` re-encoded so that byte order is the order of `weights` + `space` × ∞.

    Weights are units of `len(space)` bytes. Each unit other than a space becomes a token: the
    run of spaces before it and the unit; the end becomes `_END`, an endless run of spaces. Where
    two encodings first differ, equal runs leave the units to decide; unequal runs put the
    shorter run's unit against a space, so a unit above the space wins and one below loses,
    whatever follows. Hence tokens above the space sort after `_END` and by descending run,
    tokens below it before `_END` and by ascending run. Trailing spaces vanish, so values the
    collation calls equal get equal keys, and `_END` keeps encodings prefix-free, so levels
    concatenate.
    """
    width, limit = len(space), 256**_RUN - 1
    tokens: list[bytes] = []
    run = 0
    for i in range(0, len(weights), width):
        unit = weights[i : i + width]
        if unit == space:
            run += 1
        elif unit > space:
            tokens += (_ABOVE, (limit - run).to_bytes(_RUN, "big"), unit)
            run = 0
        else:
            tokens += (_BELOW, run.to_bytes(_RUN, "big"), unit)
            run = 0
    tokens.append(_END)
    return b"".join(tokens)
