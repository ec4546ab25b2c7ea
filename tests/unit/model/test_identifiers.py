"""Quoting names for the source's SQL text, for advice shown to people, and for Spark."""

from __future__ import annotations

import pytest

from binlake.lake.tables import column_mapping, column_name
from binlake.model.schema import quote, typed_identifier


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("plain", "`plain`"),
        ("we`ird", "`we``ird`"),
        ("``", "``````"),
        ("tab%s", "`tab%%s`"),
        ("per%cent 'x' \"y\" ü.z", "`per%%cent 'x' \"y\" ü.z`"),
    ],
)
def test_quote_doubles_backticks_and_percent_signs(name: str, quoted: str) -> None:
    assert quote(name) == quoted


def test_quoted_names_survive_the_drivers_parameter_formatting() -> None:
    """Both drivers %-format the SQL text with the bound (already escaped) parameters."""
    sql = f"SELECT {quote('%s')} FROM {quote('t`%d')} WHERE {quote('k%')} >= %s"
    assert sql % ("'5'",) == "SELECT `%s` FROM `t``%d` WHERE `k%` >= '5'"
    assert f"SELECT 1 FROM {quote('a%b')}" % () == "SELECT 1 FROM `a%b`"


def test_typed_identifier_is_the_name_as_typed() -> None:
    assert typed_identifier("t`%s") == "`t``%s`"


def test_spark_column_names_are_backticked() -> None:
    assert column_name("dot.ted") == "`dot.ted`"
    assert column_name("co`l") == "`co``l`"


def test_column_mapping_only_for_names_delta_refuses_otherwise() -> None:
    assert column_mapping(["id", "dot.ted", "co`l", "ünï", "per%cent"]) == {}
    assert column_mapping(["id", "sp ace"]) == {"delta.columnMapping.mode": "name"}
    assert column_mapping(["a=b"]) == {"delta.columnMapping.mode": "name"}
