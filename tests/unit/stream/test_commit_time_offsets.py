"""The stream's offsets carry the commit time reached there (`binlog_source.COMMIT_TIME`): each
batch's reads start from it, so a change is never stamped earlier than one of an earlier batch,
a restart included (the checkpoint holds the offsets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from binlake.config.settings import parse_config
from binlake.model.offsets import BinlogOffset
from binlake.stream import binlog_source
from binlake.stream.binlog_source import BinlogRange, BinlogStreamReader, StreamSpec

FILE = "mysql-bin.000001"


def _spec(tmp_path: Path, read_ids: tuple[int, ...] = ()) -> StreamSpec:
    config = parse_config({"source": {"database": "shop"}, "lake": {"root": str(tmp_path)}})
    return StreamSpec(
        name="binlog", job="job", source=config.source, server_id=7, split_keys={},
        start=BinlogOffset(FILE, 4), history_root=str(tmp_path / "h"),
        tables_path=str(tmp_path / "t"), read_ids=read_ids, bytes_per_read=1024,
    )  # fmt: skip


def _offset(pos: int, since: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"file": FILE, "pos": pos}
    if since is not None:
        data["commit_ts"] = since
    return data


def test_a_batch_end_carries_the_commit_time_reached_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scanned: list[tuple[BinlogOffset, int, list[BinlogOffset]]] = []

    def commit_times_at(source: Any, server_id: int, start: Any, since: int, at: Any) -> list[int]:
        scanned.append((start, since, at))
        return [max(since, 900)]

    monkeypatch.setattr(binlog_source, "commit_times_at", commit_times_at)
    monkeypatch.setattr(binlog_source, "settled_end", lambda _s, _i, _st, end, _c: end)  # no XA
    reader = BinlogStreamReader(_spec(tmp_path))
    monkeypatch.setattr(reader, "_head", lambda: BinlogOffset(FILE, 5000))

    end = reader.latestOffset(_offset(4), ReadAllAvailable())
    assert end == _offset(5000, 900)
    assert scanned == [(BinlogOffset(FILE, 4), 0, [BinlogOffset(FILE, 5000)])]
    # The next batch starts from it; with nothing new, the offset is the start's, unchanged.
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    assert len(scanned) == 1
    # An offset written before commit times were kept: 0, and the key left out.
    assert reader.latestOffset(_offset(5000), ReadAllAvailable()) == _offset(5000)


def test_each_read_of_a_batch_starts_from_the_commit_time_at_its_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cuts = [BinlogOffset(FILE, 3000), BinlogOffset(FILE, 6000)]
    monkeypatch.setattr(binlog_source, "read_splits", lambda *_: cuts)
    monkeypatch.setattr(
        binlog_source, "commit_times_at", lambda _s, _i, _st, since, at: [since + 1, since + 2]
    )
    reader = BinlogStreamReader(_spec(tmp_path, read_ids=(11, 12, 13)))

    def plan(_: StreamSpec, start: BinlogOffset, end: BinlogOffset, since: int) -> BinlogRange:
        return BinlogRange(start.file, start.pos, end.file, end.pos, since=since)

    monkeypatch.setattr(StreamSpec, "plan", plan)  # no schema history to read
    reads = reader.partitions(_offset(4, 800), _offset(9000, 950))
    assert [(r.start.pos, r.end.pos, r.since) for r in reads] == [  # type: ignore[attr-defined]
        (4, 3000, 800), (3000, 6000, 801), (6000, 9000, 802),
    ]  # fmt: skip
    # Spark 4.0/4.1 call `latestOffset` bare: the reader keeps the last batch's end itself.
    assert (reader.position, reader.since) == (BinlogOffset(FILE, 9000), 950)
