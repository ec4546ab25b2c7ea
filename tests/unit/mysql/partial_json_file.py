"""A binlog file holding a partial JSON update under `binlog_row_image=FULL`, built from the one
real PARTIAL_UPDATE_ROWS event known (fixtures/mysql-binlogs/json.binlog.000001, MySQL 8.0.22).

That event was logged under a MINIMAL row image: each before image holds the key alone, each
after image the JSON diff MySQL wrote (`$.age` replaced) and the generated columns it computed
(`name`, `age`), the key left out. Under FULL, MySQL logs the same event with every column in
both images: the before image is the row as the file's UPDATE_ROWS before it left it, and the
after image holds the key too. This file is the real file with that one event rebuilt so, from
the file's own bytes (the UPDATE_ROWS' after images, the partial event's diffs and generated
values); every event after it moved on by the difference in size, its checksum recomputed.

Table `t(id INT PRIMARY KEY, json_col JSON, name VARCHAR(100) AS (json_col->>'$.name'),
age INT AS (json_col->'$.age'))`: an image is its null bitmap (one byte, no NULLs here), then
id (4 bytes), json_col (4-byte length), name (2-byte length), age (4 bytes).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "mysql-binlogs"
REAL = FIXTURES / "json.binlog.000001"
#: The real file's UPDATE_ROWS (FULL images) and PARTIAL_UPDATE_ROWS (MINIMAL images).
_UPDATE_AT, _PARTIAL_AT = 2612, 3750
_HEADER = struct.Struct("<IBIIIH")
#: table id (6), flags (2), the extra data's length (2: none), column count, present bitmaps.
_POST_HEADER = 10


def full_image_partial_file(folder: Path, name: str = "json-full.000001") -> Path:
    """The real file, its partial update logged as under a FULL row image, written to `folder`."""
    data = REAL.read_bytes()
    old = _event(data, _PARTIAL_AT)
    new = _full_image_event(data, old)
    moved = len(new) - len(old)
    rest, at = bytearray(), _PARTIAL_AT + len(old)
    while at < len(data):
        event = _event(data, at)
        fields = list(_HEADER.unpack_from(event))
        fields[4] += moved  # log_pos: the end of the event
        rest += _framed(_HEADER.pack(*fields) + event[_HEADER.size : -4])
        at += len(event)
    path = folder / name
    path.write_bytes(data[:_PARTIAL_AT] + new + bytes(rest))
    return path


def _event(data: bytes, at: int) -> bytes:
    return data[at : at + _HEADER.unpack_from(data, at)[3]]


def _framed(without_checksum: bytes) -> bytes:
    return without_checksum + struct.pack("<I", zlib.crc32(without_checksum))


def _full_image_event(data: bytes, old: bytes) -> bytes:
    body = old[_HEADER.size : -4]
    post, rows = body[:_POST_HEADER], body[_POST_HEADER + 3 :]  # count 4, bitmaps 01, 0e
    update = _event(data, _UPDATE_AT)[_HEADER.size : -4]
    whole = _images(update[_POST_HEADER + 3 :])[1::2]  # each row's after image: as it was
    images = bytearray()
    pos = 0
    for before in whole:
        key, pos = rows[pos + 1 : pos + 5], pos + 5  # MINIMAL before image: nulls, id
        assert key == before[1:5]
        options, pos = rows[pos : pos + 3], pos + 3  # PARTIAL_JSON, bit 0 set, no NULL
        assert options == b"\x01\x01\x00"
        diff_length = int.from_bytes(rows[pos : pos + 4], "little")
        name_at = pos + 4 + diff_length
        name_end = name_at + 2 + int.from_bytes(rows[name_at : name_at + 2], "little")
        values, pos = rows[pos : name_end + 4], name_end + 4  # diff, name, age
        images += before + options + key + values
    assert pos == len(rows)
    fields = list(_HEADER.unpack_from(old))
    new_body = post + b"\x04\x0f\x0f" + bytes(images)
    fields[3] = _HEADER.size + len(new_body) + 4
    fields[4] = _PARTIAL_AT + fields[3]
    return _framed(_HEADER.pack(*fields) + new_body)


def _images(rows: bytes) -> list[bytes]:
    """The FULL images of `t` in a rows event's row data, each whole."""
    found, pos = [], 0
    while pos < len(rows):
        start = pos
        assert rows[pos] == 0  # no NULL
        pos += 1 + 4
        pos += 4 + int.from_bytes(rows[pos : pos + 4], "little")
        pos += 2 + int.from_bytes(rows[pos : pos + 2], "little")
        pos += 4
        found.append(rows[start:pos])
    return found
