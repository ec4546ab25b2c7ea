"""Chunk normalisation (snapshot rows + binlog (LW, HW] → the chunk as of HW) and the per-batch
collapse: both must follow binlog positions, never input order."""

from __future__ import annotations

import random

import pytest

from binlake.model.changes import Op, Row, RowChange, apply_changes, collapse, split_key_change
from binlake.model.offsets import BinlogOffset, ChangePosition
from binlake.snapshot.chunks import ChunkRange

TABLE = "shop.customers"
CHUNK = ChunkRange(100, 200)  # the chunk being read: split key in [100, 200)


def key_of(row: Row) -> tuple[int]:
    return (row[0],)


def in_chunk(row: Row) -> bool:
    return CHUNK.contains(row[0])


def at(pos: int, row: int = 0, file: str = "mysql-bin.000003") -> ChangePosition:
    return ChangePosition(BinlogOffset(file, pos), row)


def insert(pos: int, after: Row, row: int = 0) -> RowChange:
    return RowChange(TABLE, Op.INSERT, at(pos, row), None, after)


def update(pos: int, before: Row, after: Row, row: int = 0) -> RowChange:
    return RowChange(TABLE, Op.UPDATE, at(pos, row), before, after)


def delete(pos: int, before: Row, row: int = 0) -> RowChange:
    return RowChange(TABLE, Op.DELETE, at(pos, row), before, None)


SNAPSHOT = {(100,): (100, "ann"), (150,): (150, "bob"), (199,): (199, "cy")}


# -- RowChange / split_key_change ------------------------------------------------------------


def test_change_image_is_after_image_except_for_delete() -> None:
    assert insert(10, (1, "a")).image == (1, "a")
    assert update(10, (1, "a"), (1, "b")).image == (1, "b")
    assert delete(10, (1, "a")).image == (1, "a")


def test_update_keeping_its_key_is_not_split() -> None:
    change = update(10, (1, "a"), (1, "b"))
    assert split_key_change(change, key_of) == [change]


def test_insert_and_delete_are_not_split() -> None:
    assert split_key_change(insert(10, (1, "a")), key_of) == [insert(10, (1, "a"))]
    assert split_key_change(delete(10, (1, "a")), key_of) == [delete(10, (1, "a"))]


def test_key_changing_update_becomes_delete_of_old_and_insert_of_new_at_its_position() -> None:
    change = update(10, (1, "a"), (2, "a"), row=3)
    assert split_key_change(change, key_of) == [
        RowChange(TABLE, Op.DELETE, at(10, 3), (1, "a"), None),
        RowChange(TABLE, Op.INSERT, at(10, 3), None, (2, "a")),
    ]


# -- apply_changes: the chunk as of HW -------------------------------------------------------


def test_no_changes_leave_the_snapshot_rows() -> None:
    assert apply_changes(SNAPSHOT, [], key_of, in_chunk) == SNAPSHOT


def test_insert_in_the_chunk_adds_the_row() -> None:
    result = apply_changes(SNAPSHOT, [insert(10, (120, "new"))], key_of, in_chunk)
    assert result == {**SNAPSHOT, (120,): (120, "new")}


def test_update_in_the_chunk_puts_the_after_image() -> None:
    result = apply_changes(SNAPSHOT, [update(10, (150, "bob"), (150, "rob"))], key_of, in_chunk)
    assert result == {(100,): (100, "ann"), (150,): (150, "rob"), (199,): (199, "cy")}


def test_delete_in_the_chunk_removes_the_row() -> None:
    result = apply_changes(SNAPSHOT, [delete(10, (150, "bob"))], key_of, in_chunk)
    assert result == {(100,): (100, "ann"), (199,): (199, "cy")}


def test_delete_of_a_row_the_select_did_not_see_is_harmless() -> None:
    # The row was inserted and deleted inside (LW, HW] before the SELECT read the chunk.
    changes = [insert(10, (130, "tmp")), delete(20, (130, "tmp"))]
    assert apply_changes(SNAPSHOT, changes, key_of, in_chunk) == SNAPSHOT


def test_delete_then_reinsert_keeps_the_reinserted_row() -> None:
    changes = [delete(10, (150, "bob")), insert(20, (150, "bob again"))]
    result = apply_changes(SNAPSHOT, changes, key_of, in_chunk)
    assert result == {(100,): (100, "ann"), (150,): (150, "bob again"), (199,): (199, "cy")}


def test_key_changing_update_into_the_chunk_adds_the_new_key() -> None:
    change = update(10, (250, "dee"), (160, "dee"))
    result = apply_changes(SNAPSHOT, [change], key_of, in_chunk)
    assert result == {**SNAPSHOT, (160,): (160, "dee")}


def test_key_changing_update_out_of_the_chunk_removes_the_old_key() -> None:
    change = update(10, (150, "bob"), (250, "bob"))
    result = apply_changes(SNAPSHOT, [change], key_of, in_chunk)
    assert result == {(100,): (100, "ann"), (199,): (199, "cy")}


def test_key_changing_update_inside_the_chunk_moves_the_row() -> None:
    change = update(10, (150, "bob"), (151, "bob"))
    result = apply_changes(SNAPSHOT, [change], key_of, in_chunk)
    assert result == {(100,): (100, "ann"), (151,): (151, "bob"), (199,): (199, "cy")}


def test_changes_given_out_of_order_apply_by_position() -> None:
    in_order = [
        update(10, (150, "bob"), (150, "v1")),
        delete(20, (150, "v1")),
        insert(30, (150, "v2")),
        update(30, (150, "v2"), (150, "v3"), row=1),
        update(40, (100, "ann"), (100, "ann2"), row=0),
        delete(40, (100, "ann2"), row=1),
    ]
    expected = {(150,): (150, "v3"), (199,): (199, "cy")}
    assert apply_changes(SNAPSHOT, in_order, key_of, in_chunk) == expected
    rng = random.Random(5)
    for _ in range(50):
        shuffled = in_order[:]
        rng.shuffle(shuffled)
        assert apply_changes(SNAPSHOT, shuffled, key_of, in_chunk) == expected


