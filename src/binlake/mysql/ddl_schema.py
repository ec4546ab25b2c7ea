"""A table's schema after an ALTER TABLE, worked out from the statement's text.

The stream decodes each row with the schema in force at its offset. Reading the schema from the
server when the stream meets a DDL gives the schema of *now*: right only when no later DDL has
changed the table since. When one has (a stream behind a migration of several steps), the schema
between the two DDLs exists nowhere but in the statements, so binlake applies the statement to
the schema it held before: column adds, drops, renames, redefinitions, moves and default changes,
with each column described as information_schema would describe it. A clause whose effect on the
columns it cannot tell exactly (a generated column, a charset conversion, a new primary key, a
type it does not know) makes the whole statement unknown (`None`), and the caller stops with a
clear message instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from binlake.model.schema import Column, TableSchema
from binlake.mysql.ddl import Parser, Token, Unparseable, tokenize
from binlake.mysql.system_versioning import IMPLICIT_PERIOD


@dataclass(frozen=True)
class Charsets:
    """What a column definition's text leaves to the server: the table's default collation and
    each charset's default collation and byte map (`binlake.mysql.charsets.charmap`)."""

    table_collation: str
    default_collation: Callable[[str], str]
    charmap: Callable[[str | None], str | None]

    def resolve(self, charset: str | None, collation: str | None) -> tuple[str, str]:
        if collation is not None:
            return collation.split("_", 1)[0], collation
        if charset is not None:
            return charset, self.default_collation(charset)
        return self.table_collation.split("_", 1)[0], self.table_collation


class _Unknown(Exception):
    """A clause whose effect on the columns binlake cannot tell exactly."""


def schema_after_alter(
    before: TableSchema, statement: str, charsets: Charsets
) -> TableSchema | None:
    """`before` with the column changes of `statement` (an ALTER TABLE of that table) applied,
    or None when a clause's effect cannot be told from the text."""
    parser = Parser(tokenize(statement))
    try:
        parser.expect("ALTER")
        parser.keyword("ONLINE")
        parser.keyword("IGNORE")
        parser.expect("TABLE")
        parser.phrase("IF", "EXISTS")
        parser.table()
        parser.skip_wait()
        columns = list(before.columns)
        key, split, period = list(before.key), before.split_column, before.system_period
        for clause in parser.clauses():
            if clause.phrase("ADD", "SYSTEM", "VERSIONING"):
                period = period or IMPLICIT_PERIOD  # named period columns: ADD PERIOD is unknown
                continue
            if clause.phrase("DROP", "SYSTEM", "VERSIONING"):
                period = None  # named period columns: DROP PERIOD is unknown
                continue
            renamed = _clause(clause, columns, charsets)
            if renamed is not None:  # `CHANGE ID ident` renames `id`: names compare ignoring case
                old, new = renamed
                key = [new if k.lower() == old.lower() else k for k in key]
                split = new if split.lower() == old.lower() else split
        names = {c.name for c in columns}
        if not set(key) <= names or split not in names:
            return None  # a key column dropped: a new key, which the server must describe
        return replace(
            before, columns=tuple(columns), key=tuple(key), split_column=split, system_period=period
        )
    except (_Unknown, Unparseable):
        return None


#: Clauses that change a table's partitioning, never its columns.
_PARTITIONING = (
    "PARTITION", "REORGANIZE", "COALESCE", "REBUILD", "OPTIMIZE", "ANALYZE", "CHECK", "REPAIR",
    "REMOVE",
)  # fmt: skip


