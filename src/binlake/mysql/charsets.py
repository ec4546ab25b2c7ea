"""Text in a column's character set, decoded as the server defines that character set.

The snapshot asks the server for utf8mb4 (the server converts), but the binlog carries each
column's bytes in the column's own charset, so the stream must decode them itself, and agree with
the server's conversion byte for byte. Python's codecs do not: MySQL's `latin1` is cp1252 with
0x81, 0x8D, 0x8F, 0x90 and 0x9D mapped to U+0081… (Python's cp1252 has no such characters and
raises), and `greek`, `hebrew`, `cp1250`, `cp1256`, `koi8u`, `armscii8`, `dec8`, `swe7`, … differ
from their Python namesakes in places. So single-byte charsets are decoded through a 256-entry
table the server itself produces (`CONVERT(bytes USING charset)`), fetched once per charset; the
UTF-16/32 family is big-endian (little-endian for `utf16le`) as MySQL stores it; other multi-byte
charsets use the Python codec of the same name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pymysql

_UNICODE = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
}
#: Multi-byte charsets whose Python codec carries another name.
_CODECS = {"ujis": "euc_jp", "eucjpms": "euc_jp", "sjis": "shift_jis", "cp932": "cp932"}
_NAME = re.compile(r"^[a-z0-9_]+$")
_ALL_BYTES = bytes(range(256))
_tables: dict[str, str] = {}


def charmap(conn: pymysql.Connection, charset: str | None) -> str | None:
    """The server's decoding of every byte in a single-byte `charset` (256 characters), or None
    for multi-byte charsets and binary columns. Cached per charset: it never changes."""
    if charset is None or charset == "binary" or charset in _UNICODE:
        return None
    if charset not in _tables:
        if not _NAME.match(charset):
            raise ValueError(f"unexpected character set name {charset!r}")
        with conn.cursor() as cur:
            cur.execute(
                "SELECT maxlen FROM information_schema.character_sets "
                "WHERE character_set_name = %s",
                (charset,),
            )
            found = cur.fetchone()
            if found is None or int(found[0]) != 1:
                return None
            # The name is checked above and comes from information_schema, never from data.
            cur.execute(f"SELECT CONVERT(_binary %s USING {charset})", (_ALL_BYTES,))
            (table,) = cur.fetchone() or ("",)
        if len(table) != len(_ALL_BYTES):
            raise ValueError(f"the server's {charset} table has {len(table)} characters")
        _tables[charset] = table
    return _tables[charset]


@dataclass(frozen=True)
class TextCodec:
    """How one column's bytes become text: a Python codec, then (single-byte charsets) the
    server's translation of each byte."""

    codec: str
    translation: dict[int, str] | None = None

    def decode(self, raw: bytes) -> str:
        text = raw.decode(self.codec)
        return text if self.translation is None else text.translate(self.translation)


def text_codec(charset: str | None, table: str | None) -> TextCodec:
    """The codec of `charset`, exact to the server's conversion (`table` from `charmap`)."""
    if table is not None:
        return TextCodec("latin-1", {i: ch for i, ch in enumerate(table) if ord(ch) != i})
    name = charset or "utf8mb4"
    return TextCodec(_UNICODE.get(name) or _CODECS.get(name, name))