def test_changes_across_a_binlog_rotation_apply_in_binlog_order() -> None:
    # Position 4 of file .000010 comes after position 900 of .000009 (not before, as 4 < 900).
    early = RowChange(
        TABLE, Op.UPDATE, at(900, file="mysql-bin.000009"), (150, "bob"), (150, "early")
    )
    late = RowChange(
        TABLE, Op.UPDATE, at(4, file="mysql-bin.000010"), (150, "early"), (150, "late")
    )
    result = apply_changes(SNAPSHOT, [late, early], key_of, in_chunk)
    assert result[(150,)] == (150, "late")


def test_changes_to_keys_outside_the_chunk_are_ignored() -> None:
    changes = [
        insert(10, (99, "below")),
        insert(11, (200, "at end")),
        update(12, (250, "x"), (250, "y")),
        delete(13, (5, "gone")),
    ]
    assert apply_changes(SNAPSHOT, changes, key_of, in_chunk) == SNAPSHOT


def test_apply_changes_leaves_the_snapshot_rows_untouched() -> None:
    rows = dict(SNAPSHOT)
    apply_changes(rows, [delete(10, (150, "bob")), insert(11, (120, "x"))], key_of, in_chunk)
    assert rows == SNAPSHOT


def test_update_moving_the_split_column_out_of_the_chunk_removes_the_row() -> None:
    """BUG: the split column need not be the row key (snapshot.split_keys may name any column of
    a table with a primary key). Here the row key is `id` (column 0) and the chunk is over
    `region` (column 1). An update that keeps id 7 but moves region 150 → 250 takes the row out
    of chunk [100, 200): the chunk as of HW (`SELECT … WHERE 100 <= region AND region < 200`)
    no longer holds it. apply_changes judges the update by its after image only, skips it, and
    keeps the stale before image in the chunk, so bronze ends up with id 7 twice (here, stale,
    and in the chunk that holds region 250)."""
    rows = {(7,): (7, 150, "bob")}

    def in_region_chunk(row: Row) -> bool:
        return CHUNK.contains(row[1])

    change = update(10, (7, 150, "bob"), (7, 250, "bob"))
    assert apply_changes(rows, [change], key_of, in_region_chunk) == {}


def test_update_moving_the_split_column_into_the_chunk_adds_the_row() -> None:
    def in_region_chunk(row: Row) -> bool:
        return CHUNK.contains(row[1])

    change = update(10, (7, 250, "bob"), (7, 150, "bob"))
    assert apply_changes({}, [change], key_of, in_region_chunk) == {(7,): (7, 150, "bob")}


# -- collapse ----------------------------------------------------------------------------------


def test_collapse_keeps_the_last_change_of_each_key_by_position() -> None:
    changes = [
        insert(10, (1, "a")),
        update(20, (1, "a"), (1, "b")),
        insert(15, (2, "x")),
        delete(30, (2, "x")),
        update(20, (1, "b"), (1, "c"), row=1),
    ]
    assert collapse(changes, key_of) == [
        update(20, (1, "b"), (1, "c"), row=1),
        delete(30, (2, "x")),
    ]


def test_collapse_ignores_input_order() -> None:
    changes = [
        insert(10, (1, "a")),
        update(20, (1, "a"), (1, "b")),
        update(20, (1, "b"), (1, "c"), row=1),
        delete(25, (2, "x")),
        insert(26, (2, "y")),
        insert(5, (3, "z")),
    ]
    expected = [insert(5, (3, "z")), update(20, (1, "b"), (1, "c"), row=1), insert(26, (2, "y"))]
    rng = random.Random(3)
    for _ in range(50):
        shuffled = changes[:]
        rng.shuffle(shuffled)
        assert collapse(shuffled, key_of) == expected


def test_collapse_orders_across_binlog_rotation() -> None:
    early = RowChange(TABLE, Op.DELETE, at(900, file="mysql-bin.000009"), (1, "a"), None)
    late = RowChange(TABLE, Op.INSERT, at(4, file="mysql-bin.000010"), None, (1, "b"))
    assert collapse([late, early], key_of) == [late]


def test_collapse_of_split_key_change_keeps_both_keys() -> None:
    parts = split_key_change(update(10, (1, "a"), (2, "a")), key_of)
    collapsed = collapse([insert(5, (1, "a")), *parts], key_of)
    assert {key_of(c.image): c.op for c in collapsed} == {(1,): Op.DELETE, (2,): Op.INSERT}


def test_collapse_of_nothing_is_nothing() -> None:
    assert collapse([], key_of) == []


@pytest.mark.parametrize("seed", range(5))
def test_collapse_then_apply_equals_apply_of_all_changes(seed: int) -> None:
    rng = random.Random(seed)
    changes = []
    live: dict[int, Row] = {}
    for pos in range(1, 120):
        key = rng.randrange(0, 8)
        if key in live and rng.random() < 0.4:
            changes.append(delete(pos, live.pop(key)))
        elif key in live:
            after = (key, f"v{pos}")
            changes.append(update(pos, live[key], after))
            live[key] = after
        else:
            live[key] = (key, f"v{pos}")
            changes.append(insert(pos, live[key]))
    rng.shuffle(changes)
    everything = apply_changes({}, changes, key_of, lambda row: True)
    collapsed = apply_changes({}, collapse(changes, key_of), key_of, lambda row: True)
    assert everything == collapsed == {(k,): v for k, v in live.items()}
