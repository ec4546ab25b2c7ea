"""Column rules' pure logic: the lake's view of a table and the projection of its rows, on both
paths (a row tuple from the binlog, Arrow columns from a chunk), and the refusals."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest

from binlake.config.secrets import with_hash_salt
from binlake.config.settings import SourceConfig, parse_config
from binlake.errors import ConfigError
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.mysql.column_rules import check_column_rules, lake_view, projection, ruled_rename
from binlake.mysql.schema_history import SchemaChange

PEOPLE = TableSchema(
    "shop",
    "people",
    (
        Column("id", "int", "int(11)", False),
        Column("email", "varchar", "varchar(80)", False, charset="utf8mb4"),
        Column("phone", "varchar", "varchar(30)", True, charset="utf8mb4"),
        Column("notes", "text", "text", True, charset="utf8mb4"),
        Column("born", "date", "date", True),
    ),
    ("id", "email"),
    "id",
)


def _source(rules: dict[str, Any], salt: str = "pepper") -> SourceConfig:
    """The source config as a job's tasks get it: the salt resolved on the driver."""
    raw = {"source": {"database": "shop", "column_rules": rules, "hash_salt_env": "SALT_T"}}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SALT_T", salt)
        return with_hash_salt(parse_config(raw).source)


RULES = {"peo.*": {"exclude": ["Notes"], "hash": ["email"], "mask": ["phone"]}}


def test_the_lake_sees_ruled_columns_as_text_and_excluded_ones_not_at_all() -> None:
    view = lake_view(_source(RULES), PEOPLE)
    assert view.column_names == ("id", "email", "phone", "born")
    assert [c.data_type for c in view.columns] == ["int", "char", "varchar", "date"]
    assert view.key == PEOPLE.key and view.split_column == "id"
    assert lake_view(_source(RULES), view) == view  # a view of a view is itself
    assert lake_view(_source({}), PEOPLE) is PEOPLE


def test_a_row_and_a_chunk_land_alike() -> None:
    source = _source(RULES)
    project = projection(source, PEOPLE)
    row = (1, "a@x.org", None, "secret", None)
    digest = hashlib.sha256(b"pepper\0a@x.org").hexdigest()
    assert project.row(row) == (1, digest, None, None)
    assert project.row((2, "b@x.org", "+33", None, None))[2] == "****"
    assert project.row(None) is None
    columns = [pa.array([1, 2]), pa.array(["a@x.org", "b@x.org"]), pa.array([None, "+1"]),
               pa.array(["s", None]), pa.array([None, None], pa.date32())]  # fmt: skip
    landed = project.arrays(columns)
    assert [a.to_pylist() for a in landed][:3] == [
        [1, 2], [digest, hashlib.sha256(b"pepper\0b@x.org").hexdigest()], [None, "****"],
    ]  # fmt: skip
    assert not project.identity and projection(_source({}), PEOPLE).identity
    # Only the last column left out: still a projection.
    last = projection(_source({"people": {"exclude": ["born"]}}), PEOPLE)
    assert not last.identity and last.row((1, "a", None, None, None)) == (1, "a", None, None)


def test_another_salt_hashes_another_way() -> None:
    row = (1, "a@x.org", None, None, None)
    one = projection(_source(RULES, "a"), PEOPLE).row(row)
    two = projection(_source(RULES, "b"), PEOPLE).row(row)
    assert one is not None and two is not None and one[1] != two[1]


@pytest.mark.parametrize(
    ("rules", "refusal"),
    [
        ({"people": {"hash": ["born"]}}, r"would hash 'born', a date column: hash takes text"),
        ({"people": {"mask": ["id"]}}, r"rules 'id', the column its snapshot splits by"),
        ({"people": {"exclude": ["email"]}}, r"excludes 'email', part of its row key"),
        ({"people": {"mask": ["born"]}}, r"would mask 'born', a date column: mask takes text"),
        ({"people": {"hash": ["mail"]}}, r"names column 'mail', .*did you mean 'email'"),
    ],
)
def test_a_rule_that_cannot_hold_is_refused(rules: dict[str, Any], refusal: str) -> None:
    with pytest.raises(ConfigError, match=refusal):
        check_column_rules(_source(rules), [PEOPLE])


