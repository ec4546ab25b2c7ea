"""The value model: how each MySQL/MariaDB column lands in Delta, for both read paths.

This module owns every decision about values: the Spark type of each column, the expression the
snapshot SELECTs it with, the normaliser that turns a driver's (or the binlog decoder's) value
into the value that lands, and the exact literal of a landed key value. Types are named without
Spark (`LandedType`) and pyspark is imported only where a Spark type or expression is asked for,
so discovering tables and planning chunks (`binlake plan`) run without it. The snapshot reads values
through the text protocol (MySQLdb or PyMySQL, `source.bulk_driver`; session in UTC and
utf8mb4); `row_images` decodes binlog row
images to the same values. A value lands identically whichever path brought it; the type table
(docs/lakehouse.md#how-each-type-lands) lists the mapping and the reason for each choice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from binlake.errors import SourceError
from binlake.model.schema import Column, TableSchema, quote

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import types as T

Normalizer = Callable[[Any], Any]

_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
_STRING_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "json"}
_BINARY_TYPES = {
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point",
    "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
    "geometrycollection",
}  # fmt: skip
_MAX_SPARK_DECIMAL = 38
#: MariaDB's fixed-size binary types that the server prints as text; they land as that text.
ADDRESS_TYPES = frozenset({"inet4", "inet6", "uuid"})
# Types whose snapshot values (MySQLdb/PyMySQL) are exactly their normalised values.
_ARROW_NATIVE = {
    *_INT_BITS, "decimal", "float", "double", "real", "year", "date", "datetime", "timestamp",
    *_STRING_TYPES, "set", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
} - {"json"}  # fmt: skip


#: Arrow's type for each landed type but DECIMAL (which takes its precision and scale).
_ARROW_TYPES = {
    "boolean": pa.bool_(), "int": pa.int32(), "bigint": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
    "timestamp_ntz": pa.timestamp("us"), "timestamp": pa.timestamp("us", tz="UTC"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class LandedType:
    """A landed column's type by Spark's name for it (`DataType.simpleString`, without the
    decimal's arguments): its Spark and Arrow types derive from it, the Spark one only when
    asked, so code that never writes a Spark frame never imports pyspark."""

    name: str
    precision: int = 0  # DECIMAL only
    scale: int = 0  # DECIMAL only

    @property
    def spark(self) -> T.DataType:
        from pyspark.sql import types as T

        if self.name == "decimal":
            return T.DecimalType(self.precision, self.scale)
        simple: dict[str, type[T.DataType]] = {
            "boolean": T.BooleanType, "int": T.IntegerType, "bigint": T.LongType,
            "float": T.FloatType, "double": T.DoubleType, "string": T.StringType,
            "binary": T.BinaryType, "date": T.DateType, "timestamp_ntz": T.TimestampNTZType,
            "timestamp": T.TimestampType,
        }  # fmt: skip
        return simple[self.name]()

    @property
    def arrow(self) -> pa.DataType:
        if self.name == "decimal":
            return pa.decimal128(self.precision, self.scale)
        return _ARROW_TYPES[self.name]


_BOOLEAN, _INT, _LONG = LandedType("boolean"), LandedType("int"), LandedType("bigint")
_FLOAT, _DOUBLE, _STRING = LandedType("float"), LandedType("double"), LandedType("string")
_BINARY, _DATE = LandedType("binary"), LandedType("date")
_TIMESTAMP_NTZ, _TIMESTAMP = LandedType("timestamp_ntz"), LandedType("timestamp")
_UNSIGNED_BIGINT = LandedType("decimal", 20, 0)


@dataclass(frozen=True, slots=True)
class ColumnMapping:
    """How one source column lands: its type (Spark's and Arrow's) and its value normaliser."""

    name: str
    landed: LandedType
    arrow: pa.DataType
    normalize: Normalizer
    #: The snapshot driver's values already are the normalised values, so a column of them can
    #: go to Arrow in one C-level conversion instead of one Python call per value.
    arrow_native: bool

    def to_arrow(self, values: Sequence[Any], normalized: bool = False) -> pa.Array:
        """An Arrow array of this column's values (raw driver values unless `normalized`)."""
        if normalized or self.arrow_native:
            try:
                return pa.array(values, type=self.arrow)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
                if normalized:
                    raise
                # e.g. a zero date the driver returned as text: fall back to the normaliser.
        return pa.array([self.normalize(v) for v in values], type=self.arrow)

    @property
    def spark(self) -> T.DataType:
        """The Spark type the column lands as (imports pyspark)."""
        return self.landed.spark


def map_column(column: Column) -> ColumnMapping:
    if "`" in column.name:
        # Delta's MERGE with the Change Data Feed on names each column as `packedCdc.`<name>``
        # without doubling a backtick in it, and fails on its own text.
        raise SourceError(
            f"column {column.name!r} has a backtick in its name, which silver's MERGE cannot "
            "address (Delta Lake's Change Data Feed fails on it): rename the column on the "
            "source, or leave its table out of source.tables"
        )
    landed, normalize = _landed_and_normalizer(column)
    native = column.data_type in _ARROW_NATIVE and not (
        column.unsigned and column.data_type == "bigint"
    )
    return ColumnMapping(column.name, landed, landed.arrow, _null_safe(normalize), native)


def select_expression(column: Column) -> str:
    """How the snapshot SELECTs `column` so that the exact stored value comes back.

    FLOAT through the text protocol is rendered with 6 significant digits (123456.789 reads as
    123457) while the binlog carries the stored float32; as DOUBLE the server sends the float32
    value exactly (123456.7890625), which Arrow's float32 then holds without loss.
    """
    name = quote(column.name)
    if column.data_type == "float":
        return f"CAST({name} AS DOUBLE) AS {name}"
    return name


def map_table(table: TableSchema) -> tuple[ColumnMapping, ...]:
    return tuple(map_column(c) for c in table.columns)


def spark_schema(table: TableSchema) -> T.StructType:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(m.name, m.spark, True) for m in map_table(table)])


