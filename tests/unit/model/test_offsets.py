"""Binlog offsets: their total order (file suffix, then position, then row index)."""

from __future__ import annotations

import random

import pytest

from binlake.model.offsets import (
    BinlogOffset,
    ChangePosition,
    bytes_behind,
    file_sequence,
    position_token,
)


def test_file_sequence_reads_the_numeric_suffix() -> None:
    assert file_sequence("mysql-bin.000042") == 42
    assert file_sequence("mariadb-bin.1000000") == 1_000_000
    assert file_sequence("host.with.dots-bin.000007") == 7


@pytest.mark.parametrize(
    "name", ["mysql-bin", "mysql-bin.", "mysql-bin.abc", "mysql-bin.0001a", "", "000001"]
)
def test_file_sequence_rejects_names_without_numeric_suffix(name: str) -> None:
    with pytest.raises(ValueError, match="numeric suffix"):
        file_sequence(name)


def test_offset_rejects_file_name_without_numeric_suffix() -> None:
    with pytest.raises(ValueError, match="'mysql-bin'"):
        BinlogOffset("mysql-bin", 4)


def test_offset_rejects_negative_position() -> None:
    with pytest.raises(ValueError, match="-1"):
        BinlogOffset("mysql-bin.000001", -1)


def test_offsets_order_by_file_suffix_across_rotation() -> None:
    before_rotation = BinlogOffset("mysql-bin.000009", 987_654)
    after_rotation = BinlogOffset("mysql-bin.000010", 4)
    assert before_rotation < after_rotation
    assert after_rotation > before_rotation
    assert not after_rotation < before_rotation


def test_offsets_order_by_suffix_value_not_by_suffix_width() -> None:
    # As strings, "mysql-bin.1000000" < "mysql-bin.999999"; as binlog files it follows it.
    narrow = BinlogOffset("mysql-bin.999999", 500)
    wide = BinlogOffset("mysql-bin.1000000", 4)
    assert narrow < wide
    assert max(narrow, wide) == wide
    assert min(wide, narrow) == narrow


def test_offsets_in_one_file_order_by_position() -> None:
    low = BinlogOffset("mysql-bin.000003", 154)
    high = BinlogOffset("mysql-bin.000003", 1_000)
    assert low < high
    assert low <= high
    assert high >= low
    assert not high <= low


def test_equal_offsets_are_equal_and_hash_alike() -> None:
    one = BinlogOffset("mysql-bin.000003", 154)
    same = BinlogOffset("mysql-bin.000003", 154)
    assert one == same
    assert one <= same and one >= same
    assert not one < same
    assert len({one, same}) == 1


def test_offsets_sort_into_binlog_order() -> None:
    shuffled = [
        BinlogOffset("mysql-bin.000010", 4),
        BinlogOffset("mysql-bin.1000000", 4),
        BinlogOffset("mysql-bin.000009", 120),
        BinlogOffset("mysql-bin.999999", 4),
        BinlogOffset("mysql-bin.000009", 4),
    ]
    assert sorted(shuffled) == [
        BinlogOffset("mysql-bin.000009", 4),
        BinlogOffset("mysql-bin.000009", 120),
        BinlogOffset("mysql-bin.000010", 4),
        BinlogOffset("mysql-bin.999999", 4),
        BinlogOffset("mysql-bin.1000000", 4),
    ]


def test_offset_round_trips_through_a_dict_of_primitives() -> None:
    offset = BinlogOffset("mysql-bin.000123", 4_294_967_296)
    data = offset.to_dict()
    assert data == {"file": "mysql-bin.000123", "pos": 4_294_967_296}
    assert BinlogOffset.from_dict(data) == offset


def test_offset_from_dict_coerces_a_stringly_position() -> None:
    # Stream offsets travel as JSON; a position may come back as a string.
    assert BinlogOffset.from_dict({"file": "mysql-bin.000002", "pos": "77"}) == BinlogOffset(
        "mysql-bin.000002", 77
    )


def test_offset_renders_as_file_colon_position() -> None:
    assert str(BinlogOffset("mysql-bin.000002", 77)) == "mysql-bin.000002:77"


def test_changes_of_one_event_order_by_row_index() -> None:
    event_end = BinlogOffset("mysql-bin.000004", 900)
    first, second = ChangePosition(event_end, 0), ChangePosition(event_end, 1)
    assert first < second
    assert sorted([ChangePosition(event_end, 2), second, first]) == [
        first,
        second,
        ChangePosition(event_end, 2),
    ]


