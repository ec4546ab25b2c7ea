"""Which tables a DDL statement from the binlog changes, and how (and which tables a DML statement
logged as a statement may change: its rows have no row events, so binlake cannot apply them).

The binlog carries DDL as the statement's text in QUERY events, not as a structured change. binlake
reads each affected table's new schema from the server, so from the text it needs only which
tables changed, how (alter, create, drop, truncate, rename) and which columns were renamed: a
column rename is indistinguishable from a drop plus an add in a schema diff. Hence a tokenizer
(comments, executable comments, quoted identifiers, string literals) and a small recursive descent
over the few statement shapes that matter; everything else is `None`. The descent reads what it
needs and ignores the rest (table options, RESTRICT, a trailing `;`): the server has already
accepted the statement, so the text is not validated again.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<comment>--(?=\s|$)[^\n]*|\#[^\n]*|/\*(?!M?!).*?\*/)
    |(?P<exec>/\*M?!\d*)
    |(?P<close>\*/)
    |(?P<quoted>`(?:[^`]|``)*`)
    |(?P<dquoted>"(?:[^"\\]|\\.|"")*")
    |(?P<string>'(?:[^'\\]|\\.|'')*')
    |(?P<word>[\w$]+)
    |(?P<punct>.)""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class TableRef:
    database: str | None  # None: unqualified (the event's default schema applies)
    name: str

    def qualified(self, default_database: str) -> tuple[str, str]:
        """(database, name), the default database filling in for an unqualified reference."""
        return (self.database if self.database is not None else default_database, self.name)


@dataclass(frozen=True)
class Ddl:
    kind: str  # "alter", "create", "drop", "truncate", "rename" or "drop_database"
    tables: tuple[TableRef, ...]  # altered/created/dropped/truncated (RENAME TABLE: none)
    renames: tuple[tuple[TableRef, TableRef], ...] = ()  # table renames, in order
    column_renames: tuple[tuple[str, str], ...] = ()  # (old, new) column names, in order
    replace: bool = False  # CREATE OR REPLACE TABLE (MariaDB): the old table is dropped first
    if_not_exists: bool = False  # CREATE TABLE IF NOT EXISTS: nothing when the table exists
    #: The clause of an ALTER that removes, adds or replaces rows without row events (DROP,
    #: TRUNCATE, EXCHANGE or CONVERT PARTITION, CONVERT TABLE … TO PARTITION, DISCARD/IMPORT
    #: [PARTITION …] TABLESPACE; ADD PERIOD FOR SYSTEM_TIME, which fills the period's new
    #: columns of every row); "" when none does.
    removes_rows: str = ""
    #: DROP DATABASE: the database whose every table goes (the binlog logs no DROP TABLE each).
    dropped_database: str | None = None


@dataclass(frozen=True)
class Token:
    kind: str  # "word" (bare: keyword or name), "name" (`quoted`), "dquoted", "string", "punct"
    text: str


class Unparseable(Exception):
    pass


def tokenize(statement: str) -> list[Token]:
    tokens: list[Token] = []
    in_exec = False  # inside /*! ... */ or /*M! ... */, whose contents are part of the statement
    for match in _TOKEN.finditer(statement):
        kind, text = match.lastgroup, match.group()
        if kind == "exec":
            in_exec = True
        elif kind == "close" and in_exec:
            in_exec = False
        elif kind == "quoted":
            tokens.append(Token("name", text[1:-1].replace("``", "`")))
        elif kind == "dquoted":  # a string, or an identifier under ANSI_QUOTES
            tokens.append(Token("dquoted", text[1:-1].replace('""', '"')))
        elif kind in ("word", "string"):
            tokens.append(Token(kind, text))
        elif kind in ("punct", "close"):
            tokens.extend(Token("punct", char) for char in text)
    return tokens


class Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def keyword(self, *words: str) -> str | None:
        """Consumes and returns the next token, upper-cased, if it is one of `words`."""
        token = self.peek()
        if token is None or token.kind != "word" or token.text.upper() not in words:
            return None
        self.pos += 1
        return token.text.upper()

    def phrase(self, *words: str) -> bool:
        """Consumes `words` in sequence (e.g. IF NOT EXISTS) if all of them follow."""
        start = self.pos
        if all(self.keyword(word) for word in words):
            return True
        self.pos = start
        return False

    def expect(self, word: str) -> None:
        if self.keyword(word) is None:
            raise Unparseable(word)

    def punct(self, char: str) -> bool:
        if self.peek() != Token("punct", char):
            return False
        self.pos += 1
        return True

    def name(self) -> str:
        token = self.peek()
        if token is None or token.kind not in ("word", "name", "dquoted"):
            raise Unparseable("identifier expected")
        self.pos += 1
        return token.text

    def table(self) -> TableRef:
        first = self.name()
        return TableRef(first, self.name()) if self.punct(".") else TableRef(None, first)

    def skip_wait(self) -> None:
        """MariaDB's lock-wait option: WAIT n | NOWAIT."""
        if self.keyword("WAIT"):
            self.name()
        else:
            self.keyword("NOWAIT")

    def clauses(self) -> list[Parser]:
        """The rest of the statement split on commas outside parentheses."""
        parts: list[list[Token]] = [[]]
        depth = 0
        for token in self.tokens[self.pos :]:
            if token.kind == "punct":
                depth += {"(": 1, ")": -1}.get(token.text, 0)
                if token.text == "," and depth == 0:
                    parts.append([])
                    continue
            parts[-1].append(token)
        self.pos = len(self.tokens)
        return [Parser(part) for part in parts if part]