def _clause(
    p: Parser, columns: list[Column], charsets: Charsets
) -> tuple[str, str] | None:  # fmt: skip
    """Apply one ALTER clause to `columns` in place; (old, new) when it renamed a column."""
    if p.keyword("ADD"):
        _add(p, columns, charsets)
        return None
    if p.keyword("DROP"):
        _drop(p, columns)
        return None
    if p.keyword("MODIFY"):
        p.keyword("COLUMN")
        p.phrase("IF", "EXISTS")
        name = p.name()
        _put(p, columns, _find(columns, name), _definition(name, p, charsets))
        return None
    if p.keyword("CHANGE"):
        p.keyword("COLUMN")
        p.phrase("IF", "EXISTS")
        old, new = p.name(), p.name()
        index = _find(columns, old)
        _put(p, columns, index, _definition(new, p, charsets))
        return (old, new) if old != new else None
    if p.phrase("RENAME", "COLUMN"):
        old = p.name()
        p.expect("TO")
        new = p.name()
        index = _find(columns, old)
        columns[index] = replace(columns[index], name=new)
        return old, new
    if p.keyword("ALTER"):
        _alter_column(p, columns)
        return None
    if p.keyword("RENAME", "ALGORITHM", "LOCK", "ENGINE", "COMMENT", "AUTO_INCREMENT", "FORCE"):
        return None  # the table's name (followed elsewhere), indexes, or table options
    if p.keyword(*_PARTITIONING):
        return None  # where rows are kept (those that move rows are re-snapshots: `ddl`)
    if p.keyword("ROW_FORMAT", "KEY_BLOCK_SIZE", "STATS_PERSISTENT", "PACK_KEYS", "CHECKSUM"):
        return None
    raise _Unknown(p.peek())


def _add(p: Parser, columns: list[Column], charsets: Charsets) -> None:
    if p.keyword("INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN", "CONSTRAINT", "CHECK"):
        return  # an index or constraint: no column changes
    if p.keyword("UNIQUE"):
        return  # may give a key-less table a split key candidate, never a new row key
    if p.keyword("PARTITION"):
        return  # a new, empty partition: where rows are kept, not what they hold
    if p.keyword("PRIMARY", "PERIOD", "SYSTEM"):
        raise _Unknown("ADD PRIMARY KEY / PERIOD")
    p.keyword("COLUMN")
    if p.punct("("):
        raise _Unknown("ADD COLUMN (a, b)")
    exists = p.phrase("IF", "NOT", "EXISTS")
    name = p.name()
    if exists and any(c.name.lower() == name.lower() for c in columns):
        return
    _put(p, columns, None, _definition(name, p, charsets))
    return


def _drop(p: Parser, columns: list[Column]) -> None:
    if p.keyword("INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK"):
        return
    if p.keyword("PRIMARY", "PARTITION", "PERIOD", "SYSTEM"):
        raise _Unknown("DROP PRIMARY KEY / PARTITION")
    p.keyword("COLUMN")
    exists = p.phrase("IF", "EXISTS")
    name = p.name()
    if exists and not any(c.name.lower() == name.lower() for c in columns):
        return
    del columns[_find(columns, name)]
    return


def _alter_column(p: Parser, columns: list[Column]) -> None:
    if p.keyword("INDEX", "KEY", "CONSTRAINT", "CHECK"):
        return
    p.keyword("COLUMN")
    p.phrase("IF", "EXISTS")
    index = _find(columns, p.name())
    column = columns[index]
    if p.phrase("SET", "DEFAULT"):
        default = _default(p)
        if default is None:
            raise _Unknown("SET DEFAULT (expression)")
        columns[index] = replace(column, default=default)
    elif p.phrase("DROP", "DEFAULT"):
        columns[index] = replace(column, default="NULL" if column.nullable else None)
    else:
        raise _Unknown("ALTER COLUMN")
    return


def _find(columns: list[Column], name: str) -> int:
    """A column's index; MySQL compares column names case-insensitively."""
    for index, column in enumerate(columns):
        if column.name.lower() == name.lower():
            return index
    raise _Unknown(f"no column {name}")


def _put(p: Parser, columns: list[Column], index: int | None, column: Column) -> None:
    """Replace columns[index] (or append) with `column`, at the FIRST / AFTER position the rest of
    the clause names."""
    if index is not None:
        del columns[index]
    if p.keyword("FIRST"):
        columns.insert(0, column)
    elif p.keyword("AFTER"):
        columns.insert(_find(columns, p.name()) + 1, column)
    elif index is not None:
        columns.insert(index, column)
    else:
        columns.append(column)


# ---------------------------------------------------------------------------------------------
# Column definitions

#: Integer types: (signed display width, signed precision, unsigned width, unsigned precision).
_INTEGERS = {
    "TINYINT": (4, 3, 3, 3),
    "SMALLINT": (6, 5, 5, 5),
    "MEDIUMINT": (9, 7, 8, 8),
    "INT": (11, 10, 10, 10),
    "INTEGER": (11, 10, 10, 10),
    "BIGINT": (20, 19, 20, 20),
}
_TEXTS = ("TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT")
_BLOBS = ("TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")
_TEMPORALS = ("TIME", "DATETIME", "TIMESTAMP")
#: Words after the type that end the part of the definition binlake reads.
_IGNORED = ("AUTO_INCREMENT", "UNIQUE", "KEY", "INVISIBLE")


