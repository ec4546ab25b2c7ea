"""How binlake adapts to where it is installed: without the `fast` extra the chunk SELECTs run on
PyMySQL and say how to speed them up; outside a source checkout Delta's jars are cached in the
user's home rather than beside site-packages; a Spark older than 4.2 is refused in one line."""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from binlake.mysql.connection import bulk_driver
from binlake.runtime import spark


@pytest.fixture(autouse=True)
def fresh_choice() -> Iterator[None]:
    """Each test chooses anew; the next test (and the rest of the run) too."""
    bulk_driver.cache_clear()
    yield
    bulk_driver.cache_clear()


def test_without_mysqlclient_the_chunk_selects_fall_back_to_pymysql_and_say_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "MySQLdb", None)  # `import MySQLdb` raises ImportError
    with caplog.at_level(logging.INFO, logger="binlake.mysql.connection"):
        assert bulk_driver() == "pymysql"
        assert bulk_driver() == "pymysql"
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith("snapshot reader: PyMySQL"), message
    assert "binlake[fast]" in message and "libmariadb-dev" in message, message


def test_with_mysqlclient_the_chunk_selects_run_on_mysqldb(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "MySQLdb", types.ModuleType("MySQLdb"))
    with caplog.at_level(logging.INFO, logger="binlake.mysql.connection"):
        assert bulk_driver() == "mysqldb"
    assert [r.getMessage() for r in caplog.records] == [
        "snapshot reader: MySQLdb (mysqlclient, libmariadb)"
    ]


def test_delta_jars_are_cached_in_the_checkout_or_else_the_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BINLAKE_IVY_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    checkout = tmp_path / "checkout"
    (checkout / "src" / "binlake" / "runtime").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\n")
    module = checkout / "src" / "binlake" / "runtime" / "spark.py"
    monkeypatch.setattr(spark, "__file__", str(module))
    delta = f"delta-{version('delta-spark')}"  # one folder per Delta release
    assert spark.ivy_dir() == str(checkout / ".cache" / "ivy" / delta)

    installed = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "binlake"
    monkeypatch.setattr(spark, "__file__", str(installed / "runtime" / "spark.py"))
    assert spark.ivy_dir() == str(tmp_path / "home" / ".cache" / "binlake" / "ivy" / delta)

    monkeypatch.setenv("BINLAKE_IVY_DIR", str(tmp_path / "ivy"))
    assert spark.ivy_dir() == str(tmp_path / "ivy" / delta)


@pytest.mark.parametrize(("version", "refused"), [("3.5.2", True), ("3.10.0", True),
                                                  ("4.0.0", False), ("4.1.1", False),
                                                  ("4.2.0", False),
                                                  ("5.0.0.dev1", False)])  # fmt: skip
def test_a_spark_older_than_4_0_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, version: str, refused: bool
) -> None:
    import pyspark

    from binlake.errors import ConfigError
    from binlake.runtime.spark import check_spark_version

    monkeypatch.setattr(pyspark, "__version__", version)
    if refused:
        with pytest.raises(ConfigError, match=rf"needs Spark 4.0 or later.*has Spark {version}"):
            check_spark_version()
    else:
        check_spark_version()


@pytest.mark.parametrize(
    ("version", "warned"),
    [("4.0.1", False), ("4.2.0", False), ("4.3.0", True), ("5.0.0.dev1", True)],
)
def test_a_spark_newer_than_the_tests_run_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, version: str, warned: bool
) -> None:
    """Before: any Spark from 4.0 on was accepted in silence, though only 4.0 and 4.2 are run."""
    import pyspark

    from binlake.runtime.spark import check_spark_version

    monkeypatch.setattr(pyspark, "__version__", version)
    with caplog.at_level("WARNING", logger="binlake"):
        check_spark_version()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert bool(warnings) == warned, warnings
    if warned:
        assert f"Spark {version}, newer than the Spark 4.2 binlake is tested on" in warnings[0]
