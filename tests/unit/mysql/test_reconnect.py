"""Which failures a job waits out (a restart, a killed session) and which stop it, and how a
binlog reader's eviction by a server_id twin is told apart from a purged binlog."""

from __future__ import annotations

import pymysql
import pytest

from binlake.errors import BinlogPurgedError, SourceConnectionError, SourceError, carried_by
from binlake.model.offsets import BinlogOffset
from binlake.mysql.binlog import _replication_error
from binlake.mysql.reconnect import is_transient, reconnecting

START = BinlogOffset("mysql-bin.000007", 4)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (pymysql.err.OperationalError(2013, "Lost connection to server during query"), True),
        (pymysql.err.OperationalError(2003, "Can't connect to MySQL server"), True),
        (pymysql.err.OperationalError(2006, "MySQL server has gone away"), True),
        (pymysql.err.OperationalError(1927, "Connection was killed"), True),
        (pymysql.err.OperationalError(1053, "Server shutdown in progress"), True),
        (pymysql.err.InterfaceError(0, ""), True),
        (pymysql.err.OperationalError(1045, "Access denied"), False),
        (pymysql.err.OperationalError(4052, "same server_uuid/server_id"), False),
        (pymysql.err.ProgrammingError(1064, "syntax"), False),
        (ValueError(2013), False),  # a code alone is not a driver's connection error
    ],
)
def test_transient_errors_are_connection_losses_only(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def test_a_wrapped_connect_error_stays_transient() -> None:
    """`source.connect` raises its own message `from None`: the driver's error is still the
    context, so a restart is waited out while the message stays binlake's."""
    try:
        try:
            raise pymysql.err.OperationalError(2003, "Can't connect")
        except pymysql.err.OperationalError:
            raise SourceConnectionError("cannot connect to db:3306") from None
    except SourceConnectionError as exc:
        assert is_transient(exc)


def test_reconnecting_retries_transient_errors_then_gives_up() -> None:
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise pymysql.err.OperationalError(2013, "Lost connection")
        return "ok"

    assert reconnecting("test", window_s=30)(flaky) == "ok"
    assert len(attempts) == 3

    def down() -> None:
        raise pymysql.err.OperationalError(2003, "Can't connect")

    with pytest.raises(SourceConnectionError, match="could not reconnect within") as raised:
        reconnecting("reading chunk 3", window_s=0)(down)
    assert "reading chunk 3" in str(raised.value) and "Can't connect" in str(raised.value)


def test_reconnecting_does_not_retry_other_errors() -> None:
    attempts = []

    def denied() -> None:
        attempts.append(1)
        raise pymysql.err.OperationalError(1045, "Access denied")

    with pytest.raises(pymysql.err.OperationalError):
        reconnecting("test", window_s=30)(denied)
    assert len(attempts) == 1


@pytest.mark.parametrize(
    "error",
    [
        pymysql.err.OperationalError(4052, "A slave with the same server_uuid/server_id is ..."),
        pymysql.err.OperationalError(
            1236,
            "A slave with the same server_uuid/server_id as this slave has connected to the "
            "master; the first event 'binlog.000001' at 4",
        ),
    ],
)
def test_an_evicted_reader_is_a_server_id_collision_not_a_purge(error: Exception) -> None:
    reported = _replication_error(error, START, 5499)  # type: ignore[arg-type]
    assert not isinstance(reported, BinlogPurgedError)
    assert "server_id 5499" in str(reported) and "server_id_range" in str(reported)


def test_a_purged_binlog_names_the_offset_and_the_remedy() -> None:
    error = pymysql.err.OperationalError(1236, "Could not find first log file name in index")
    reported = _replication_error(error, START, 5499)
    assert isinstance(reported, BinlogPurgedError) and isinstance(reported, SourceError)
    assert "mysql-bin.000007" in str(reported) and "--reset" in str(reported)


def test_a_binlake_error_raised_in_a_spark_task_reaches_the_user_as_itself() -> None:
    """A chunk read that gave up on the source fails its Spark task; the driver sees a Java
    exception whose text holds the Python traceback: the user gets binlake's message and code."""
    text = (
        "org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
        'Traceback (most recent call last):\n  File "...", line 1, in read\n'
        "binlake.errors.SourceConnectionError: reading chunk 3 of shop.items: lost the source "
        "and could not reconnect within source.reconnect_timeout_s=300 s (2003)\n"
        "\tat org.apache.spark.api.python.BasePythonRunner..."
    )
    found = carried_by(RuntimeError(text))
    assert isinstance(found, SourceConnectionError)
    assert str(found).startswith("reading chunk 3 of shop.items: lost the source")
    assert found.exit_code == 3
    assert carried_by(RuntimeError("java.lang.OutOfMemoryError: Java heap space")) is None
