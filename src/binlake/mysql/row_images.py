"""Row images of binlog row events, decoded straight into binlake's normalised values.

python-mysql-replication keeps the replication protocol (connection, table maps, rotations,
event filtering); its row decoding (a dict per image, a method dispatch and a bitmap lookup per
value) was the stream's top cost (docs/performance.md). Here each table gets one decoder
function, generated once from its table map and its captured schema: a straight line of
`struct.unpack_from` calls and string slices, one per column (one per run of NOT NULL fixed-width
columns), guarded by the image's null bitmap. Values come out as the snapshot path lands them
(unsigned integers unsigned, ENUM/SET as their text, zero dates as NULL), so the stream and the
snapshot agree value for value.

Generating the function (the technique of `dataclasses` and `namedtuple`) removes the per-value
interpreter dispatch that dominated the library's profile; the generated text contains only
column indexes and constants, never names or values from the source.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from ipaddress import IPv6Address
from typing import Any
from uuid import UUID

from pymysqlreplication.util.bytes import length_encoded_int

from binlake.errors import SourceError
from binlake.model.schema import Column, TableSchema
from binlake.model.typemap import ADDRESS_TYPES, enum_values, json_text, map_column
from binlake.mysql.charsets import text_codec
from binlake.mysql.json_values import apply_json_diffs, json_diffs, json_value

Row = tuple[Any, ...]
ImageDecoder = Callable[[bytes, int], tuple[Row, int]]

# MySQL field types as they appear in TABLE_MAP events (after ENUM/SET real-type resolution).
TINY, SHORT, LONG, FLOAT, DOUBLE, TIMESTAMP, LONGLONG, INT24 = 1, 2, 3, 4, 5, 7, 8, 9
DATE, TIME, DATETIME, YEAR, VARCHAR, BIT = 10, 11, 12, 13, 15, 16
TIMESTAMP2, DATETIME2, TIME2 = 17, 18, 19
JSON, NEWDECIMAL, ENUM, SET, BLOB, STRING, GEOMETRY = 245, 246, 247, 248, 252, 254, 255
#: PARTIAL_JSON_UPDATES among a partial update's after-image value options.
_PARTIAL_JSON = 1

_BLOB_TYPES = frozenset({
    "tinytext", "text", "mediumtext", "longtext", "json",
    "tinyblob", "blob", "mediumblob", "longblob",
})  # fmt: skip
_GEOMETRY_TYPES = frozenset({
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
    "multipolygon", "geometrycollection",
})  # fmt: skip
#: Which information_schema types each binlog field type may carry; anything else means the
#: table changed after its schema was captured.
_DATA_TYPES: dict[int, frozenset[str]] = {
    TINY: frozenset({"tinyint"}),
    SHORT: frozenset({"smallint"}),
    INT24: frozenset({"mediumint"}),
    LONG: frozenset({"int", "integer"}),
    LONGLONG: frozenset({"bigint"}),
    FLOAT: frozenset({"float"}),
    DOUBLE: frozenset({"double", "real"}),
    NEWDECIMAL: frozenset({"decimal"}),
    YEAR: frozenset({"year"}),
    DATE: frozenset({"date"}),
    DATETIME2: frozenset({"datetime"}),
    TIMESTAMP2: frozenset({"timestamp"}),
    TIME2: frozenset({"time"}),
    DATETIME: frozenset({"datetime"}),
    TIMESTAMP: frozenset({"timestamp"}),
    TIME: frozenset({"time"}),
    JSON: frozenset({"json"}),
    VARCHAR: frozenset({"varchar", "varbinary"}),
    STRING: frozenset({"char", "binary", *ADDRESS_TYPES}),
    ENUM: frozenset({"enum"}),
    SET: frozenset({"set"}),
    BIT: frozenset({"bit"}),
    BLOB: _BLOB_TYPES,
    GEOMETRY: _GEOMETRY_TYPES,
}
_INTEGERS = {TINY: ("b", "B"), SHORT: ("h", "H"), LONG: ("i", "I"), LONGLONG: ("q", "Q")}
_FLOATS = {FLOAT: "f", DOUBLE: "d"}
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}


@dataclass(frozen=True)
class _Code:
    """How one column is read: a fixed-width struct code, or lines of code plus a helper."""

    fixed: str | None = None  # struct format character(s), e.g. "i" or "q"
    lines: tuple[str, ...] = ()  # read v{i} at pos and advance pos ({i} is the column index)
    helper: Any = None  # bound in the namespace as H{i}
    normalize: bool = False  # apply the column's normaliser (N{i}) to the decoded value


#: Column attributes of python-mysql-replication's table map that shape a row image: every one
#: a decoder is generated from, besides the column's type.
_LAYOUT_ATTRIBUTES = (
    "name", "max_length", "length_size", "fsp", "precision", "decimals", "bytes", "size",
)  # fmt: skip
#: Decoders generated in this process, by schema and row layout. Each binlog read (a chunk's
#: replay, a stream batch's read task) meets its tables' maps anew, and generating a decoder
#: costs a large share of a short read such as a chunk's replay under writes
#: (bench/results/2026-12-05-targets-decoders.md). Spark's Python workers are reused across
#: tasks, so the snapshot's chunks share them.
_DECODERS: dict[tuple[Any, ...], ImageDecoder] = {}
_DECODERS_KEPT = 1024


def column_layout(column: Any) -> tuple[Any, ...]:
    """What of a TABLE_MAP column shapes its values in a row image."""
    return (column.type, *(getattr(column, a, None) for a in _LAYOUT_ATTRIBUTES))


def image_decoder(table: TableSchema, map_columns: Sequence[Any]) -> ImageDecoder:
    """The decoder of one FULL row image of `table`, laid out as `map_columns` (the TABLE_MAP
    event's columns) say; generated once per schema and layout. Raises `SourceError` if the
    layout does not match the schema (names, where the server logs them, count and types) or
    uses an encoding binlake cannot read."""
    return _kept((table, tuple(map(column_layout, map_columns))), _generated, table, map_columns)


def _kept(key: tuple[Any, ...], generate: Callable[..., ImageDecoder], *args: Any) -> ImageDecoder:
    """The decoder kept under `key`, generated by `generate(*args)` on first use."""
    decoder = _DECODERS.get(key)
    if decoder is None:
        decoder = generate(*args)
        if len(_DECODERS) >= _DECODERS_KEPT:
            _DECODERS.clear()
        _DECODERS[key] = decoder
    return decoder


def _generated(
    table: TableSchema, map_columns: Sequence[Any], json: Callable[[bytes], Any] | None = None
) -> ImageDecoder:
    """The decoder of `table`'s images laid out as `map_columns`; JSON columns read by `json`
    where one is given."""
    if len(map_columns) != len(table.columns):
        raise _changed(table, f"{len(map_columns)} columns in the binlog")
    codes = [
        _blob(-_width(mapped), json)
        if json is not None and mapped.type == JSON
        else _code(table, column, mapped)
        for column, mapped in zip(table.columns, map_columns, strict=True)
    ]
    return _compile(table, codes)


def decode_images(decoder: ImageDecoder, body: bytes) -> Iterator[Row]:
    """Every row image of a rows event body, in order (an update row is its before image, then
    its after image: images are self-delimiting, the caller pairs them). A last image that
    ends past the body is a `SourceError`: its values were read from bytes that are not its
    own (a slice past the end is short, not an error)."""
    pos, end = 0, len(body)
    while pos < end:
        row, pos = decoder(body, pos)
        yield row
    _check_end(pos, end)


def _check_end(pos: int, end: int) -> None:
    if pos != end:
        raise SourceError(
            f"a rows event's last row image ends {pos - end} bytes past the event: its bytes "
            "are not laid out as its table map says"
        )


def partial_update_images(
    table: TableSchema, map_columns: Sequence[Any], body: bytes
) -> Iterator[Row]:
    """Every row image of a PARTIAL_UPDATE_ROWS body (`binlog_row_value_options=PARTIAL_JSON`)
    under a FULL row image, as `decode_images` gives an UPDATE_ROWS body's: each before image,
    then its after image made whole.

    An after image begins with its value options (a packed integer) and, with PARTIAL_JSON set
    in them, a bit per JSON column (`_partial_bits`); a flagged column holds the diffs MySQL
    made to the document (`json_values.json_diffs`), applied in order to the before image's,
    which a FULL image holds whole. Other columns read as an UPDATE_ROWS image's do."""
    decoder = _raw_json_decoder(table, map_columns)
    json_columns = [i for i, c in enumerate(map_columns) if c.type == JSON]
    pos, end = 0, len(body)
    while pos < end:
        before, pos = decoder(body, pos)
        flagged, pos = _partial_bits(body, pos, len(json_columns))
        after, pos = decoder(body, pos)
        whole = list(before)
        made = list(after)
        for bit, i in enumerate(json_columns):
            whole[i] = _json(before[i]) if before[i] is not None else None
            if after[i] is None:
                continue
            if flagged >> bit & 1:
                if before[i] is None:
                    raise SourceError(
                        f"a partial JSON update of {table.qualified}.{table.columns[i].name} "
                        "has no document before it (a NULL before image)"
                    )
                made[i] = _patched(table, i, before[i], after[i])
            else:
                made[i] = _json(after[i])
        yield tuple(whole)
        yield tuple(made)
    _check_end(pos, end)


def _patched(table: TableSchema, column: int, document: bytes, diffs: bytes) -> str:
    """The JSON text of binary `document` after `diffs` (a partial update's, of `column`)."""
    try:
        before = json_value(document[0], document[1:]) if document else None
        return json_text(apply_json_diffs(before, json_diffs(diffs)))
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise SourceError(
            f"a partial JSON update of {table.qualified}.{table.columns[column].name} cannot be "
            f"applied to the document before it ({e}): re-snapshot the table "
            f"(`binlake snapshot --tables {table.name} --reset`)"
        ) from e


def _partial_bits(body: bytes, pos: int, json_columns: int) -> tuple[int, int]:
    """An after image's value options: the bits flagging its partially updated JSON columns
    (none when PARTIAL_JSON is not among the options), and the position after them."""
    options, _, n = length_encoded_int(body[pos : pos + 9])
    pos += n
    if not options & _PARTIAL_JSON:
        return 0, pos
    size = (json_columns + 7) // 8
    return int.from_bytes(body[pos : pos + size], "little"), pos + size


def _raw_json_decoder(table: TableSchema, map_columns: Sequence[Any]) -> ImageDecoder:
    """`image_decoder`'s, but a JSON column read as its bytes (a document, or a partial
    update's diffs), for `partial_update_images`."""
    key = (table, tuple(map(column_layout, map_columns)), "raw JSON")
    return _kept(key, _generated, table, map_columns, bytes)


def has_full_images(event: Any) -> bool:
    """Whether a rows event logs every column in each image (`binlog_row_image=FULL`), which
    binlake needs: a MINIMAL or NOBLOB image lacks what a row's other changes do not say."""
    bitmaps = [event.columns_present_bitmap]
    if hasattr(event, "columns_present_bitmap2"):  # an update's after images
        bitmaps.append(event.columns_present_bitmap2)
    full = (1 << event.number_of_columns) - 1
    return all(int.from_bytes(b, "little") & full == full for b in bitmaps)


def _changed(table: TableSchema, detail: str) -> SourceError:
    return SourceError(
        f"the binlog's layout of {table.qualified} no longer matches its captured schema "
        f"({detail}): the table's schema changed; re-snapshot it with "
        f"`binlake snapshot --tables {table.name} --reset`"
    )


def _code(table: TableSchema, column: Column, mapped: Any) -> _Code:
    kind = mapped.type
    name = getattr(mapped, "name", None)
    if name is not None and not str(name).startswith("UNKNOWN_COL") and name != column.name:
        # Only where the event itself carries names (binlog_row_metadata=FULL): a rename or a
        # reorder that keeps the types would otherwise decode into the wrong columns.
        raise _changed(table, f"column {column.name!r} is named {name!r} in the binlog")
    allowed = _DATA_TYPES.get(kind)
    if allowed is None or column.data_type not in allowed:
        raise _changed(table, f"column {column.name!r} is binlog field type {kind}")
    if kind in _INTEGERS:
        signed, unsigned = _INTEGERS[kind]
        if column.unsigned:
            # BIGINT UNSIGNED lands as DECIMAL(20,0): the normaliser makes the Decimal.
            return _Code(fixed=unsigned, normalize=kind == LONGLONG)
        return _Code(fixed=signed)
    if kind in _FLOATS:
        return _Code(fixed=_FLOATS[kind], normalize=kind == FLOAT)
    if kind == INT24:
        return _fixed_helper(3, _int24_unsigned if column.unsigned else _int24)
    if kind == YEAR:
        return _fixed_helper(1, _year)
    if kind == DATE:
        return _fixed_helper(3, _date)
    if kind == DATETIME2:
        return _fixed_helper(_width(mapped), _datetime2(mapped.fsp))
    if kind == TIMESTAMP2:
        return _fixed_helper(_width(mapped), _timestamp2(mapped.fsp))
    if kind == TIME2:
        return _fixed_helper(_width(mapped), _time2(mapped.fsp), normalize=True)
    if kind in (DATETIME, TIMESTAMP, TIME):
        return _legacy_temporal(table, column, kind)
    if kind == NEWDECIMAL:
        _, read = _decimal(mapped.precision, mapped.decimals)
        return _fixed_helper(
            _width(mapped), read, normalize=column.precision is None or column.precision > 38
        )
    if kind == BIT:
        # BIT(1) lands as a boolean, BIT(64) as DECIMAL(20,0): the normaliser makes them.
        return _fixed_helper(_width(mapped), _bit(mapped.bytes), normalize=True)
    if kind in (ENUM, SET):
        members = _members(column)
        member = _enum(members, mapped.size) if kind == ENUM else _set(members, mapped.size)
        return _fixed_helper(_width(mapped), member)
    if kind == JSON:
        return _blob(-_width(mapped), _json)
    if column.data_type in ADDRESS_TYPES:
        return _blob(-_width(mapped), _address_text(column.data_type, mapped.max_length))
    return _string(column, -_width(mapped))  # CHAR, VARCHAR, BLOB, TEXT, GEOMETRY


#: Widths of the fixed-width field types (the temporal ones with fractions: `_width`).
_WIDTHS = {
    TINY: 1, SHORT: 2, INT24: 3, LONG: 4, LONGLONG: 8, FLOAT: 4, DOUBLE: 8, YEAR: 1, DATE: 3,
    DATETIME: 8, TIMESTAMP: 4, TIME: 3,
}  # fmt: skip


def _width(mapped: Any) -> int:
    """A column's bytes in a row image, from its TABLE_MAP field type and metadata alone: the
    width of a fixed-width value, or minus the width of a variable value's length prefix.
    The decoder and `count_images` both take their widths from here."""
    kind = mapped.type
    if kind in _WIDTHS:
        return _WIDTHS[kind]
    if kind in (DATETIME2, TIMESTAMP2, TIME2):
        return {DATETIME2: 5, TIMESTAMP2: 4, TIME2: 3}[kind] + _fsp_bytes(mapped.fsp)
    if kind == NEWDECIMAL:
        return _decimal(mapped.precision, mapped.decimals)[0]
    if kind == BIT:
        return int(mapped.bytes)
    if kind in (ENUM, SET):
        return int(mapped.size)
    if kind in (VARCHAR, STRING):
        return -2 if mapped.max_length > 255 else -1
    return -int(mapped.length_size)  # JSON, BLOB, TEXT, GEOMETRY


def image_widths(map_columns: Sequence[Any]) -> tuple[int, ...]:
    """Each column's `_width`, for `count_images` (computed once per table map)."""
    return tuple(_width(c) for c in map_columns)


def count_images(widths: Sequence[int], present: bytes, body: bytes) -> int:
    """How many row images a rows event body holds, without decoding a value: each image is
    its null bitmap, then the widths of its present, non-NULL columns (`present`: the event's
    columns-present bitmap). What bounds a batch by changes reads this, not the decoder,
    because it needs no captured schema and costs a few operations per column.

    The images of an event mostly share a few null bitmaps, so each bitmap's walk is planned
    once (`_image_plan`): a fixed-width run is one addition, and only a variable-width value
    reads its length: a backlog's batches are each counted before they are read, so the count
    must cost far less than the decode (bench/results/backlog-2026-11-27.md)."""
    mask = int.from_bytes(present, "little")
    columns = tuple(w for i, w in enumerate(widths) if mask >> i & 1)
    null_bytes = (len(columns) + 7) // 8
    plans: dict[int, tuple[tuple[tuple[int, int], ...], int]] = {}
    pos, end, images = 0, len(body), 0
    while pos < end:
        nulls = int.from_bytes(body[pos : pos + null_bytes], "little")
        plan = plans.get(nulls)
        if plan is None:
            plan = plans[nulls] = _image_plan(columns, nulls)
        pos += null_bytes
        steps, tail = plan
        for skip, length in steps:
            pos += skip
            if length == 1:  # most strings: a byte of length, read without a slice
                pos += 1 + body[pos]
            else:
                pos += length + int.from_bytes(body[pos : pos + length], "little")
        pos += tail
        images += 1
    return images


def count_partial_updates(widths: Sequence[int], json_columns: int, body: bytes) -> int:
    """How many rows a PARTIAL_UPDATE_ROWS body of FULL images holds (`partial_update_images`),
    walked as `count_images` walks images: a partially updated JSON column's diffs have the
    length prefix its document would."""
    null_bytes = (len(widths) + 7) // 8
    pos, end, rows = 0, len(body), 0
    while pos < end:
        pos = _past_image(widths, null_bytes, body, pos)
        _, pos = _partial_bits(body, pos, json_columns)
        pos = _past_image(widths, null_bytes, body, pos)
        rows += 1
    return rows


def _past_image(columns: Sequence[int], null_bytes: int, body: bytes, pos: int) -> int:
    steps, tail = _image_plan(columns, int.from_bytes(body[pos : pos + null_bytes], "little"))
    pos += null_bytes
    for skip, length in steps:
        pos += skip
        pos += length + int.from_bytes(body[pos : pos + length], "little")
    return pos + tail


def _image_plan(columns: Sequence[int], nulls: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """How an image with null bitmap `nulls` is walked (`count_images`): for each non-NULL
    variable-width value, the fixed bytes before it and the bytes of its length; then the
    fixed bytes after the last."""
    steps: list[tuple[int, int]] = []
    fixed = 0
    for i, width in enumerate(columns):
        if nulls >> i & 1:
            continue
        if width > 0:
            fixed += width
        else:
            steps.append((fixed, -width))
            fixed = 0
    return tuple(steps), fixed


def _legacy_temporal(table: TableSchema, column: Column, kind: int) -> _Code:
    """Pre-5.6 DATETIME/TIMESTAMP/TIME (tables created before MySQL 5.6 or MariaDB 10.1.2, or
    with mysql56_temporal_format=OFF): whole seconds only."""
    if column.datetime_precision:
        raise SourceError(
            f"column {table.qualified}.{column.name} uses the pre-5.6 temporal format with "
            "fractional seconds, which binlake cannot decode: convert it with "
            f"`ALTER TABLE {table.typed_name} FORCE` (with mysql56_temporal_format=ON on MariaDB), "
            "then re-snapshot the table"
        )
    if kind == DATETIME:
        return _fixed_helper(8, _datetime_legacy)
    if kind == TIMESTAMP:
        return _fixed_helper(4, _timestamp_legacy)
    return _fixed_helper(3, _time_legacy, normalize=True)


def _fixed_helper(size: int, read: Any, normalize: bool = False) -> _Code:
    lines = ("v{i} = H{i}(buf, pos)", f"pos += {size}")
    return _Code(lines=lines, helper=read, normalize=normalize)


def _length_line(length_bytes: int) -> str:
    if length_bytes == 1:
        return "n = buf[pos]"
    return f"n = int.from_bytes(buf[pos:pos + {length_bytes}], 'little')"


def _blob(length_bytes: int, read: Callable[[bytes], Any]) -> _Code:
    """A length-prefixed value passed through `read`."""
    value = f"buf[pos + {length_bytes}:pos + {length_bytes} + n]"
    lines = (_length_line(length_bytes), f"v{{i}} = H{{i}}({value})", f"pos += {length_bytes} + n")
    return _Code(lines=lines, helper=read)


def _string(column: Column, length_bytes: int) -> _Code:
    value = f"buf[pos + {length_bytes}:pos + {length_bytes} + n]"
    if column.data_type not in _TEXT_TYPES:
        # BINARY(n) is stored stripped and read back padded: its normaliser pads it.
        return _Code(
            lines=(_length_line(length_bytes), f"v{{i}} = {value}", f"pos += {length_bytes} + n"),
            normalize=column.data_type == "binary",
        )
    codec = text_codec(column.charset, column.charmap)
    if codec.translation is None:  # one C call per value: the common case
        text = f"v{{i}} = {value}.decode({codec.codec!r})"
    else:
        text = f"v{{i}} = {value}.decode({codec.codec!r}).translate(H{{i}})"
    return _Code(
        lines=(_length_line(length_bytes), text, f"pos += {length_bytes} + n"),
        helper=codec.translation,
    )


def _compile(table: TableSchema, codes: list[_Code]) -> ImageDecoder:
    """Generate `decode(buf, pos) -> (row, pos)` for one image (see the module docstring)."""
    mappings = [map_column(c) for c in table.columns]
    namespace: dict[str, Any] = {}
    null_bytes = (len(codes) + 7) // 8
    not_null = sum(1 << i for i, c in enumerate(table.columns) if not c.nullable)
    # A NULL in a column the schema says is NOT NULL means the table changed: stop rather than
    # read the following bytes as that column's value.
    namespace["changed"] = _null_in_not_null(table)
    body = [
        f"nulls = int.from_bytes(buf[pos:pos + {null_bytes}], 'little')",
        f"pos += {null_bytes}",
        f"if nulls & {not_null}:",
        "    changed()",
    ]
    run: list[int] = []  # consecutive NOT NULL fixed-width columns, unpacked together

    def flush() -> None:
        if not run:
            return
        fmt = "<" + "".join(codes[i].fixed or "" for i in run)
        namespace[f"S{run[0]}"] = struct.Struct(fmt).unpack_from
        targets = "".join(f"v{i}, " for i in run)
        body.append(f"{targets}= S{run[0]}(buf, pos)")
        body.append(f"pos += {struct.calcsize(fmt)}")
        run.clear()

    for i, code in enumerate(codes):
        nullable = table.columns[i].nullable
        if code.fixed and not nullable:
            run.append(i)
            continue
        flush()
        if code.fixed:
            namespace[f"S{i}"] = struct.Struct("<" + code.fixed).unpack_from
            read = [f"v{i}, = S{i}(buf, pos)", f"pos += {struct.calcsize('<' + code.fixed)}"]
        else:
            read = [line.format(i=i) for line in code.lines]
        if code.helper is not None:
            namespace[f"H{i}"] = code.helper
        if nullable:
            body.append(f"if nulls & {1 << i}:")
            body.append(f"    v{i} = None")
            body.append("else:")
            body.extend(f"    {line}" for line in read)
        else:
            body.extend(read)
    flush()
    for i, code in enumerate(codes):
        if code.normalize:
            namespace[f"N{i}"] = mappings[i].normalize
            body.append(f"v{i} = N{i}(v{i})")
    values = "".join(f"v{i}, " for i in range(len(codes)))
    source = "def decode(buf, pos):\n" + "".join(f"    {line}\n" for line in body)
    source += f"    return ({values}), pos\n"
    exec(compile(source, f"<binlake row image of {len(codes)} columns>", "exec"), namespace)
    decode: ImageDecoder = namespace["decode"]
    return decode


def _null_in_not_null(table: TableSchema) -> Callable[[], None]:
    def changed() -> None:
        raise _changed(table, "a NULL in a column captured as NOT NULL")

    return changed


# --------------------------------------------------------------------------- value readers
# Each takes (buf, pos) and returns the value at pos; its width is fixed by the column's type.


def _int24(buf: bytes, pos: int) -> int:
    return int.from_bytes(buf[pos : pos + 3], "little", signed=True)


def _int24_unsigned(buf: bytes, pos: int) -> int:
    return int.from_bytes(buf[pos : pos + 3], "little")


def _year(buf: bytes, pos: int) -> int:
    year = buf[pos]
    return year + 1900 if year else 0  # YEAR 0000 is stored as 0, as the snapshot reads it


def _date(buf: bytes, pos: int) -> date | None:
    packed = int.from_bytes(buf[pos : pos + 3], "little")
    day, month, year = packed & 31, (packed >> 5) & 15, packed >> 9
    if not (year and month and day):
        return None  # zero dates have no Spark value
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _fsp_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def _fraction(buf: bytes, pos: int, fsp: int) -> int:
    """Microseconds of a TIME2/DATETIME2/TIMESTAMP2 fractional part (big-endian)."""
    size = _fsp_bytes(fsp)
    if not size:
        return 0
    value = int.from_bytes(buf[pos : pos + size], "big")
    return value * 10 ** (6 - 2 * size)


def _datetime2(fsp: int) -> Callable[[bytes, int], datetime | None]:
    def read(buf: bytes, pos: int) -> datetime | None:
        packed = int.from_bytes(buf[pos : pos + 5], "big") - 0x8000000000
        year_month = packed >> 22
        year, month = divmod(year_month, 13)
        try:
            return datetime(
                year, month, (packed >> 17) & 31, (packed >> 12) & 31, (packed >> 6) & 63,
                packed & 63, _fraction(buf, pos + 5, fsp),
            )  # fmt: skip
        except ValueError:
            return None  # zero or invalid datetimes

    return read


def _timestamp2(fsp: int) -> Callable[[bytes, int], datetime | None]:
    def read(buf: bytes, pos: int) -> datetime | None:
        seconds = int.from_bytes(buf[pos : pos + 4], "big")
        if not seconds:
            return None  # '0000-00-00 00:00:00': no instant is stored as epoch 0
        micros = _fraction(buf, pos + 4, fsp)
        return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)

    return read


def _time2(fsp: int) -> Callable[[bytes, int], timedelta]:
    size = _fsp_bytes(fsp)

    def read(buf: bytes, pos: int) -> timedelta:
        # TIME2 is one big-endian integer (3 bytes + fraction) offset by 2^(bits-1), in
        # units of the fraction; MySQL's intpart/frac split reduces to this for every fsp.
        bits = 8 * (3 + size)
        packed = int.from_bytes(buf[pos : pos + 3 + size], "big") - (1 << (bits - 1))
        negative = packed < 0
        packed = -packed if negative else packed
        fraction = packed & ((1 << (8 * size)) - 1) if size else 0
        whole = packed >> (8 * size)
        micros = fraction * 10 ** (6 - 2 * size) if size else 0
        hours, minutes, seconds = (whole >> 12) & 0x3FF, (whole >> 6) & 63, whole & 63
        value = timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micros)
        return -value if negative else value

    return read


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _decimal(precision: int, scale: int) -> tuple[int, Callable[[bytes, int], Decimal]]:
    """MySQL's packed DECIMAL: groups of 9 digits in 4 bytes, big-endian, sign in the top bit
    (negative values stored inverted)."""
    integral = precision - scale
    int_full, int_rest = divmod(integral, 9)
    frac_full, frac_rest = divmod(scale, 9)
    widths = (
        ([_DIG2BYTES[int_rest]] if int_rest else [])
        + [4] * int_full
        + [4] * frac_full
        + ([_DIG2BYTES[frac_rest]] if frac_rest else [])
    )
    digits = (
        ([int_rest] if int_rest else []) + [9] * int_full + [9] * frac_full
        + ([frac_rest] if frac_rest else [])
    )  # fmt: skip
    int_groups = (1 if int_rest else 0) + int_full
    size = sum(widths)

    def read(buf: bytes, pos: int) -> Decimal:
        raw = bytearray(buf[pos : pos + size])
        negative = not raw[0] & 0x80
        raw[0] ^= 0x80
        if negative:
            raw = bytearray(b ^ 0xFF for b in raw)
        parts, at = [], 0
        for width, count in zip(widths, digits, strict=True):
            parts.append(f"{int.from_bytes(raw[at : at + width], 'big'):0{count}d}")
            at += width
        sign = "-" if negative else ""
        whole, fraction = "".join(parts[:int_groups]) or "0", "".join(parts[int_groups:])
        return Decimal(f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}")

    return size, read


