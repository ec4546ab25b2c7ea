"""Managed MySQL services' own settings, as binlake reads them from a real server: Amazon RDS and
Aurora keep binlogs by `mysql.rds_show_configuration`'s `binlog retention hours`, not by the
server's expiry. No RDS is reachable here: a throwaway MariaDB is given the procedure with the
result set Amazon documents (name, value, description), and binlake reads it through a real CALL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from binlake.mysql.connection import connection
from binlake.mysql.retention import expiry_seconds, managed_retention

from .replay import connect
from .servers import PrivateServer, private_server

pytestmark = pytest.mark.integration

#: Amazon's procedure, as `CALL mysql.rds_show_configuration` answers on RDS for MySQL.
_RDS_SHOW_CONFIGURATION = """
CREATE PROCEDURE mysql.rds_show_configuration()
SELECT name, value, description FROM mysql.rds_configuration
"""


@pytest.fixture(scope="module")
def rds_like() -> Iterator[PrivateServer]:
    """A server with a week's own expiry and RDS's configuration procedure."""
    with private_server({"binlog_expire_logs_seconds": "604800"}) as server:
        with connect(server.db_env) as conn, conn.cursor() as cur:
            cur.execute(
                "CREATE TABLE mysql.rds_configuration (name VARCHAR(100) PRIMARY KEY, "
                "value VARCHAR(100) NULL, description VARCHAR(300))"
            )
            cur.execute(
                "INSERT INTO mysql.rds_configuration VALUES ('binlog retention hours', NULL, "
                "'binlog retention hours specifies the duration in hours before binary logs "
                "are automatically deleted.')"
            )
            cur.execute(_RDS_SHOW_CONFIGURATION)
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
        yield server


def _set_hours(server: PrivateServer, hours: int | None) -> None:
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute(
            "UPDATE mysql.rds_configuration SET value = %s WHERE name = 'binlog retention hours'",
            (hours,),
        )


def test_rds_retention_hours_decide_the_expiry_over_the_servers_own(
    rds_like: PrivateServer, make_private_config: Any
) -> None:
    """Before: the week of binlog_expire_logs_seconds, while RDS keeps nothing under NULL."""
    config = make_private_config(rds_like, "shop")
    _set_hours(rds_like, None)
    with connection(config.source) as conn:
        managed = managed_retention(conn)
        assert managed is not None and managed.hours is None and not managed.aurora
        assert expiry_seconds(conn) == 0.0
    _set_hours(rds_like, 48)
    with connection(config.source) as conn:
        assert expiry_seconds(conn) == 48 * 3600.0


def test_a_server_without_the_procedure_keeps_its_own_expiry(
    db_env: dict[str, str], make_config: Any
) -> None:
    with connection(make_config().source) as conn:
        assert managed_retention(conn) is None
        expiry = expiry_seconds(conn)
    assert expiry is None or expiry > 0  # the project's server: whatever it is set to


def test_a_job_on_an_rds_source_with_null_retention_starts_with_the_warning(
    rds_like: PrivateServer, make_private_config: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from binlake.jobs.preflight import preflight

    _set_hours(rds_like, None)
    config = make_private_config(rds_like, "shop")
    with caplog.at_level("WARNING"):
        preflight(config, writes_lake=False)
    (warning,) = [
        r.getMessage() for r in caplog.records if "binlog retention hours" in r.getMessage()
    ]
    assert "Amazon RDS for MySQL" in warning and "re-snapshot" in warning
