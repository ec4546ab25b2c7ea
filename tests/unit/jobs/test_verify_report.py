"""What `binlake verify` prints: the keys that differ under their column names, and what a
difference means given where the stream stands."""

from __future__ import annotations

from binlake.jobs.status import StreamLag
from binlake.jobs.verify import (
    ChunkDifference,
    KeyDifference,
    VerifyReport,
    lag_hint,
    render_report,
)
from binlake.snapshot.chunks import ChunkRange


def _lag(behind: int) -> StreamLag:
    return StreamLag("silver", "mysql-bin.000001:400", "mysql-bin.000001:900", behind, 3.0, None)


def test_a_differing_chunk_lists_its_keys_by_column() -> None:
    keys = (KeyDifference((5, "a"), "values differ"), KeyDifference((7, "b"), "only in silver"))
    report = VerifyReport(
        {"shop.t": (10, 11)},
        [ChunkDifference("shop.t", 0, ChunkRange(None, (100,)), 10, 11, keys)],
        {"shop.t": ("id", "region")},
    )
    lines = render_report(report).splitlines()
    assert lines[1].split()[-1] == "DIFFERENT"
    assert lines[-2:] == [
        "    key (id=5, region='a'): values differ",
        "    key (id=7, region='b'): only in silver",
    ]


def test_the_hint_follows_the_stream() -> None:
    assert "not applied yet" not in lag_hint(_lag(0))
    assert "caught up" in lag_hint(_lag(0))
    behind = lag_hint(_lag(500))
    assert "500 binlog bytes behind" in behind and "binlake stream --available-now" in behind
    assert "applied no batch yet" in lag_hint(None)
