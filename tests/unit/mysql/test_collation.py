"""`padded`: a PAD SPACE key orders like its weights followed by endless space weights.

The reference pads both weight strings with spaces to a common length and compares bytes, which
is what the server's PAD SPACE comparison does unit by unit; the weights mix units below, equal to
and above the space at every position, for the unit widths the servers use (latin1's 1 byte,
UCA's 2, utf8mb4_bin's 3).
"""

from __future__ import annotations

import itertools
import random

import pytest

from binlake.mysql.collation import padded


def _sign(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


def _padded_sign(a: bytes, b: bytes, space: bytes) -> int:
    units = max(len(a), len(b)) // len(space)
    return _sign(
        a + space * (units - len(a) // len(space)), b + space * (units - len(b) // len(space))
    )


def _weights(rng: random.Random, width: int, count: int) -> list[bytes]:
    units = [
        v.to_bytes(width, "big") for v in (0x01, 0x09, 0x20, 0x21, 0x41, 0x120)[: 5 + (width > 1)]
    ]
    return sorted({b"".join(rng.choices(units, k=rng.randrange(6))) for _ in range(count)})


@pytest.mark.parametrize("width", [1, 2, 3])
def test_padded_keys_order_like_weights_padded_with_spaces(width: int) -> None:
    space = (0x20).to_bytes(width, "big")
    values = _weights(random.Random(width), width, 300)
    for a, b in itertools.product(values, repeat=2):
        assert _sign(padded(a, space), padded(b, space)) == _padded_sign(a, b, space), (a, b)


def test_padded_levels_concatenate_into_level_by_level_order() -> None:
    """Under a multi-level collation the first level decides, then the next: concatenated keys
    must not let a longer first level spill into the comparison of the second."""
    spaces = (b"\x02\x09", b"\x00\x20")
    rng = random.Random(7)
    firsts, seconds = _weights(rng, 2, 40), _weights(rng, 2, 15)
    values = [(f, s) for f in firsts for s in seconds]
    for (a1, a2), (b1, b2) in itertools.product(values, repeat=2):
        expected = _padded_sign(a1, b1, spaces[0]) or _padded_sign(a2, b2, spaces[1])
        key_a = padded(a1, spaces[0]) + padded(a2, spaces[1])
        key_b = padded(b1, spaces[0]) + padded(b2, spaces[1])
        assert _sign(key_a, key_b) == expected, ((a1, a2), (b1, b2))
