"""Chunk ranges and the planner: exact expected plans, membership at the boundaries, and the
invariant that every key of the table lies in exactly one chunk."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from binlake.snapshot.chunks import (
    ChunkRange,
    chunk_of,
    decode_key,
    distribution_factor,
    encode_key,
    plan_even,
    plan_uneven,
)

# customers.id from Flink CDC's customer.sql fixture: deliberate gaps exercise uneven splitting.
CUSTOMER_IDS = [101, 102, 103, 109, 110, 111, 118, 121, 123, *range(1009, 1020), 2000]


class KeyList:
    """The two queries of the uneven split, answered from an in-memory table.

    `next_chunk_max(start)`: MAX(k) of the first `chunk_size` keys with k >= start (in the
    column's order); `next_key_above(k)`: MIN(k') with k' > k. Duplicates are kept: the split
    column need not be unique (first column of a composite key).
    """

    def __init__(
        self, keys: list[Any], chunk_size: int, sort_key: Callable[[Any], Any] | None = None
    ) -> None:
        self.order = sort_key or (lambda k: k)
        self.keys = sorted(keys, key=self.order)
        self.chunk_size = chunk_size

    @property
    def minimum(self) -> Any:
        return self.keys[0] if self.keys else None

    def next_chunk_max(self, start: Any) -> Any:
        window = [k for k in self.keys if self.order(k) >= self.order(start)][: self.chunk_size]
        return window[-1] if window else None

    def next_key_above(self, key: Any) -> Any:
        above = [k for k in self.keys if self.order(k) > self.order(key)]
        return above[0] if above else None

    def plan(self) -> list[ChunkRange]:
        return plan_uneven(
            self.minimum, self.next_chunk_max, self.next_key_above, sort_key=self.order
        )


def assert_partition(
    ranges: list[ChunkRange], keys: list[Any], sort_key: Callable[[Any], Any] | None = None
) -> None:
    """Every key in exactly one range; the ranges contiguous, open at both outer ends; only the
    outer open ranges may be empty of keys."""
    assert ranges[0].start is None
    assert ranges[-1].end is None
    for before, after in itertools.pairwise(ranges):
        assert before.end == after.start
    for key in keys:
        holders = [i for i, r in enumerate(ranges) if r.contains(key, sort_key)]
        assert len(holders) == 1, f"key {key!r} is in chunks {holders}"
    for index, chunk in enumerate(ranges):
        if 0 < index < len(ranges) - 1:
            assert any(chunk.contains(k, sort_key) for k in keys), f"chunk {chunk} holds no key"


# -- ChunkRange ----------------------------------------------------------------------------------


def test_chunk_range_refuses_start_equal_to_end() -> None:
    with pytest.raises(ValueError, match="start == end == 5"):
        ChunkRange(5, 5)


def test_chunk_range_all_is_unbounded_on_both_sides() -> None:
    everything = ChunkRange.all()
    assert everything == ChunkRange(None, None)
    assert everything.contains(-(2**63))
    assert everything.contains(2**64)
    assert everything.contains("")


def test_chunk_membership_is_start_inclusive_end_exclusive() -> None:
    chunk = ChunkRange(11, 21)
    assert not chunk.contains(10)
    assert chunk.contains(11)
    assert chunk.contains(20)
    assert not chunk.contains(21)


def test_first_chunk_is_open_below_and_last_open_above() -> None:
    first, last = ChunkRange(None, 11), ChunkRange(91, None)
    assert first.contains(-1_000_000)
    assert first.contains(10)
    assert not first.contains(11)
    assert not last.contains(90)
    assert last.contains(91)
    assert last.contains(10**12)


def test_null_key_belongs_to_no_chunk() -> None:
    assert not ChunkRange.all().contains(None)
    assert chunk_of([ChunkRange.all()], None) is None


def test_chunk_membership_follows_the_collation_order() -> None:
    chunk = ChunkRange("b", "d")
    assert chunk.contains("B", str.casefold)
    assert not chunk.contains("D", str.casefold)
    assert not chunk.contains("a", str.casefold)
    # Without the collation, 'B' < 'b' in code-point order: outside.
    assert not chunk.contains("B")


# -- even split ----------------------------------------------------------------------------------


def test_even_split_of_dense_keys_gives_exact_ranges() -> None:
    assert plan_even(1, 100, 10, 1.0) == [
        ChunkRange(None, 11),
        ChunkRange(11, 21),
        ChunkRange(21, 31),
        ChunkRange(31, 41),
        ChunkRange(41, 51),
        ChunkRange(51, 61),
        ChunkRange(61, 71),
        ChunkRange(71, 81),
        ChunkRange(81, 91),
        ChunkRange(91, None),
    ]


def test_even_split_of_sparse_keys_steps_by_chunk_size_times_factor() -> None:
    # ids 1, 11, 21, ..., 991: 100 rows over 991 values, factor 9.91 → step floor(10 × 9.91) = 99.
    factor = distribution_factor(1, 991, 100)
    assert factor == pytest.approx(9.91)
    assert plan_even(1, 991, 10, factor) == [
        ChunkRange(None, 100),
        ChunkRange(100, 199),
        ChunkRange(199, 298),
        ChunkRange(298, 397),
        ChunkRange(397, 496),
        ChunkRange(496, 595),
        ChunkRange(595, 694),
        ChunkRange(694, 793),
        ChunkRange(793, 892),
        ChunkRange(892, 991),
        ChunkRange(991, None),
    ]


def test_even_split_keeps_the_maximum_when_it_lands_on_a_boundary() -> None:
    assert plan_even(1, 21, 10, 1.0) == [
        ChunkRange(None, 11),
        ChunkRange(11, 21),
        ChunkRange(21, None),
    ]


def test_even_split_of_negative_keys() -> None:
    assert plan_even(-25, 4, 10, 1.0) == [
        ChunkRange(None, -15),
        ChunkRange(-15, -5),
        ChunkRange(-5, None),
    ]


def test_even_split_smaller_than_one_chunk_is_one_unbounded_chunk() -> None:
    assert plan_even(1, 5, 10, 1.0) == [ChunkRange.all()]


def test_even_split_of_one_row_is_one_unbounded_chunk() -> None:
    assert plan_even(42, 42, 10, 1.0) == [ChunkRange.all()]


def test_even_split_covers_every_key_exactly_once() -> None:
    keys = list(range(-3, 250, 7))
    ranges = plan_even(
        min(keys), max(keys), 4, distribution_factor(min(keys), max(keys), len(keys))
    )
    assert_partition(ranges, keys)


def test_distribution_factor_is_one_for_gap_free_keys() -> None:
    assert distribution_factor(1, 100, 100) == 1.0
    assert distribution_factor(101, 2000, 21) == pytest.approx(1900 / 21)


# -- uneven split --------------------------------------------------------------------------------


def test_uneven_split_of_keys_with_gaps_gives_exact_ranges() -> None:
    # chunk_size 4 from 101: max(101,102,103,109)=109; from 109: max(109,110,111,118)=118;
    # from 118: max(118,121,123,1009)=1009; then 1012, 1015, 1018; from 1018: max(1018,1019,2000)
    # =2000; from 2000 only 2000 itself, so the next key above it: none → open last chunk.
    table = KeyList(CUSTOMER_IDS, chunk_size=4)
    ranges = table.plan()
    assert ranges == [
        ChunkRange(None, 109),
        ChunkRange(109, 118),
        ChunkRange(118, 1009),
        ChunkRange(1009, 1012),
        ChunkRange(1012, 1015),
        ChunkRange(1015, 1018),
        ChunkRange(1018, 2000),
        ChunkRange(2000, None),
    ]
    assert_partition(ranges, CUSTOMER_IDS)


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 8, 20, 21, 22, 100])
def test_uneven_split_of_keys_with_gaps_puts_every_key_in_one_chunk(chunk_size: int) -> None:
    table = KeyList(CUSTOMER_IDS, chunk_size)
    assert_partition(table.plan(), CUSTOMER_IDS)


def test_uneven_split_with_chunk_size_one_gives_one_key_per_chunk() -> None:
    table = KeyList([3, 7, 9], chunk_size=1)
    assert table.plan() == [ChunkRange(None, 7), ChunkRange(7, 9), ChunkRange(9, None)]


def test_uneven_split_of_skewed_first_key_column_never_makes_a_zero_width_chunk() -> None:
    # Split column = first column of a composite key; 25 rows share the value 1.
    rows = [(1, b) for b in range(25)] + [(k, 0) for k in (2, 3, 4, 5)] + [(6, b) for b in range(3)]
    split_values = [a for a, _ in rows]
    table = KeyList(split_values, chunk_size=10)
    ranges = table.plan()
    # From 1: the next 10 values are all 1 → move to the next distinct value 2. From 2:
    # max(2,3,4,5,6,6,6) = 6. From 6: only 6s → nothing above → open last chunk.
    assert ranges == [ChunkRange(None, 2), ChunkRange(2, 6), ChunkRange(6, None)]
    assert_partition(ranges, split_values)


def test_uneven_split_of_a_skewed_value_in_the_middle() -> None:
    split_values = [1, 2] + [3] * 30 + [4, 5]
    table = KeyList(split_values, chunk_size=4)
    ranges = table.plan()
    # From 1: max(1,2,3,3) = 3. From 3: only 3s in the window → next distinct 4.
    # From 4: max(4,5) = 5. From 5: alone → open last chunk.
    assert ranges == [ChunkRange(None, 3), ChunkRange(3, 4), ChunkRange(4, 5), ChunkRange(5, None)]
    assert_partition(ranges, split_values)


def test_uneven_split_of_one_row_is_one_unbounded_chunk() -> None:
    assert KeyList([42], chunk_size=10).plan() == [ChunkRange.all()]


def test_uneven_split_of_empty_table_is_one_unbounded_chunk() -> None:
    table = KeyList([], chunk_size=10)
    assert table.minimum is None
    assert table.plan() == [ChunkRange.all()]


def test_uneven_split_when_rows_vanish_after_planning_the_minimum() -> None:
    # MIN(k) was 5, but the rows were deleted before the first chunk query.
    ranges = plan_uneven(5, lambda start: None, lambda key: None)
    assert ranges == [ChunkRange.all()]


def test_uneven_split_under_ci_collation_keeps_case_variants_together() -> None:
    keys = ["apple", "Apple", "APPLE", "banana", "Banana", "cherry"]
    table = KeyList(keys, chunk_size=2, sort_key=str.casefold)
    ranges = table.plan()
    # From 'apple': window (apple, Apple) is one collation value → next distinct 'banana'.
    # From 'banana': (banana, Banana) → 'cherry'. From 'cherry': alone → open last chunk.
    assert ranges == [
        ChunkRange(None, "banana"),
        ChunkRange("banana", "cherry"),
        ChunkRange("cherry", None),
    ]
    assert_partition(ranges, keys, str.casefold)


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 4, 7])
def test_uneven_split_never_separates_a_and_upper_a_under_ci_collation(chunk_size: int) -> None:
    rng = random.Random(chunk_size)
    letters = "abcdefgh"
    keys = [rng.choice([c, c.upper()]) + rng.choice(["", "x", "X"]) for c in letters * 4]
    table = KeyList(keys, chunk_size, sort_key=str.casefold)
    ranges = table.plan()
    assert_partition(ranges, keys, str.casefold)
    for key in keys:
        variants = {key.lower(), key.upper(), key.capitalize()}
        holders = {chunk_of(ranges, v, str.casefold) for v in variants}
        assert len(holders) == 1, f"case variants of {key!r} fall in chunks {holders}"


def test_uneven_split_covers_random_key_sets() -> None:
    rng = random.Random(7)
    for _ in range(200):
        keys = [rng.randrange(0, 60) for _ in range(rng.randrange(1, 80))]
        table = KeyList(keys, chunk_size=rng.randrange(1, 12))
        assert_partition(table.plan(), keys)


# -- chunk_of ------------------------------------------------------------------------------------


def test_chunk_of_finds_the_boundary_owner() -> None:
    ranges = plan_even(1, 100, 10, 1.0)
    assert chunk_of(ranges, -5) == 0
    assert chunk_of(ranges, 10) == 0
    assert chunk_of(ranges, 11) == 1
    assert chunk_of(ranges, 90) == 8
    assert chunk_of(ranges, 91) == 9
    assert chunk_of(ranges, 10**9) == 9


def test_chunk_of_empty_plan_is_none() -> None:
    assert chunk_of([], 5) is None


def test_chunk_of_agrees_with_a_linear_scan_over_random_keys() -> None:
    rng = random.Random(11)
    for _ in range(100):
        low = rng.randrange(-1000, 1000)
        high = low + rng.randrange(0, 3000)
        ranges = plan_even(low, high, rng.randrange(1, 50), 1.0)
        for _ in range(50):
            key = rng.randrange(low - 100, high + 100)
            linear = [i for i, r in enumerate(ranges) if r.contains(key)]
            assert len(linear) == 1
            assert chunk_of(ranges, key) == linear[0]


def test_chunk_of_agrees_with_a_linear_scan_under_ci_collation() -> None:
    rng = random.Random(13)
    alphabet = "aAbBcCdDeE"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4))) for _ in range(120)]
    ranges = KeyList(keys, chunk_size=9, sort_key=str.casefold).plan()
    probes = keys + ["".join(rng.choice(alphabet) for _ in range(3)) for _ in range(200)]
    for key in probes:
        linear = [i for i, r in enumerate(ranges) if r.contains(key, str.casefold)]
        assert len(linear) == 1
        assert chunk_of(ranges, key, str.casefold) == linear[0]


# -- ledger encoding of keys ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        0,
        -(2**63),
        2**64 - 1,
        "",
        "Zoë 🦆",
        '{"decimal": "1"}',
        Decimal("1.10"),
        Decimal("-0.000001"),
        datetime(2024, 2, 29, 23, 59, 59, 999_999),
        date(1970, 1, 1),
        b"\x00\xff\x10",
    ],
)
def test_split_key_round_trips_through_the_ledger_encoding(key: Any) -> None:
    decoded = decode_key(encode_key(key))
    assert decoded == key
    assert type(decoded) is type(key)
    if isinstance(key, Decimal):
        assert str(decoded) == str(key)


def test_missing_split_key_encodes_as_null() -> None:
    assert encode_key(None) is None
    assert decode_key(None) is None


def test_boolean_split_key_is_refused() -> None:
    with pytest.raises(TypeError, match="boolean"):
        encode_key(True)


def test_unsupported_split_key_type_is_refused() -> None:
    with pytest.raises(TypeError, match="float"):
        encode_key(1.5)