def short_statement(statement: str) -> str:
    """A statement for a message: on one line, at most 120 characters."""
    text = " ".join(statement.split())
    return text if len(text) <= 120 else text[:117] + "..."


def parse_ddl(statement: str) -> Ddl | None:
    """The table changes of a QUERY event's statement; None for anything that changes no table's
    rows or layout (BEGIN, COMMIT, CREATE DATABASE, GRANT, temporary tables, views, SET, ...)."""
    parser = Parser(tokenize(statement))
    verbs = {
        "ALTER": _alter,
        "CREATE": _create,
        "DROP": _drop,
        "TRUNCATE": _truncate,
        "RENAME": _rename,
    }
    try:
        verb = parser.keyword(*verbs)
        return verbs[verb](parser) if verb else None
    except Unparseable:
        return None


def _alter(p: Parser) -> Ddl | None:
    p.keyword("ONLINE")
    p.keyword("IGNORE")
    if not p.keyword("TABLE"):
        return None  # ALTER DATABASE, VIEW, USER, EVENT, ...
    p.phrase("IF", "EXISTS")
    table = p.table()
    p.skip_wait()
    tables = [table]
    renames: list[tuple[TableRef, TableRef]] = []
    column_renames: list[tuple[str, str]] = []
    removes_rows = ""
    for clause in p.clauses():
        if column := _column_rename(clause):
            column_renames.append(column)
        elif clause.keyword("RENAME"):
            if not clause.keyword("INDEX", "KEY"):
                clause.keyword("TO", "AS")
                renames.append((table, clause.table()))
        elif clause.phrase("EXCHANGE", "PARTITION"):  # swaps the partition's rows with a table's
            removes_rows = "EXCHANGE PARTITION"
            clause.name()
            clause.phrase("WITH", "TABLE")
            tables.append(clause.table())
        elif clause.phrase("CONVERT", "PARTITION"):  # its rows leave for a new table (10.7+)
            removes_rows = "CONVERT PARTITION"
        elif clause.phrase("CONVERT", "TABLE"):  # a table's rows arrive as a partition (10.7+)
            removes_rows = "CONVERT TABLE"
        elif clause.phrase("ADD", "PERIOD", "FOR", "SYSTEM_TIME"):
            # Named period columns added with versioning: every row gets their values, unlogged.
            removes_rows = "ADD PERIOD FOR SYSTEM_TIME"
        elif verb := _removing_rows(clause):
            removes_rows = verb
    # CHANGE keeping the name (MySQL compares column names case-insensitively) only redefines it.
    column_renames = [(old, new) for old, new in column_renames if old.lower() != new.lower()]
    return Ddl(
        "alter", tuple(tables), tuple(renames), tuple(column_renames), removes_rows=removes_rows
    )


def _removing_rows(clause: Parser) -> str:
    """The clause's verb if it removes or replaces rows with no row event in the binlog."""
    for words in (("DROP", "PARTITION"), ("TRUNCATE", "PARTITION"), ("DISCARD", "TABLESPACE"),
                  ("IMPORT", "TABLESPACE")):  # fmt: skip
        if clause.phrase(*words):
            return " ".join(words)
    for verb in ("DISCARD", "IMPORT"):  # `DISCARD PARTITION p TABLESPACE`: one partition's rows
        if clause.phrase(verb, "PARTITION"):
            return f"{verb} PARTITION TABLESPACE"
    return ""


