"""The run's one Spark session, for any test that asks for it: unit tests that need Spark run
without MariaDB. The integration tests' fixtures (the database, throwaway servers, ...) are in
tests/integration/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The run's one local Spark session with Delta; it needs no database, so Spark-only tests
    run without MariaDB. Its catalog (`spark_catalog`, for `lake.catalog` tests) keeps managed
    tables in a temporary warehouse, not in `./spark-warehouse`.

    Its queries run interpreted (`spark.INTERPRETED_QUERIES`) throughout: the suite's tables hold
    hundreds of rows, and almost every query it runs is a plan Spark has not seen before, whose
    compile costs more than its few rows: the trade the stream's sink makes for small silver
    tables (docs/performance.md, "What bounds each figure"). The CLI's child processes, the Spark
    Connect server and the bench start compiled, as users' compute does."""
    from binlake.runtime.spark import INTERPRETED_QUERIES, local_session

    warehouse = str(tmp_path_factory.mktemp("warehouse"))
    session = local_session("binlake-tests", cores=2, warehouse_dir=warehouse)
    for name, value in INTERPRETED_QUERIES.items():
        session.conf.set(name, value)
    yield session
    session.stop()