def _bit(size: int) -> Callable[[bytes, int], int]:
    def read(buf: bytes, pos: int) -> int:
        return int.from_bytes(buf[pos : pos + size], "big")

    return read


def _json(raw: bytes) -> str:
    """MySQL's binary JSON (MariaDB's JSON is LONGTEXT and never gets here), rendered as MySQL
    renders JSON text (`json_values`: temporal values of any range and sign); an empty value
    is the JSON null literal."""
    return json_text(json_value(raw[0], raw[1:])) if raw else "null"


def _address_text(kind: str, size: int) -> Callable[[bytes], str]:
    """MariaDB's INET4/INET6/UUID: the binlog holds the value's bytes with trailing zero bytes
    stripped (as for BINARY(n)); they land as the text the server prints."""
    render = {"inet4": _inet4, "inet6": _inet6, "uuid": _uuid}[kind]
    return lambda raw: render(raw.ljust(size, b"\x00"))


def _inet4(raw: bytes) -> str:
    return ".".join(str(b) for b in raw)


def _inet6(raw: bytes) -> str:
    """As MariaDB prints it: IPv4-mapped `::ffff:a.b.c.d` and IPv4-compatible `::a.b.c.d` (not
    `::` or `::1`) keep the dotted quad; the rest is RFC 5952's form."""
    if raw[:10] == bytes(10) and raw[10:12] == b"\xff\xff":
        return "::ffff:" + _inet4(raw[12:])
    if raw[:12] == bytes(12) and int.from_bytes(raw[12:], "big") > 1:
        return "::" + _inet4(raw[12:])
    return str(IPv6Address(raw))


