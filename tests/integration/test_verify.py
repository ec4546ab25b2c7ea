"""`binlake verify` while the stream is behind: it names the keys that differ and says the stream
has not applied them yet, instead of only counts and a re-snapshot; once the stream catches up
it says identical."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.jobs import commands

from .items import running_stream, seed_items

pytestmark = pytest.mark.integration


def test_verify_names_the_keys_that_differ_and_the_streams_lag(
    spark: Any, sql: Any, make_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the parent commit: `chunk 0 ChunkRange(start=None, end=None): source 2997 rows, silver
    3000 rows`, no key named, no word of the lag."""
    seed_items(sql, 300, copy="other")
    config = make_config(source={"tables": ["items", "other"]})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    sql("UPDATE items SET qty = qty + 1 WHERE id = 5")
    sql("DELETE FROM items WHERE id = 7")
    capsys.readouterr()
    assert commands.verify(spark, config, ["items"]) == 1
    printed = capsys.readouterr().out
    assert f"{config.source.database}.other" not in printed  # --tables limits it
    assert "key (id=5): values differ" in printed
    assert "key (id=7): only in silver" in printed
    assert "binlog bytes behind the source" in printed
    commands.stream(spark, config, available_now=True)
    assert commands.verify(spark, config, ["items"]) == 0
    assert "identical" in capsys.readouterr().out


def test_verify_waits_for_a_running_stream_to_apply_what_was_written_before_it(
    spark: Any, sql: Any, make_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stream running elsewhere (a job, another terminal) and writes just before the verify:
    `--wait-for-stream` waits for the stream to reach the source's head as of its start, so its
    lag is not reported as a difference. Without the wait, the same moment can differ."""
    seed_items(sql, 300)
    config = make_config(stream={"trigger_interval": "1s"})
    commands.snapshot(spark, config)
    with running_stream(spark, config):
        for n in range(20):
            sql("UPDATE items SET qty = qty + 1 WHERE id = %s", (n + 1,))
        sql("DELETE FROM items WHERE id BETWEEN 100 AND 109")
        capsys.readouterr()
        assert commands.verify(spark, config, ["items"], wait_s=120) == 0
    assert "identical" in capsys.readouterr().out
