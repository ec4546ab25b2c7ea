"""GTID positions: MariaDB's `domain-server-sequence` lists, compared and advanced."""

from __future__ import annotations

from binlake.mysql.gtids import format_position, gtid_after, parse_position, same_position


def test_a_position_is_one_gtid_per_domain_in_any_order() -> None:
    assert parse_position("0-1-100,1-2-7") == {0: (1, 100), 1: (2, 7)}
    assert parse_position("") == {}
    assert same_position("1-2-7,0-1-100", "0-1-100, 1-2-7")
    assert not same_position("0-1-100", "0-2-100")  # another server wrote seq 100
    assert format_position({1: (2, 7), 0: (1, 100)}) == "0-1-100,1-2-7"


def test_a_transaction_advances_only_its_own_domain() -> None:
    assert gtid_after("0-1-100,1-2-7", "1-3-8") == "0-1-100,1-3-8"
    assert gtid_after("0-1-100", "2-1-1") == "0-1-100,2-1-1"
    assert gtid_after("", "0-1-1") == "0-1-1"