# Renames and rules: a rule follows the name the user configured, in both directions.
TAXED = TableSchema(
    "shop",
    "taxed",
    (
        Column("id", "int", "int(11)", False),
        Column("tax_id", "varchar", "varchar(20)", True, charset="utf8mb4"),
        Column("ssn", "varchar", "varchar(20)", True, charset="utf8mb4"),
    ),
    ("id",),
    "id",
)
SSN_HASHED = {"taxed": {"hash": ["ssn"]}}


def _alter(statement: str, before: TableSchema, after: TableSchema) -> SchemaChange:
    return SchemaChange("shop.taxed", BinlogOffset("mysql-bin.000001", 4), statement, before,
                        after, "alter")  # fmt: skip


def _without(table: TableSchema, *names: str) -> TableSchema:
    return replace(table, columns=tuple(c for c in table.columns if c.name not in names))


def _renamed(table: TableSchema, old: str, new: str) -> TableSchema:
    columns = tuple(replace(c, name=new) if c.name == old else c for c in table.columns)
    return replace(table, columns=columns)


@pytest.mark.parametrize(
    ("statement", "before"),
    [
        # `ssn` dropped earlier: tax ids become the column the rule hashes.
        ("ALTER TABLE taxed CHANGE tax_id ssn varchar(20)", _without(TAXED, "ssn")),
        # Dropped and renamed onto in one statement.
        ("ALTER TABLE taxed DROP COLUMN ssn, CHANGE tax_id ssn varchar(20)", TAXED),
    ],
)
def test_a_rename_into_a_ruled_name_is_caught(statement: str, before: TableSchema) -> None:
    """The values landed raw under `tax_id` would be silver's `ssn`, the hashed column."""
    from binlake.mysql.column_rules import renamed_into_rule

    after = _renamed(_without(TAXED, "ssn"), "tax_id", "ssn")
    change = _alter(statement, before, after)
    reason = renamed_into_rule(_source(SSN_HASHED), change)
    assert reason is not None and "'tax_id'" in reason and "'ssn'" in reason
    assert "--reset" in reason and "pepper" not in reason  # the remedy; never the salt
    assert ruled_rename(_source(SSN_HASHED), change) is None  # no value leaves a rule


def test_a_swap_of_a_ruled_column_with_another_stops_the_stream() -> None:
    """`ssn` ↔ `tax_id`: the raw ssn values would land under `tax_id`, which no rule names."""
    after = replace(TAXED, columns=(TAXED.columns[0], TAXED.columns[2], TAXED.columns[1]))
    after = _renamed(_renamed(_renamed(after, "ssn", "x"), "tax_id", "ssn"), "x", "tax_id")
    statement = (
        "ALTER TABLE taxed RENAME COLUMN ssn TO x, RENAME COLUMN tax_id TO ssn, "
        "RENAME COLUMN x TO tax_id"
    )
    reason = ruled_rename(_source(SSN_HASHED), _alter(statement, TAXED, after))
    assert reason is not None and "renames 'ssn'" in reason and "'tax_id'" in reason


def test_renames_outside_the_rules_are_left_alone() -> None:
    after = _renamed(TAXED, "tax_id", "vat_id")
    change = _alter("ALTER TABLE taxed CHANGE tax_id vat_id varchar(20)", TAXED, after)
    from binlake.mysql.column_rules import renamed_into_rule

    assert ruled_rename(_source(SSN_HASHED), change) is None
    assert renamed_into_rule(_source(SSN_HASHED), change) is None
    out = _alter(
        "ALTER TABLE taxed CHANGE ssn ssn2 varchar(20)", TAXED, _renamed(TAXED, "ssn", "ssn2")
    )
    assert "renames 'ssn'" in (ruled_rename(_source(SSN_HASHED), out) or "")
