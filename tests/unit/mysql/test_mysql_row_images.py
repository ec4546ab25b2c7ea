"""binlake's row decoder (`row_images`) on bytes real MySQL servers wrote: every rows event of
every fixture file (fixtures/mysql-binlogs, README there) decoded from its raw row images and
compared, row by row and column by column, with python-mysql-replication's decoding of the same
event normalised as the snapshot lands values (`typemap`), and with the values upstream asserts.

Each table's schema is built from its TABLE_MAP (`table_map_schema`, as an archive is read): the
field type with its metadata (lengths, precision, fsp, bits, signedness and charsets where the
map carries them, ENUM/SET members under FULL metadata). binlake has no CREATE TABLE reader
(`ddl_schema` applies ALTERs, and reads JSON as MariaDB's LONGTEXT), so what a map lacks is
taken from the file's CREATE TABLE text by hand (`DECLARED`), each entry citing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import SourceError
from binlake.model.schema import Column, TableSchema
from binlake.model.typemap import map_column
from binlake.mysql.binlog_files import FileEvent, read_binlog_file
from binlake.mysql.row_images import decode_images, image_decoder
from binlake.mysql.table_map_schema import column_of as table_map_column

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "mysql-binlogs"
#: Rows events decoded here. PARTIAL_UPDATE_ROWS (39), whose one real event has a MINIMAL row
#: image, is read by `partial_update_images` (test_live_mysql_events, test_row_images).
ROWS_EVENTS = frozenset({23, 24, 25, 30, 31, 32})
UPDATES = frozenset({24, 31})

#: Column types a table map cannot tell, from the file's CREATE TABLE: VECTOR, which the file
#: reader maps as a BLOB. (ENUM/SET members a MINIMAL map lacks, in a file without its CREATE
#: TABLE, stand as numbers: `_members_column`.)
DECLARED: dict[tuple[str, str, str], dict[str, str]] = {
    # CREATE TABLE foo(id SERIAL, vector_column VECTOR(3) NOT NULL)
    ("vector.binlog", "dtb", "foo"): {"vector_column": "vector(3)"},
    # CREATE TABLE bar(id SERIAL, vector_column VECTOR(2) NOT NULL, foo TEXT,
    #                  vector_column2 VECTOR(4) NOT NULL)
    ("vector.binlog", "dtb", "bar"): {"vector_column": "vector(2)", "vector_column2": "vector(4)"},
}


def rows_events() -> Iterator[Any]:
    """A parameter per rows event the stream decodes, named by file, number and offset."""
    for path in sorted(FIXTURES.iterdir()):
        if path.name == "README.md":
            continue
        found = [e for e in read_binlog_file(path) if e.type_code in ROWS_EVENTS]
        for number, event in enumerate(found):
            yield pytest.param(path.name, number, id=f"{path.name}#{number}@{event.offset}")


@cache
def file_events(name: str) -> tuple[FileEvent, ...]:
    return tuple(e for e in read_binlog_file(FIXTURES / name) if e.type_code in ROWS_EVENTS)


def column_of(mapped: Any, declared: dict[str, str]) -> Column:
    """A TABLE_MAP column as information_schema describes it (`table_map_schema`; every one
    nullable: the decoder reads a nullable column's value the same way), or as `declared`."""
    if mapped.name in declared:
        column_type = declared[mapped.name]
        return Column(mapped.name, column_type.split("(")[0], column_type, True)
    return table_map_column(mapped)


def schema_of(name: str, event: FileEvent) -> TableSchema:
    """The table's schema as information_schema would describe it (every column)."""
    decoded = event.decoded
    declared = DECLARED.get((name, decoded.schema, decoded.table), {})
    return _table(decoded.schema, decoded.table, [column_of(c, declared) for c in decoded.columns])


def _table(database: str, name: str, columns: list[Column]) -> TableSchema:
    return TableSchema(database, name, tuple(columns), (columns[0].name,), columns[0].name)


def layout_of(name: str, event: FileEvent) -> tuple[TableSchema, list[Any]]:
    """The schema and TABLE_MAP columns of the values `event`'s images hold: every column,
    but only those present under a MINIMAL row image (the stream refuses such an event before
    decoding it; the decoder reads the columns that are there)."""
    schema, mapped = schema_of(name, event), event.decoded.columns
    present = int.from_bytes(event.decoded.columns_present_bitmap, "little")
    keep = [i for i in range(len(mapped)) if present >> i & 1]
    columns = [schema.columns[i] for i in keep]
    return _table(schema.database, schema.name, columns), [mapped[i] for i in keep]


def library_images(event: FileEvent) -> list[dict[str, Any]]:
    """The library's row images of `event` in order (an update: before, then after)."""
    rows = event.decoded.rows
    if event.type_code in UPDATES:
        return [image for row in rows for image in (row["before_values"], row["after_values"])]
    return [row["values"] for row in rows]


def landed(column: Column, value: Any) -> Any:
    """The library's value as the snapshot lands it: its ENUM/SET member numbers (MINIMAL
    metadata) as the members' text first, then the column's normaliser."""
    if column.data_type == "set" and isinstance(value, set):
        value = {str(m) for m in value}
    elif column.data_type == "enum" and isinstance(value, int):
        value = str(value)
    return map_column(column).normalize(value)


def expected_rows(schema: TableSchema, event: FileEvent) -> list[tuple[Any, ...]]:
    return [
        tuple(landed(c, image[c.name]) for c in schema.columns) for image in library_images(event)
    ]


def binlake_rows(schema: TableSchema, mapped: list[Any], images: bytes | None) -> list[Any]:
    """binlake's decoding of a rows event's raw `images`, as the stream decodes them."""
    assert images is not None
    return list(decode_images(image_decoder(schema, mapped), images))


def refused(schema: TableSchema) -> str | None:
    """Why binlake does not land a column of `schema` (typemap's refusal), if it does not."""
    for column in schema.columns:
        try:
            map_column(column)
        except SourceError as e:
            return str(e)
    return None


def one_column_shift(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return row[1:] + row[:1]


@pytest.mark.parametrize(("name", "number"), list(rows_events()))
def test_binlake_decodes_each_row_as_the_library_does_normalised(name: str, number: int) -> None:
    event = file_events(name)[number]
    schema, mapped = layout_of(name, event)
    if (reason := refused(schema)) is not None:
        pytest.skip(f"typemap refuses the table: {reason}")
    expected = expected_rows(schema, event)
    assert binlake_rows(schema, mapped, event.row_images) == expected
    # The comparison would catch a decoder that shifted every value by one column.
    assert all(one_column_shift(row) != row for row in expected if len(row) > 1)


def decoded_by_binlake(name: str) -> list[tuple[Any, ...]]:
    """Every row image of file `name` decoded by binlake, in file order."""
    return [
        row
        for event in file_events(name)
        for row in binlake_rows(*layout_of(name, event), event.row_images)
    ]


def test_json_opaque_values_land_as_mysql_prints_the_document() -> None:
    # json-opaque.binlog (9.0.1, `test(a json)`): MySQL's text of each document (what the
    # snapshot reads, JSON_UNQUOTE's form): temporal values as quoted text with six fractional
    # digits (a DATE without a time), decimals with their scale, other opaque values as
    # `base64:type<field type>:<bytes>`. The TIME is 87:31:46.654321 (upstream's value).
    assert [row[0] for row in decoded_by_binlake("json-opaque.binlog")] == [
        '{"a": "base64:type15:VQ=="}',
        '{"b": "2012-03-18"}',
        '{"c": "2012-03-18 11:30:45.000000"}',
        '{"c": "87:31:46.654321"}',
        '{"d": 123.456}',
        '{"e": 9.00}',
        '{"e": [0, 1, true, false]}',
        '{"e": null}',
    ]


def test_a_negative_json_time_keeps_its_sign() -> None:
    # The TIME document of json-opaque.binlog with its packed value (the image's last eight
    # bytes, little-endian) negated, as MySQL stores -87:31:46.654321.
    name = "json-opaque.binlog"
    event = file_events(name)[3]
    assert event.row_images is not None
    packed = int.from_bytes(event.row_images[-8:], "little", signed=True)
    negated = event.row_images[:-8] + (-packed).to_bytes(8, "little", signed=True)
    assert binlake_rows(*layout_of(name, event), negated) == [('{"c": "-87:31:46.654321"}',)]


#: Each table's column types as its file's CREATE TABLE declares them (information_schema's
#: 8.0 form, without display widths), against the schema built from its table map: lengths,
#: signedness, members, charsets.
CREATED = {
    # CREATE TABLE t1 (f1 INT UNSIGNED INVISIBLE, f2 INT UNSIGNED INVISIBLE, f3 INT, f4 TEXT,
    #                  f5 BLOB, f6 BIGINT UNSIGNED INVISIBLE)
    ("binlog-invisible-columns.000001", "t1"): [
        "int unsigned", "int unsigned", "int", "text", "blob", "bigint unsigned",
    ],
    # CREATE TABLE t(f1 CHAR(128), f2 VARCHAR(300), f3 ENUM('var1', 'variant2', 'foo'),
    #                f4 SET('one', 'two', 'three', 'four'), f5 TEXT)
    ("mysql-enum-string-set.000001", "t"): [
        "char(128)", "varchar(300)", "enum('var1','variant2','foo')",
        "set('one','two','three','four')", "text",
    ],
    ("mysql_type_bit.000001", "foo"): ["bit(3)", "text", "bit(8)"],  # a BIT(3), b TEXT, c BIT(8)
    ("json-opaque.binlog", "test"): ["json"],  # create table test (a json)
    # CREATE TABLE t(id INT PRIMARY KEY AUTO_INCREMENT, json_col JSON, name VARCHAR(100) AS
    #                (json_col->>'$.name'), age INT AS (json_col->'$.age'))
    ("json.binlog.000001", "t"): ["int", "json", "varchar(100)", "int"],
    # CREATE TABLE `emoji` (`id` int(11) NOT NULL, `value` varchar(255) CHARACTER SET utf8mb4
    #                       COLLATE utf8mb4_unicode_ci NOT NULL, ...)
    ("mysql-bin.000080", "emoji"): ["int", "varchar(255)"],
    ("mysql-bin.000057", "b"): ["int"],  # create table b(id int)
    # CREATE TABLE bar(id SERIAL, vector_column VECTOR(2) NOT NULL, foo TEXT,
    #                  vector_column2 VECTOR(4) NOT NULL)
    ("vector.binlog", "bar"): ["bigint unsigned", "vector(2)", "text", "vector(4)"],
}  # fmt: skip


@pytest.mark.parametrize(("name", "table"), sorted(CREATED))
def test_schemas_built_from_table_maps_are_the_files_create_tables(name: str, table: str) -> None:
    event = next(e for e in file_events(name) if e.decoded.table == table)
    assert [c.column_type for c in schema_of(name, event).columns] == CREATED[name, table]


def test_enum_set_and_text_values_are_upstreams() -> None:
    # rust_mysql_common src/binlog/mod.rs, binlog_event_roundtrip, mysql-enum-string-set.000001:
    # the write's ENUM is member 1 and SET 0b101; the update's after image and the delete's
    # before image are ("field1", "field_2", member 2, 0b1010, the write's 300 characters).
    digits = "0123456789" * 10
    write, before, after, delete = decoded_by_binlake("mysql-enum-string-set.000001")
    assert (write[0], write[2:]) == (digits, ("var1", "one,three", "0123456789"))
    assert before == write
    for image in (after, delete):
        assert image == ("field1", "field_2", "variant2", "two,four", write[1])


def test_bit_values_are_upstreams() -> None:
    # rust_mysql_common, mysql_type_bit.000001: [Bytes([0b100]), Bytes(b"foo"), Bytes([0b100000])]
    assert decoded_by_binlake("mysql_type_bit.000001") == [(0b100, "foo", 0b100000)]


def test_time_beyond_a_day_and_negative_is_upstreams() -> None:
    # rust_mysql_common (time_issue): Value::Time(true, 21, 3, 48, 27, 0), i.e. -507:48:27.
    assert decoded_by_binlake("time_issue.000001") == [("-507:48:27",)]


def test_minimal_metadata_unsigned_int_is_upstreams() -> None:
    # rust_mysql_common (minimal_row_metadata): column @5, INT UNSIGNED, is 3230202323. The
    # MINIMAL row image holds @1, @3 and @5 (the stream refuses it; the decoder reads it).
    assert decoded_by_binlake("minimal_row_metadata.000001") == [(1, "a", 3230202323)]


def test_columns_out_of_order_are_refused_where_the_map_names_them() -> None:
    # Under FULL metadata a schema whose columns are out of the binlog's order (two INT
    # UNSIGNED swapped: the same bytes, the wrong columns) is refused, not decoded.
    name = "binlog-invisible-columns.000001"
    event = file_events(name)[0]
    schema, mapped = layout_of(name, event)
    swapped = _table(
        schema.database, schema.name, [schema.columns[1], schema.columns[0], *schema.columns[2:]]
    )
    with pytest.raises(SourceError, match="no longer matches"):
        binlake_rows(swapped, mapped, event.row_images)
