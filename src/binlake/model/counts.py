"""Counts as binlake's lines write them: `1 chunk`, `2 chunks`, `8,096 rows`, `3 batches`."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`number` with thousands separators and its noun, singular only for one; `plural` where
    adding an `s` is wrong (`batch` → `batches`)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"
