"""A table's schema from its binlog TABLE_MAP alone, as information_schema would describe it.

A binlog archive is read without a server (`binlog_archive`), so the schema a row is decoded
and landed with comes from the table map written before it: the field type with its metadata
(lengths, precision, fsp, bits), and, where the server logged `binlog_row_metadata=FULL`
(MySQL 8.0.1+), column names, signedness, charsets, ENUM/SET members and the primary key.
Under MINIMAL metadata the columns are named `@1`, `@2` … as `mysqlbinlog` names them, and
ENUM/SET members stand as their numbers. Every column is nullable (as silver's columns are).

What a map cannot tell: a column's default, a VECTOR (read as its raw bytes, a BLOB), and a key
where the map names none (MINIMAL metadata, a table without a primary key): `source.split_keys`
names that column, as it does for a live table without a primary key.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from binlake.errors import SourceError
from binlake.model.schema import Column, TableSchema

_INTEGERS = {
    FIELD_TYPE.TINY: "tinyint", FIELD_TYPE.SHORT: "smallint", FIELD_TYPE.INT24: "mediumint",
    FIELD_TYPE.LONG: "int", FIELD_TYPE.LONGLONG: "bigint",
}  # fmt: skip
_SIZED = {1: "tiny", 2: "", 3: "medium", 4: "long"}  # a BLOB/TEXT's length bytes: its type
_MAX_BYTES_PER_CHAR = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf32": 4}
_TEMPORALS = {
    FIELD_TYPE.DATETIME2: "datetime", FIELD_TYPE.TIMESTAMP2: "timestamp",
    FIELD_TYPE.TIME2: "time",
}  # fmt: skip


def table_map_schema(
    database: str, table: str, table_map: Any, split_key: str | None = None
) -> TableSchema:
    """The schema of `database.table` as its TABLE_MAP describes it (`table_map`: the library's
    table of a rows event, `RowsEvent.table_map[table_id]`), keyed by its primary key from FULL
    metadata, else by `split_key`.

    Raises `SourceError` naming `source.split_keys` when neither gives a key."""
    columns = tuple(column_of(mapped) for mapped in table_map.columns)
    names = [c.name for c in columns]
    key = _primary_key(table_map)
    if split_key is not None:
        if split_key not in names:
            raise SourceError(
                f"source.split_keys names {split_key!r} for {database}.{table}, whose rows in the "
                f"binlog have the columns {', '.join(names)}"
            )
        key = key or (split_key,)
    if not key:
        raise SourceError(
            f"{database}.{table} has no primary key in its binlog table map (the server logged "
            "binlog_row_metadata=MINIMAL, or the table has none): name a column whose values "
            f"identify its rows in source.split_keys ({table}: {names[0]})"
        )
    return TableSchema(database, table, columns, key, split_key or key[0])


def column_of(mapped: Any, nullable: bool = True) -> Column:
    """A TABLE_MAP column as information_schema describes it (`nullable` as given: a map's
    null bitmap does not reach the library's table)."""
    name, kind = mapped.name, mapped.type
    if kind in _INTEGERS:
        unsigned = " unsigned" if mapped.unsigned else ""
        return Column(name, _INTEGERS[kind], _INTEGERS[kind] + unsigned, nullable)
    if kind in (FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE):
        data_type = "float" if kind == FIELD_TYPE.FLOAT else "double"
        return Column(name, data_type, data_type, nullable)
    if kind == FIELD_TYPE.NEWDECIMAL:
        precision, scale = mapped.precision, mapped.decimals
        return Column(
            name, "decimal", f"decimal({precision},{scale})", nullable, precision=precision,
            scale=scale,
        )  # fmt: skip
    if kind == FIELD_TYPE.YEAR:
        return Column(name, "year", "year(4)", nullable)
    if kind == FIELD_TYPE.DATE:
        return Column(name, "date", "date", nullable)
    if kind in _TEMPORALS:
        fsp, data_type = mapped.fsp, _TEMPORALS[kind]
        shown = f"{data_type}({fsp})" if fsp else data_type
        return Column(name, data_type, shown, nullable, datetime_precision=fsp)
    if kind == FIELD_TYPE.BIT:
        return Column(name, "bit", f"bit({mapped.bits})", nullable)
    if kind in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
        return _members_column(mapped, nullable)
    if kind == FIELD_TYPE.JSON:
        return Column(name, "json", "json", nullable, charset="utf8mb4", collation="utf8mb4_bin")
    return _string_column(mapped, nullable)


def _members_column(mapped: Any, nullable: bool) -> Column:
    """An ENUM or SET with its members as FULL metadata names them; under MINIMAL metadata,
    numbered '1', '2' … (the file reader's member numbers), as many as its width allows."""
    kind = "enum" if mapped.type == FIELD_TYPE.ENUM else "set"
    named = mapped.enum_values if kind == "enum" else mapped.set_values
    if named is None or isinstance(named, range):
        count = 64 if kind == "set" else 255 if mapped.size == 1 else 65535
        members = [str(n) for n in range(1, count + 1)]
    else:
        members = list(named)[1:] if kind == "enum" else list(named)
    quoted = ",".join("'" + m.replace("'", "''") + "'" for m in members)
    return Column(mapped.name, kind, f"{kind}({quoted})", nullable, charset="utf8mb4")


def _string_column(mapped: Any, nullable: bool) -> Column:
    """CHAR/BINARY, VARCHAR/VARBINARY, TEXT/BLOB: binary where the map's collation is `binary`;
    text in the map's charset (utf8mb4 where a map names none, as a 5.7 map does not)."""
    name, kind = mapped.name, mapped.type
    collation = getattr(mapped, "collation_name", None)
    binary = collation == "binary"
    charset = None if binary else (collation or "utf8mb4").split("_")[0]
    if kind == FIELD_TYPE.BLOB:
        data_type = _SIZED.get(mapped.length_size, "long") + ("blob" if binary else "text")
        return Column(name, data_type, data_type, nullable, charset=charset, collation=collation)
    text, raw = ("char", "binary") if kind == FIELD_TYPE.STRING else ("varchar", "varbinary")
    length = mapped.max_length // (1 if binary else _MAX_BYTES_PER_CHAR.get(str(charset), 1))
    data_type = raw if binary else text
    return Column(
        name, data_type, f"{data_type}({length})", nullable, charset=charset, collation=collation
    )


def _primary_key(table_map: Any) -> tuple[str, ...]:
    """The primary key's columns as FULL metadata marks them, else none."""
    return tuple(c.name for c in table_map.columns if getattr(c, "is_primary", False))