def _null_safe(normalize: Normalizer) -> Normalizer:
    def apply(value: Any) -> Any:
        return None if value is None else normalize(value)

    return apply


def _landed_and_normalizer(column: Column) -> tuple[LandedType, Normalizer]:
    kind = column.data_type
    if kind in _INT_BITS:
        return _integer(column)
    if kind == "decimal":
        precision, scale = column.precision or 10, column.scale or 0
        if precision > _MAX_SPARK_DECIMAL:
            return _STRING, _decimal_text
        return LandedType("decimal", precision, scale), _to_decimal
    if kind == "float":
        return _FLOAT, float
    if kind in ("double", "real"):
        return _DOUBLE, float
    if kind == "bit":
        return _bit(bit_width(column))
    if kind == "year":
        return _INT, int
    if kind == "date":
        return _DATE, _date
    if kind == "datetime":
        return _TIMESTAMP_NTZ, _datetime
    if kind == "timestamp":
        # Both paths deliver naive UTC (the snapshot session runs in +00:00; the binlog stores
        # epoch seconds); Spark's TimestampType is an instant, rendered in the session zone.
        return _TIMESTAMP, _instant
    if kind == "time":
        return _STRING, _time_text(column.datetime_precision or 0)
    if kind == "set":
        return _STRING, _set_text(enum_values(column.column_type))
    if kind == "json":
        return _STRING, json_text
    if kind in _STRING_TYPES or kind in ADDRESS_TYPES:
        return _STRING, _text
    if kind in _BINARY_TYPES:
        if kind == "binary":
            return _BINARY, _padded_binary(_declared_length(column.column_type))
        return _BINARY, _bytes
    raise SourceError(
        f"column {column.name!r} has type {column.column_type}, which binlake cannot land yet: "
        "leave its table out of source.tables"
    )


def _integer(column: Column) -> tuple[LandedType, Normalizer]:
    bits = _INT_BITS[column.data_type]
    if column.unsigned:
        # Without binlog_row_metadata=FULL the binlog reader decodes unsigned columns as signed.
        def unsigned(value: Any) -> int:
            number = int(value)
            return number + (1 << bits) if number < 0 else number

        if bits == 64:
            return _UNSIGNED_BIGINT, lambda v: Decimal(unsigned(v))
        return _LONG, unsigned
    return (_LONG if bits == 64 else _INT), int


def _to_decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _decimal_text(value: Any) -> str:
    return format(_to_decimal(value), "f")


def bit_width(column: Column) -> int:
    """n of BIT(n) (BIT alone is BIT(1))."""
    return _declared_length(column.column_type)


def _bit(width: int) -> tuple[LandedType, Normalizer]:
    """BIT(1) is a flag: boolean (as Debezium and Flink CDC map it). BIT(2..63) fits a long;
    BIT(64) lands as DECIMAL(20,0), like BIGINT UNSIGNED, so no value wraps to negative."""

    def number(value: Any) -> int:
        if isinstance(value, bytes | bytearray):
            return int.from_bytes(value, "big")
        if isinstance(value, str):  # python-mysql-replication's '0101'
            return int(value, 2) if value else 0
        return int(value)

    if width == 1:
        return _BOOLEAN, lambda v: bool(number(v))
    if width == 64:
        return _UNSIGNED_BIGINT, lambda v: Decimal(number(v))
    return _LONG, number


def _date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return None  # zero or invalid dates ('0000-00-00') have no Spark value


def _datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return None  # '0000-00-00 00:00:00'