def _definition(name: str, p: Parser, charsets: Charsets) -> Column:
    """A column as information_schema describes it, from `type [attributes]`."""
    column = _type(name, p)
    charset = collation = default = None
    nullable: bool | None = None
    while (token := p.peek()) is not None and not _is_position(token):
        if p.keyword("UNSIGNED", "ZEROFILL", "SIGNED"):
            raise _Unknown("UNSIGNED after a type that is not a number")
        if p.keyword("CHARACTER"):
            p.expect("SET")
            charset = p.name().lower()
        elif p.keyword("CHARSET"):
            charset = p.name().lower()
        elif p.keyword("COLLATE"):
            collation = p.name().lower()
        elif p.phrase("NOT", "NULL"):
            nullable = False
        elif p.keyword("NULL"):
            nullable = True
        elif p.keyword("DEFAULT"):
            default = _default(p)
            if default is None:
                raise _Unknown("DEFAULT (expression)")
        elif p.keyword("COMMENT"):
            p.pos += 1
        elif p.keyword("ON"):
            raise _Unknown("ON UPDATE")
        elif p.keyword("AS", "GENERATED", "CHECK", "SERIAL"):
            raise _Unknown("a generated column or a check")
        elif p.keyword(*_IGNORED):
            continue
        else:
            raise _Unknown(token.text)
    if nullable is None:
        if column.data_type == "timestamp":
            raise _Unknown("TIMESTAMP without NULL / NOT NULL")  # explicit_defaults_for_timestamp
        nullable = True
    if default is None and nullable:
        default = "NULL"
    if column.charset == "binary" or column.collation is not None:
        charset, collation = column.charset, column.collation  # byte strings; JSON's utf8mb4_bin
        charset = None if charset == "binary" else charset
    elif column.charset is not None:  # a text type: its own charset, else the table's
        charset, collation = charsets.resolve(charset, collation)
    elif charset is not None or collation is not None:
        raise _Unknown("CHARACTER SET on a type without one")
    return replace(
        column, nullable=nullable, default=default, charset=charset, collation=collation,
        charmap=charsets.charmap(charset),
    )  # fmt: skip


def _is_position(token: Token) -> bool:
    return token.kind == "word" and token.text.upper() in ("FIRST", "AFTER")