def _uuid(raw: bytes) -> str:
    return str(UUID(bytes=raw))


def _datetime_legacy(buf: bytes, pos: int) -> datetime | None:
    """YYYYMMDDhhmmss as one little-endian 64-bit integer."""
    packed = int.from_bytes(buf[pos : pos + 8], "little")
    day_part, time_part = divmod(packed, 1_000_000)
    try:
        return datetime(
            day_part // 10_000, day_part // 100 % 100, day_part % 100,
            time_part // 10_000, time_part // 100 % 100, time_part % 100,
        )  # fmt: skip
    except ValueError:
        return None  # zero or invalid datetimes


def _timestamp_legacy(buf: bytes, pos: int) -> datetime | None:
    seconds = int.from_bytes(buf[pos : pos + 4], "little")
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def _time_legacy(buf: bytes, pos: int) -> timedelta:
    """[-]HHMMSS as one little-endian signed 24-bit integer."""
    packed = int.from_bytes(buf[pos : pos + 3], "little", signed=True)
    whole = abs(packed)
    value = timedelta(hours=whole // 10_000, minutes=whole // 100 % 100, seconds=whole % 100)
    return -value if packed < 0 else value


def _members(column: Column) -> list[str]:
    return enum_values(column.column_type)


def _enum(members: list[str], size: int) -> Callable[[bytes, int], str]:
    def read(buf: bytes, pos: int) -> str:
        index = int.from_bytes(buf[pos : pos + size], "little")
        return members[index - 1] if 0 < index <= len(members) else ""  # 0: the '' error value

    return read


def _set(members: list[str], size: int) -> Callable[[bytes, int], str]:
    def read(buf: bytes, pos: int) -> str:
        mask = int.from_bytes(buf[pos : pos + size], "little")
        return ",".join(m for bit, m in enumerate(members) if mask >> bit & 1)

    return read