def _instant(value: Any) -> datetime | None:
    """TIMESTAMP: an aware UTC instant, so no later conversion applies a local zone."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value
    return None


def _time_text(precision: int) -> Normalizer:
    def render(value: Any) -> str:
        if isinstance(value, str):
            return value
        assert isinstance(value, timedelta)
        micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
        sign = "-" if micros < 0 else ""
        micros = abs(micros)
        seconds, fraction = divmod(micros, 1_000_000)
        hours, rest = divmod(seconds, 3600)
        text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
        return f"{text}.{fraction:06d}"[: len(text) + 1 + precision] if precision else text

    return render


def enum_values(column_type: str) -> list[str]:
    inner = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return [v.replace("''", "'") for v in re.findall(r"'((?:[^']|'')*)'", inner)]


def _set_text(members: list[str]) -> Normalizer:
    def render(value: Any) -> str:
        if isinstance(value, str):
            return value
        chosen = set(value)
        return ",".join(m for m in members if m in chosen)

    return render


def json_text(value: Any) -> str:
    """JSON as text. MariaDB's JSON is LONGTEXT (text on both paths); MySQL's binary JSON arrives
    from the binlog as Python objects (strings as bytes, temporal values as `json_values`
    reads them), rendered here the way MySQL renders JSON: `", "` and `": "` separators,
    decimals as written, temporal values as `_json_temporal` shows them."""
    if isinstance(value, str):
        return value
    return _render_json(value)


def _render_json(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return json.dumps(value.decode("utf-8"), ensure_ascii=False)
    if isinstance(value, dict):
        members = (f"{_render_json(k)}: {_render_json(v)}" for k, v in value.items())
        return "{" + ", ".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_render_json(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, date | timedelta):
        return json.dumps(_json_temporal(value))
    return json.dumps(value, ensure_ascii=False)


_JSON_TIME = _time_text(6)


def _json_temporal(value: date | timedelta) -> str:
    """A temporal value inside MySQL's JSON as MySQL's JSON text shows it: a DATE as
    `2012-03-18`, a DATETIME or TIMESTAMP and a TIME (of any length and sign) with six
    fractional digits, whatever their column's precision was (`2012-03-18 11:30:45.000000`,
    `-87:31:46.654321`)."""
    if isinstance(value, timedelta):
        return str(_JSON_TIME(value))
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat(" ", "microseconds")
    return value.isoformat()


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)


def _bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _declared_length(column_type: str) -> int:
    match = re.search(r"\((\d+)\)", column_type)
    return int(match.group(1)) if match else 1


def _padded_binary(length: int) -> Normalizer:
    # BINARY(n) is right-padded with 0x00 when read, but stored stripped in the binlog.
    def pad(value: Any) -> bytes:
        return _bytes(value).ljust(length, b"\x00")

    return pad


def exact_key(value: SparkColumn, spark: T.DataType) -> SparkColumn:
    """A key expression whose collected value converts back to the same literal (`key_literal`).

    Collecting a TIMESTAMP gives a naive datetime in the Python process's local zone (ambiguous
    in a DST fall-back hour), and a naive datetime literal is read back as local time even for a
    TIMESTAMP_NTZ column: under `TZ=Europe/Paris` keys would shift by hours and a MERGE pruned by
    them would miss its rows. Instants travel as epoch microseconds, NTZ values as their text.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(spark, T.TimestampType):
        return F.unix_micros(value)
    if isinstance(spark, T.TimestampNTZType):
        return value.cast(T.StringType())
    return value


def key_literal(value: Any, spark: T.DataType) -> SparkColumn:
    """The literal of a value collected through `exact_key`, typed exactly as the column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if value is None:
        return F.lit(None).cast(spark)
    if isinstance(spark, T.TimestampType):
        return F.timestamp_micros(F.lit(value))
    if isinstance(spark, T.TimestampNTZType):
        return F.lit(value).cast(spark)
    return F.lit(value)


@dataclass(frozen=True, slots=True)
class SplitKey:
    """How a split column is compared in SQL, so that chunk bounds mean the same to the server
    as to the chunk membership test in Python (`planner.key_order`)."""

    sql: str  # the expression the chunk SELECTs and the split queries compare and order by
    normalize: Normalizer  # a value of `sql` as the driver returns it → a chunk bound
    integral: bool  # the even (arithmetic) split applies


def split_key(column: Column) -> SplitKey:
    """ENUM orders by member index (`ORDER BY`) but compares with a string as text, so a split
    over its text would not terminate or would misplace rows: its bounds are member indexes."""
    name = quote(column.name)
    if column.data_type == "enum":
        return SplitKey(f"({name} + 0)", _null_safe(int), True)
    return SplitKey(name, map_column(column).normalize, column.data_type in _INT_BITS)