def _type(name: str, p: Parser) -> Column:
    """The type part: data_type, column_type and the numeric and temporal precisions; charset
    marks the string types ("" for the table's, "binary" for byte strings)."""
    word = p.name().upper()
    args = _arguments(p)
    if word in ("BOOL", "BOOLEAN"):
        return Column(name, "tinyint", "tinyint(1)", True, precision=3, scale=0)
    if word in _INTEGERS:
        width, precision, uwidth, uprecision = _INTEGERS[word]
        unsigned, zerofill = _sign(p)
        data_type = "int" if word == "INTEGER" else word.lower()
        shown = int(args[0]) if args else (uwidth if unsigned else width)
        suffix = (" unsigned" if unsigned else "") + (" zerofill" if zerofill else "")
        return Column(
            name, data_type, f"{data_type}({shown}){suffix}", True,
            precision=uprecision if unsigned else precision, scale=0,
        )  # fmt: skip
    if word in ("DECIMAL", "NUMERIC", "DEC", "FIXED"):
        precision = int(args[0]) if args else 10
        scale = int(args[1]) if len(args) > 1 else 0
        unsigned, zerofill = _sign(p)
        suffix = (" unsigned" if unsigned else "") + (" zerofill" if zerofill else "")
        column_type = f"decimal({precision},{scale}){suffix}"
        return Column(name, "decimal", column_type, True, precision=precision, scale=scale)
    if word in ("FLOAT", "DOUBLE", "REAL") and not args:
        if word == "DOUBLE":
            p.keyword("PRECISION")
        if any(_sign(p)):
            raise _Unknown("unsigned floating point")
        data_type = "float" if word == "FLOAT" else "double"
        return Column(name, data_type, data_type, True, precision=12 if word == "FLOAT" else 22)
    if word == "BIT":
        bits = int(args[0]) if args else 1
        return Column(name, "bit", f"bit({bits})", True, precision=bits)
    if word in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        if word in ("VARCHAR", "VARBINARY") and not args:
            raise Unparseable("a length")
        length = int(args[0]) if args else 1
        binary = word in ("BINARY", "VARBINARY")
        charset = "binary" if binary else ""
        return Column(name, word.lower(), f"{word.lower()}({length})", True, charset=charset)
    if word in _TEXTS or word in _BLOBS:
        if args:
            raise _Unknown("TEXT(n) / BLOB(n): the server picks the type")
        charset = "binary" if word in _BLOBS else ""
        return Column(name, word.lower(), word.lower(), True, charset=charset)
    if word == "JSON":
        # MariaDB: LONGTEXT with a JSON_VALID check, in utf8mb4_bin.
        return Column(
            name, "longtext", "longtext", True, charset="utf8mb4", collation="utf8mb4_bin"
        )
    if word in ("ENUM", "SET"):
        members = ",".join("'" + m.replace("'", "''") + "'" for m in args)
        return Column(name, word.lower(), f"{word.lower()}({members})", True, charset="")
    if word == "DATE":
        return Column(name, "date", "date", True)
    if word == "YEAR":
        return Column(name, "year", "year(4)", True)
    if word in _TEMPORALS:
        fsp = int(args[0]) if args else 0
        column_type = word.lower() + (f"({fsp})" if fsp else "")
        return Column(name, word.lower(), column_type, True, datetime_precision=fsp)
    if word in ("UUID", "INET4", "INET6"):
        return Column(name, word.lower(), word.lower(), True)
    raise _Unknown(f"type {word}")


def _sign(p: Parser) -> tuple[bool, bool]:
    """(unsigned, zerofill): ZEROFILL implies UNSIGNED."""
    unsigned = zerofill = False
    while word := p.keyword("UNSIGNED", "SIGNED", "ZEROFILL"):
        unsigned |= word in ("UNSIGNED", "ZEROFILL")
        zerofill |= word == "ZEROFILL"
    return unsigned, zerofill


def _arguments(p: Parser) -> list[str]:
    """A type's parenthesised arguments: numbers, or an ENUM/SET's members (unquoted)."""
    if not p.punct("("):
        return []
    values: list[str] = []
    while not p.punct(")"):
        token = p.peek()
        if token is None:
            raise Unparseable(")")
        p.pos += 1
        if token.kind == "string":
            values.append(_unquote(token.text))
        elif token.kind in ("dquoted", "word"):
            values.append(token.text)
        elif token.text != ",":
            raise _Unknown(f"type argument {token.text}")
    return values


def _default(p: Parser) -> str | None:
    """A DEFAULT as information_schema's COLUMN_DEFAULT shows it ('text', a number, NULL), or None
    for an expression (its value for existing rows is not in the text)."""
    token = p.peek()
    if token is None:
        return None
    negative = token.kind == "punct" and token.text == "-"
    if negative:
        p.pos += 1
        token = p.peek()
        if token is None:
            return None
    p.pos += 1
    if token.kind == "string":
        return "'" + _unquote(token.text).replace("'", "''") + "'"
    if token.kind == "dquoted":
        return "'" + token.text.replace("'", "''") + "'"
    if token.kind == "word" and token.text.upper() == "NULL" and not negative:
        return "NULL"
    if token.kind == "word" and token.text.isdigit():
        if p.punct("."):  # 1.5 tokenizes as 1 . 5
            fraction = p.peek()
            if fraction is None or not fraction.text.isdigit():
                return None
            p.pos += 1
            return ("-" if negative else "") + f"{token.text}.{fraction.text}"
        return ("-" if negative else "") + token.text
    return None


def _unquote(literal: str) -> str:
    """A single-quoted SQL string's value: '' and backslash escapes undone."""
    body = literal[1:-1]
    out: list[str] = []
    i = 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "Z": "\x1a", "b": "\b"}
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            out.append(escapes.get(body[i + 1], body[i + 1]))
            i += 2
        elif char == "'" and body[i + 1 : i + 2] == "'":
            out.append("'")
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)
