"""The privilege check asks the server: throwaway users on the shared server, each lacking one
privilege, get the GRANT that adds it; privileges held through a default role count; the minimal
grant set runs a whole snapshot and stream.

Users and roles are created as root through scripts/db.sh (no server variable changes) with
unique names, and dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from binlake.errors import SourceError
from binlake.jobs import commands
from binlake.mysql.connection import connection
from binlake.mysql.prerequisites import validate

from .accounts import MINIMAL
from .assertions import assert_silver_equals_source

pytestmark = pytest.mark.integration


def _validate(config: Any) -> None:
    with connection(config.source) as conn:
        validate(conn, config)


@pytest.mark.parametrize(
    ("grants", "expected"),
    [
        (
            ("REPLICATION SLAVE ON *.*", "SELECT ON {db}.*"),
            ["GRANT BINLOG MONITOR ON *.* TO 'USER'@'127.0.0.1'", "GRANT REPLICATION CLIENT"],
        ),
        (
            ("BINLOG MONITOR ON *.*", "SELECT ON {db}.*"),
            ["GRANT REPLICATION SLAVE ON *.* TO 'USER'@'127.0.0.1'"],
        ),
        (
            ("BINLOG MONITOR ON *.*", "REPLICATION SLAVE ON *.*", "INSERT ON {db}.*"),
            ["may not SELECT", "GRANT SELECT ON `DB`.`t` TO 'USER'@'127.0.0.1'"],
        ),
    ],
    ids=["no_binlog_monitor", "no_replication_slave", "no_select"],
)
def test_each_missing_privilege_names_its_grant(
    sql: Any, database: str, account: Callable[..., Any], grants: Any, expected: list[str]
) -> None:
    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    config = account(*grants)
    with pytest.raises(SourceError) as raised:
        _validate(config)
    message = str(raised.value)
    for part in expected:
        part = part.replace("USER", config.source.user).replace("DB", database)
        assert part in message, f"{part!r} not in {message!r}"
    assert config.source.password.get_secret_value() not in message


def test_privileges_through_a_default_role_pass(sql: Any, account: Callable[..., Any]) -> None:
    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    _validate(account(role_grants=MINIMAL))


def test_minimal_grants_run_a_snapshot_and_a_stream(
    spark: Any, db_env: dict[str, str], sql: Any, account: Callable[..., Any]
) -> None:
    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    sql("INSERT INTO t VALUES " + ", ".join(f"({n}, 'v{n}')" for n in range(250)))
    config = account(*MINIMAL)
    assert commands.snapshot(spark, config).chunks >= 2
    sql("UPDATE t SET v = 'changed' WHERE id < 20")
    sql("DELETE FROM t WHERE id >= 240")
    sql("INSERT INTO t VALUES (1000, 'new')")
    assert commands.stream(spark, config, available_now=True).changes > 0
    assert_silver_equals_source(spark, db_env, config, "t")
