"""When the stream warns that the source is about to purge binlog it has not read."""

from __future__ import annotations

import pytest

from binlake.mysql.retention import ManagedRetention, Retention, duration

DAY = 86400.0


@pytest.mark.parametrize(
    ("expiry", "age"),
    [(None, 10 * DAY), (7 * DAY, None), (7 * DAY, 3.49 * DAY), (7 * DAY, 0.0)],
    ids=["never-purges", "caught-up", "just-under-half", "fresh-backlog"],
)
def test_no_warning_while_more_than_half_the_expiry_is_left(
    expiry: float | None, age: float | None
) -> None:
    assert Retention(expiry, age).warning("silver") is None


def test_warns_at_half_the_expiry_with_the_time_left() -> None:
    warning = Retention(7 * DAY, 3.5 * DAY).warning("silver")
    assert warning is not None
    assert "stream silver" in warning and "3.5 days ago" in warning
    assert "catch up within 3.5 days" in warning and "binlog_expire_logs_seconds" in warning


def test_past_the_expiry_the_position_may_go_at_any_time() -> None:
    retention = Retention(3600.0, 4000.0)
    assert retention.left_s == -400.0
    warning = retention.warning("silver")
    assert warning is not None and "catch up now" in warning


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5.0, "0 s"), (119.0, "119 s"), (120.0, "2 min"), (7199.0, "120 min"), (7200.0, "2.0 h"),
     (172800.0, "2.0 days")],
)  # fmt: skip
def test_durations_read_as_an_operator_reads_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("hours", "aurora", "expiry", "words"),
    [
        (None, False, 0.0, ["Amazon RDS for MySQL", "NULL", "as soon as it can"]),
        (None, True, 0.0, ["Aurora MySQL", "NULL", "lazily"]),
        (24.0, False, 86400.0, None),
        (0.5, True, 1800.0, None),
    ],
    ids=["rds-null", "aurora-null", "rds-24h", "aurora-half-hour"],
)
def test_an_rds_sources_retention_hours_are_its_expiry_and_null_is_warned_about(
    hours: float | None, aurora: bool, expiry: float, words: list[str] | None
) -> None:
    """NULL, RDS's default, keeps nothing: the server's binlog_expire_logs_seconds says
    nothing there, and before binlake read it as "never purges"."""
    managed = ManagedRetention(hours, aurora)
    assert managed.expiry_s == expiry
    warning = managed.warning()
    if words is None:
        assert warning is None
    else:
        assert warning is not None
        assert all(word in warning for word in words), warning
        assert "mysql.rds_set_configuration('binlog retention hours'" in warning
        # A minute's backlog is already past what NULL promises.
        assert Retention(managed.expiry_s, 60.0).warning("silver") is not None