def _column_rename(clause: Parser) -> tuple[str, str] | None:
    """(old, new) of RENAME COLUMN [IF EXISTS] old TO new | CHANGE [COLUMN] [IF EXISTS] old new."""
    if clause.phrase("RENAME", "COLUMN"):
        clause.phrase("IF", "EXISTS")
        old = clause.name()
        clause.expect("TO")
        return old, clause.name()
    if clause.keyword("CHANGE"):
        clause.keyword("COLUMN")
        clause.phrase("IF", "EXISTS")
        return clause.name(), clause.name()
    return None


def _create(p: Parser) -> Ddl | None:
    replace = p.phrase("OR", "REPLACE")
    if p.keyword("TABLE"):
        exists = p.phrase("IF", "NOT", "EXISTS")
        return Ddl("create", (p.table(),), replace=replace, if_not_exists=exists)
    p.keyword("UNIQUE", "FULLTEXT", "SPATIAL")
    return _index(p, if_exists=("IF", "NOT", "EXISTS")) if p.keyword("INDEX") else None


def _index(p: Parser, if_exists: tuple[str, ...]) -> Ddl:
    """The rest of CREATE INDEX / DROP INDEX: [IF [NOT] EXISTS] name [USING type] ON table."""
    p.phrase(*if_exists)
    p.name()
    if p.keyword("USING"):
        p.name()
    p.expect("ON")
    return Ddl("alter", (p.table(),))


def _drop(p: Parser) -> Ddl | None:
    if p.keyword("INDEX"):
        return _index(p, if_exists=("IF", "EXISTS"))
    if p.keyword("DATABASE", "SCHEMA"):
        p.phrase("IF", "EXISTS")
        return Ddl("drop_database", (), dropped_database=p.name())
    if not p.keyword("TABLE", "TABLES"):
        return None  # DROP TEMPORARY TABLE, VIEW, USER, ...
    p.phrase("IF", "EXISTS")
    tables = [p.table()]
    while p.punct(","):
        tables.append(p.table())
    return Ddl("drop", tuple(tables))


def _truncate(p: Parser) -> Ddl:
    p.keyword("TABLE")
    return Ddl("truncate", (p.table(),))


def _rename(p: Parser) -> Ddl | None:
    if not p.keyword("TABLE", "TABLES"):
        return None  # RENAME USER
    p.phrase("IF", "EXISTS")
    renames: list[tuple[TableRef, TableRef]] = []
    while not renames or p.punct(","):
        old = p.table()
        p.skip_wait()
        p.expect("TO")
        renames.append((old, p.table()))
    return Ddl("rename", (), tuple(renames))


#: Words between a DML verb and its first table, and words after which a table reference follows.
_DML_MODIFIERS = ("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "INTO")
_TABLE_FOLLOWS = ("FROM", "JOIN", "USING", "INTO", "TABLE")
_DML_ENDS = ("SET", "WHERE", "VALUES", "VALUE", "SELECT", "ON", "ORDER", "LIMIT", "PARTITION")


def dml_tables(statement: str) -> tuple[TableRef, ...] | None:
    """The tables a DML statement (INSERT, REPLACE, UPDATE, DELETE, LOAD DATA) may change, read
    conservatively: every table reference of its table list, targets and joined tables alike
    (a multi-table DELETE may name its targets by alias). None for any other statement."""
    parser = Parser(tokenize(statement))
    verb = parser.keyword("INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD")
    if verb is None:
        return None
    tables: list[TableRef] = []
    with contextlib.suppress(Unparseable):  # a shape not foreseen: the references read up to it
        _dml_references(parser, verb, tables)
    return tuple(tables)


def _dml_references(parser: Parser, verb: str, tables: list[TableRef]) -> None:
    expect_table = verb != "LOAD"  # LOAD DATA ... INTO TABLE t
    depth = 0
    while (token := parser.peek()) is not None:
        word = token.text.upper() if token.kind == "word" else ""
        if token.kind == "punct":
            depth += {"(": 1, ")": -1}.get(token.text, 0)
            parser.pos += 1
            expect_table = depth == 0 and token.text == "," and verb in ("UPDATE", "DELETE")
        elif depth == 0 and word in _DML_ENDS and verb != "LOAD":
            break
        elif depth == 0 and (word in _DML_MODIFIERS or word in _TABLE_FOLLOWS):
            parser.pos += 1
            expect_table = expect_table or word in _TABLE_FOLLOWS
        elif depth == 0 and expect_table and token.kind in ("word", "name"):
            tables.append(_dml_table(parser))
            expect_table = False
        else:
            parser.pos += 1
            expect_table = False


def _dml_table(parser: Parser) -> TableRef:
    """A table reference, or a multi-table DELETE's `t.*`."""
    first = parser.name()
    if not parser.punct("."):
        return TableRef(None, first)
    return TableRef(None, first) if parser.punct("*") else TableRef(first, parser.name())
