"""The stream's change record: one fixed schema, whatever the tables and their schemas.

A micro-batch carries changes of every captured table, each of its own schema, and a table's
schema can change within the batch (a DDL in the binlog). So a change carries its row images as
JSON objects keyed by column name, and the sink types them with `typed_image` against the
silver table's columns: the batch schema does not grow with the number of tables, a table with
no changes costs nothing, and rows written before and after an `ADD COLUMN` parse alike (a
missing key reads NULL).

Values keep their exact landed form: JSON numbers for integers and floats (Python's shortest
round-trip repr), decimals as their digits, bytes as base64, dates and datetimes as ISO text,
TIMESTAMP instants as epoch microseconds; `typed_image` parses each back to the same value, and
`FAILFAST` turns a value that does not parse into an error, never a NULL.

A DDL travels in the same record (`_op = "ddl"`): `_before` holds the statement, `_after` the
table's schema after it (`TableSchema.to_json`), or NULL when the table is gone.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import orjson
from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.model.schema import TableSchema
from binlake.model.typemap import map_table

DDL = "ddl"

META_FIELDS = [
    T.StructField("_table", T.StringType(), False),
    T.StructField("_op", T.StringType(), False),
    T.StructField("_offset", T.StringType(), False),
    T.StructField("_file", T.StringType(), False),
    T.StructField("_pos", T.LongType(), False),
    T.StructField("_row", T.IntegerType(), False),
    T.StructField("_ts", T.LongType(), False),
]
CHANGE_SCHEMA = T.StructType(
    [
        *META_FIELDS,
        T.StructField("_before", T.StringType(), True),
        T.StructField("_after", T.StringType(), True),
    ]
)

Encoder = Callable[[Any], Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _instant_micros(value: datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _value_encoder(spark: T.DataType) -> Encoder | None:
    """How a landed value becomes JSON (None: as it is)."""
    if isinstance(spark, T.DecimalType):
        return lambda v: format(v, "f") if isinstance(v, Decimal) else str(v)
    if isinstance(spark, T.BinaryType):
        return lambda v: base64.b64encode(v).decode("ascii")
    if isinstance(spark, T.DateType):
        return date.isoformat
    if isinstance(spark, T.TimestampNTZType):
        return lambda v: v.isoformat(sep=" ")
    if isinstance(spark, T.TimestampType):
        return _instant_micros
    return None


class ImageEncoder:
    """Row tuples of one table schema → JSON text keyed by column name.

    Every change's images pass through here in the stream's one reading task: orjson writes
    them much faster than the standard library (docs/performance.md), with the same shortest
    round-trip floats and UTF-8 text.
    """

    def __init__(self, table: TableSchema) -> None:
        self.names = table.column_names
        self.encoded = [
            (name, encode)
            for name, mapped in zip(self.names, map_table(table), strict=True)
            if (encode := _value_encoder(mapped.spark)) is not None
        ]

    def __call__(self, row: Sequence[Any] | None) -> str | None:
        if row is None:
            return None
        values = dict(zip(self.names, row, strict=True))
        for name, encode in self.encoded:
            value = values[name]
            if value is not None:
                values[name] = encode(value)
        return orjson.dumps(values).decode()


def _json_type(spark: T.DataType) -> T.DataType:
    """The type a value has in the JSON image (see `_value_encoder`)."""
    if isinstance(spark, T.BinaryType | T.DateType | T.TimestampNTZType):
        return T.StringType()
    if isinstance(spark, T.TimestampType):
        return T.LongType()
    return spark


def _from_json_value(value: SparkColumn, spark: T.DataType) -> SparkColumn:
    if isinstance(spark, T.BinaryType):
        return F.unbase64(value)
    if isinstance(spark, T.DateType | T.TimestampNTZType):
        return value.cast(spark)
    if isinstance(spark, T.TimestampType):
        return F.timestamp_micros(value)
    return value


def typed_image(
    image: SparkColumn, columns: T.StructType, keys: Mapping[str, str] | None = None
) -> SparkColumn:
    """The JSON image `image` as a struct of `columns` (silver's data columns): keys the image
    lacks (columns added later, or dropped from the source) are NULL. `keys` names the image's
    key for a silver column spelt in another case (the source renamed `qty` to `Qty`: one
    column to MySQL, Spark and Delta, but JSON keys are case-sensitive)."""
    key = {f.name: (keys or {}).get(f.name.lower(), f.name) for f in columns}
    parsed = F.from_json(
        image,
        T.StructType([T.StructField(key[f.name], _json_type(f.dataType), True) for f in columns]),
        {"mode": "FAILFAST"},
    )
    fields = [
        _from_json_value(parsed.getField(key[f.name]), f.dataType).alias(f.name) for f in columns
    ]
    return F.when(image.isNull(), F.lit(None).cast(columns)).otherwise(F.struct(*fields))
