"""`ddl_schema` against the real MariaDB: for each ALTER, the schema worked out from the text
equals the schema the server reports after running it (information_schema is the oracle)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from binlake.model.schema import TableSchema
from binlake.mysql.ddl_schema import schema_after_alter
from binlake.mysql.discovery import load_schema
from binlake.mysql.schema_source import ServerSchemas

from .replay import connect

pytestmark = pytest.mark.integration

CREATE = (
    "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL, "
    "price DECIMAL(10,2), note VARCHAR(10) NULL, e ENUM('lo','hi') NOT NULL DEFAULT 'lo', "
    "bin VARBINARY(8)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
)
ALTERS = [
    "ALTER TABLE t ADD COLUMN region VARCHAR(8) NOT NULL DEFAULT 'eu' AFTER name",
    "ALTER TABLE t MODIFY qty BIGINT NOT NULL",
    "ALTER TABLE t RENAME COLUMN qty TO quantity",
    "ALTER TABLE t CHANGE quantity amount BIGINT UNSIGNED NOT NULL DEFAULT 7 FIRST",
    "ALTER TABLE t CHANGE amount Amount BIGINT UNSIGNED NOT NULL",  # a case-only rename
    "ALTER TABLE t DROP COLUMN note, ADD COLUMN note TEXT",
    "ALTER TABLE t MODIFY e ENUM('hi','lo','it''s') NOT NULL DEFAULT 'hi'",
    "ALTER TABLE t ADD COLUMN s SET('a','b') NULL, ADD COLUMN ts DATETIME(3) DEFAULT NULL",
    "ALTER TABLE t ADD COLUMN l VARCHAR(5) CHARACTER SET latin1 NULL, ADD INDEX by_name (name)",
    "ALTER TABLE t ADD COLUMN c VARCHAR(5) COLLATE utf8mb4_bin, ALGORITHM=INPLACE, LOCK=NONE",
    "ALTER TABLE t ADD f FLOAT, ADD d DOUBLE NOT NULL DEFAULT -1.5, ADD b BIT(3), ADD y YEAR",
    "ALTER TABLE t ADD tiny TINYINT UNSIGNED, ADD flag BOOLEAN NOT NULL DEFAULT 0, ADD j JSON",
    "ALTER TABLE t ADD u UUID NULL, ADD dt DATE, ADD tm TIME(2) NULL, ADD m MEDIUMINT",
    "ALTER TABLE t ADD mu MEDIUMINT UNSIGNED ZEROFILL, ADD sm SMALLINT(3), ADD dec0 DECIMAL",
    "ALTER TABLE t ADD ch CHAR CHARACTER SET latin1 COLLATE latin1_bin, ADD bl BLOB",
    "ALTER TABLE t ADD ts2 TIMESTAMP(6) NULL, ADD s2 SMALLINT UNSIGNED, ADD i2 INT(5) ZEROFILL",
    "ALTER TABLE t ALTER COLUMN region SET DEFAULT 'us', ALTER COLUMN e DROP DEFAULT",
    "ALTER TABLE t DROP COLUMN IF EXISTS nothing, ADD COLUMN IF NOT EXISTS name INT",
    "ALTER TABLE t MODIFY price DECIMAL(14,2) COMMENT 'wider' AFTER id, ENGINE=InnoDB",
    "ALTER TABLE t RENAME COLUMN id TO ident",  # the key column: key and split key follow
    "ALTER TABLE t CHANGE IDENT Ident INT NOT NULL",  # also when the statement spells it so
    # Partitioning changes where rows are kept, never the columns (issue 68.8: a later ALTER
    # before the stream read one of these stopped the stream).
    "ALTER TABLE t PARTITION BY KEY (ident) PARTITIONS 3",
    "ALTER TABLE t COALESCE PARTITION 1",
    "ALTER TABLE t ADD PARTITION PARTITIONS 2",
    "ALTER TABLE t REBUILD PARTITION p0",
    "ALTER TABLE t ANALYZE PARTITION p1",
    "ALTER TABLE t REMOVE PARTITIONING",
    # Issue 68.9: versioning on and off; the key never gains the row end the server adds to it.
    "ALTER TABLE t ADD SYSTEM VERSIONING",
    "ALTER TABLE t DROP SYSTEM VERSIONING",
]
UNKNOWN = [
    "ALTER TABLE t CONVERT TO CHARACTER SET latin1",
    "ALTER TABLE t ADD COLUMN g INT AS (1) VIRTUAL",
    "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (name)",
    "ALTER TABLE t ADD COLUMN at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP",
    "ALTER TABLE t ADD COLUMN p POINT",
    "ALTER TABLE t ADD rs TIMESTAMP(6) GENERATED ALWAYS AS ROW START, ADD re TIMESTAMP(6) "
    "GENERATED ALWAYS AS ROW END, ADD PERIOD FOR SYSTEM_TIME (rs, re), ADD SYSTEM VERSIONING",
]


def _comparable(table: TableSchema) -> TableSchema:
    """Defaults as Spark reads them: '1.50' and '1.5' are one literal (see silver_schema)."""
    columns = tuple(replace(c, default=_number(c.default)) for c in table.columns)
    return replace(table, columns=columns)


def _number(text: str | None) -> str | None:
    if text is None:
        return None
    bare = text.strip("'")
    try:
        return str(float(bare))
    except ValueError:
        return text


def test_each_alter_worked_out_from_its_text_is_the_servers_schema(
    db_env: dict[str, str], database: str, sql: Any
) -> None:
    sql(CREATE)
    with connect(db_env, database) as conn:
        server = ServerSchemas(conn, {})
        before = load_schema(conn, database, "t", {})
        for statement in ALTERS:
            derived = schema_after_alter(before, statement, server.charsets(database, "t"))
            sql(statement)
            actual = load_schema(conn, database, "t", {})
            assert derived is not None, statement
            assert _comparable(derived) == _comparable(actual), statement
            before = actual
        for statement in UNKNOWN:
            assert schema_after_alter(before, statement, server.charsets(database, "t")) is None
