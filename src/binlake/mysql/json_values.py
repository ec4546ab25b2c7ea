"""MySQL's binary JSON (the value of a JSON column in a row image or a partial update's diff)
as Python values, read the one way both binlog readers read it: the stream's row decoder
(`row_images`) and the file reader (`binlog_files`).

python-mysql-replication's `parse_json` reads most of the format, but not MySQL's temporal
values inside a document (opaque values, `CAST(... AS JSON)` of a DATE, DATETIME, TIMESTAMP or
TIME column): it makes a TIME a `datetime.time`, which fails from 24 hours on and drops the
sign (MySQL's TIME spans ±838:59:59), reads a DATE as a midnight `datetime`, which MySQL's JSON
text does not show as one, and a TIMESTAMP as garbled text. Here objects and arrays are walked
to reach those values, which become `timedelta`, `date` and `datetime`: what `typemap.json_text`
renders as MySQL renders the document. Other opaque values (a BLOB or BIT cast to JSON), which
the library decodes as UTF-8 text, are MySQL's text of them (`base64:type15:...`). Everything
else is the library's value (object keys and strings as bytes, DECIMAL as `Decimal`).
"""

from __future__ import annotations

import base64
from datetime import date, datetime, time, timedelta
from typing import Any

from pymysqlreplication import json_binary as jb
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.json_binary import parse_json
from pymysqlreplication.util.bytes import decode_count, decode_uint, decode_variable_length

_OBJECTS = (jb.JSONB_TYPE_SMALL_OBJECT, jb.JSONB_TYPE_LARGE_OBJECT)
_CONTAINERS = (*_OBJECTS, jb.JSONB_TYPE_SMALL_ARRAY, jb.JSONB_TYPE_LARGE_ARRAY)
_SMALL = (jb.JSONB_TYPE_SMALL_OBJECT, jb.JSONB_TYPE_SMALL_ARRAY)
_TIMES = (FIELD_TYPE.TIME, FIELD_TYPE.TIME2)
_DATETIMES = (
    FIELD_TYPE.DATETIME, FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIMESTAMP2,
)  # fmt: skip
_DATES = (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE)
_DECIMALS = (FIELD_TYPE.DECIMAL, FIELD_TYPE.NEWDECIMAL)


def json_value(type_code: int, data: bytes) -> Any:
    """The binary JSON value of type `type_code` held in `data` (the bytes after the type byte):
    the library's value, but an opaque value anywhere in it as `_opaque_temporal` or
    `_opaque_text` reads it (a DECIMAL stays the library's `Decimal`)."""
    if type_code in _CONTAINERS:
        return _container(type_code, data)
    if type_code != jb.JSONB_TYPE_OPAQUE or data[0] in _DECIMALS:
        return parse_json(type_code, data)
    if data[0] in (*_TIMES, *_DATETIMES, *_DATES):
        return _opaque_temporal(data)
    return _opaque_text(data)


def _container(type_code: int, data: bytes) -> Any:
    """A binary JSON object (keys as bytes, as the library keys them) or array: a count and
    size, key entries (offset, length), then value entries (type, and the value inline or its
    offset), each offset from the container's start."""
    small, is_object = type_code in _SMALL, type_code in _OBJECTS
    offset_size = 2 if small else 4
    count = decode_count(data, small)
    key_entry, value_entry = offset_size + 2, offset_size + 1
    keys = []
    for i in range(count if is_object else 0):
        at = 2 * offset_size + key_entry * i
        start = decode_count(data[at:], small)
        keys.append(data[start : start + decode_uint(data[at + offset_size :])])
    values = []
    for i in range(count):
        at = 2 * offset_size + key_entry * len(keys) + value_entry * i
        value_type = data[at]
        if jb.is_json_inline_value(value_type, small):
            values.append(parse_json(value_type, data[at + 1 : at + value_entry]))
        else:
            values.append(json_value(value_type, data[decode_count(data[at + 1 :], small) :]))
    return dict(zip(keys, values, strict=True)) if is_object else values


def _opaque_temporal(data: bytes) -> timedelta | datetime | date:
    """An opaque temporal value: its field type byte, a variable length, then MySQL's packed
    temporal (an int64, negated when negative). A TIME packs hours << 36 | minutes << 30 |
    seconds << 24 | microseconds; a DATE, DATETIME or TIMESTAMP packs (year × 13 + month) << 46
    | day << 41 and the time of day below, as a TIME does."""
    _, n = decode_variable_length(data[1:])
    packed = int.from_bytes(data[1 + n : 9 + n], "little", signed=True)
    whole, microseconds = abs(packed) >> 24, abs(packed) & 0xFFFFFF
    if data[0] in _TIMES:
        value = _clock(whole, microseconds)
        return -value if packed < 0 else value
    year, month = divmod(whole >> 22, 13)
    day = date(year, month, (whole >> 17) & 0x1F)
    if data[0] in _DATES:
        return day
    return datetime.combine(day, time()) + _clock(whole & 0x1FFFF, microseconds)


def _clock(hms: int, microseconds: int) -> timedelta:
    """hours << 12 | minutes << 6 | seconds, and microseconds, as a duration."""
    return timedelta(
        hours=hms >> 12, minutes=(hms >> 6) & 0x3F, seconds=hms & 0x3F, microseconds=microseconds
    )


def _opaque_text(data: bytes) -> bytes:
    """Any other opaque value (a BLOB, a BIT, ... cast to JSON) as the JSON string MySQL's text
    shows (`Json_wrapper::to_string`): `base64:type<field type>:<its bytes in base64>`, but a
    VAR_STRING's bytes as they are; as bytes, as the library gives a JSON string, where it would
    decode any of them as UTF-8 text, dropping what does not decode."""
    length, n = decode_variable_length(data[1:])
    raw = data[1 + n : 1 + n + length]
    if data[0] == FIELD_TYPE.VAR_STRING:
        return raw
    return b"base64:type%d:%s" % (data[0], base64.b64encode(raw))