def test_change_position_orders_by_offset_before_row_index() -> None:
    late_row_of_early_event = ChangePosition(BinlogOffset("mysql-bin.000009", 900), 50)
    first_row_of_next_file = ChangePosition(BinlogOffset("mysql-bin.000010", 4), 0)
    assert late_row_of_early_event < first_row_of_next_file


def test_change_at_a_boundary_is_not_after_it() -> None:
    boundary = BinlogOffset("mysql-bin.000004", 900)
    assert not ChangePosition(boundary, 0).is_after(boundary)
    assert not ChangePosition(boundary, 7).is_after(boundary)
    assert not ChangePosition(BinlogOffset("mysql-bin.000004", 899), 0).is_after(boundary)
    assert ChangePosition(BinlogOffset("mysql-bin.000004", 901), 0).is_after(boundary)
    assert ChangePosition(BinlogOffset("mysql-bin.000005", 4), 0).is_after(boundary)


def test_position_token_is_fixed_width_sequence_position_row() -> None:
    offset = BinlogOffset("mysql-bin.000042", 1234)
    assert position_token(offset, 7) == "0000000042:00000000000000001234:00000007"
    assert ChangePosition(offset, 7).token() == "0000000042:00000000000000001234:00000007"


def test_position_token_order_equals_change_position_order() -> None:
    rng = random.Random(20240607)
    positions = []
    for _ in range(3000):
        sequence = rng.choice([1, 9, 10, 99, 100, 999_999, 1_000_000, rng.randrange(1, 10**9)])
        width = rng.choice([6, 7, 10])
        file = f"mysql-bin.{sequence:0{width}d}"
        pos = rng.choice([4, 154, rng.randrange(0, 2**32), rng.randrange(0, 10**15)])
        row = rng.choice([0, 1, rng.randrange(0, 10**7)])
        positions.append(ChangePosition(BinlogOffset(file, pos), row))
    by_position = sorted(positions, key=lambda p: p.sort_key)
    by_token = sorted(positions, key=lambda p: (p.token(), p.sort_key))
    assert [p.sort_key for p in by_token] == [p.sort_key for p in by_position]
    for a, b in zip(positions, reversed(positions), strict=True):
        assert (a.token() < b.token()) == (a < b)
        assert (a.token() == b.token()) == (a.sort_key == b.sort_key)


def test_a_later_lineage_sorts_after_every_offset_of_the_one_before() -> None:
    # A promoted replica's binlog restarts at low file numbers: its offsets still come after.
    old = BinlogOffset("mysql-bin.000950", 90_000_000)
    new = BinlogOffset("mysql-bin.000001@1", 4)
    newer = BinlogOffset("mysql-bin.000001@2", 4)
    assert old < new < newer
    assert sorted([newer, old, new]) == [old, new, newer]
    assert position_token(old, 99) < position_token(new, 0) < position_token(newer, 0)
    assert ChangePosition(new, 0).is_after(old)


def test_an_offset_keeps_its_lineage_apart_from_the_servers_file_name() -> None:
    offset = BinlogOffset("mysql-bin.000003", 154).on(2)
    assert (offset.file, offset.binlog_file, offset.lineage) == (
        "mysql-bin.000003@2",
        "mysql-bin.000003",
        2,
    )
    assert offset != BinlogOffset("mysql-bin.000003", 154)  # the same coordinates, another binlog
    assert offset.on(2) == offset and offset.on(0) == BinlogOffset("mysql-bin.000003", 154)
    with pytest.raises(ValueError, match="lineage number"):
        BinlogOffset("mysql-bin.000003@x", 4)


def test_the_gtid_position_travels_with_an_offset_but_does_not_order_it() -> None:
    offset = BinlogOffset("mysql-bin.000004@1", 900, "0-2-77")
    assert offset.to_dict() == {"file": "mysql-bin.000004@1", "pos": 900, "gtid": "0-2-77"}
    assert BinlogOffset.from_dict(offset.to_dict()).gtid == "0-2-77"
    assert offset == BinlogOffset("mysql-bin.000004@1", 900)  # equal whatever the GTID
    assert BinlogOffset("mysql-bin.000004", 900).to_dict() == {
        "file": "mysql-bin.000004",
        "pos": 900,
    }


def test_bytes_behind_counts_the_whole_binlog_from_an_earlier_lineage() -> None:
    sizes = {"mysql-bin.000001": 1_000, "mysql-bin.000002": 300}
    head = BinlogOffset("mysql-bin.000002@1", 300)
    assert bytes_behind(BinlogOffset("mysql-bin.000007", 50), head, sizes) == 1_300
    assert bytes_behind(BinlogOffset("mysql-bin.000001@1", 400), head, sizes) == 900
