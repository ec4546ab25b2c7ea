"""Counts in binlake's lines: before, "1 chunks", "1 tables"."""

from __future__ import annotations

import pytest

from binlake.model.counts import counted


@pytest.mark.parametrize(
    ("number", "noun", "plural", "text"),
    [
        (0, "chunk", None, "0 chunks"),
        (1, "chunk", None, "1 chunk"),
        (2, "table", None, "2 tables"),
        (8096, "row", None, "8,096 rows"),
        (1, "batch", "batches", "1 batch"),
        (3, "batch", "batches", "3 batches"),
    ],
)
def test_a_count_takes_its_noun_in_the_singular_only_for_one(
    number: int, noun: str, plural: str | None, text: str
) -> None:
    assert counted(number, noun, plural) == text
