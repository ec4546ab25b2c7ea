"""The chunk SELECTs' two drivers (`source.bulk_driver`): MySQLdb where mysqlclient is installed
(the `fast` extra), PyMySQL, which every install has, where it is not. A chunk lands the same
through either: every table of `fixtures/types.sql` (every column type with its edge values,
zero dates among them) read by the chunk reader gives the same Arrow columns through both, and
both refuse, or accept, a server without TLS alike."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from binlake.errors import SourceError
from binlake.mysql.connection import BulkDriver, bulk_connect, bulk_connection, connection
from binlake.mysql.discovery import load_schema
from binlake.snapshot.chunk_reader import ChunkReader
from binlake.snapshot.chunks import ChunkRange

from .tls_certs import session_cipher
from .type_tables import TABLES, load_type_tables

pytestmark = pytest.mark.integration

DRIVERS: tuple[BulkDriver, ...] = get_args(BulkDriver)


def test_every_type_lands_the_same_through_both_drivers(
    db_env: dict[str, str], database: str, make_config: Any
) -> None:
    load_type_tables(db_env, database)
    config = make_config()
    rows = 0
    with connection(config.source) as conn:
        tables = [load_schema(conn, database, name, {}) for name in TABLES]
    for table in tables:
        columns = {}
        for driver in DRIVERS:
            with ChunkReader(config.source, table, config.snapshot_server_id(0), driver) as reader:
                columns[driver] = reader.read(0, ChunkRange.all()).columns
        fast, fallback = (columns[d] for d in DRIVERS)
        differing = [
            f"{column.name}: {a.to_pylist()[:3]} vs {b.to_pylist()[:3]}"
            for column, a, b in zip(table.columns, fast, fallback, strict=True)
            if not a.equals(b)
        ]
        assert not differing, f"{table.name} differs between {DRIVERS}: {differing}"
        rows += len(fast[0])
    assert rows >= 60, f"the fixture's tables held {rows} rows"


@pytest.mark.parametrize("driver", DRIVERS)
def test_both_drivers_treat_a_server_without_tls_alike(
    driver: BulkDriver, make_config: Any
) -> None:
    """The shared server offers no TLS: `required` refuses it, `preferred` goes on in plaintext."""
    with pytest.raises(SourceError) as raised:
        bulk_connect(make_config(source={"tls": "required"}).source, driver)
    assert "does not offer TLS" in str(raised.value) and "required" in str(raised.value)
    with bulk_connection(make_config(source={"tls": "preferred"}).source, driver) as conn:
        assert session_cipher(conn) == ""
