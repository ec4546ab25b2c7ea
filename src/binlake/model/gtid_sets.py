"""MySQL GTID sets: the transactions a MySQL server holds, as one immutable value.

MySQL names a transaction `uuid:n`: the server it was first committed on and its sequence
number there (the GNO); since 8.3 (8.4 LTS) also `uuid:tag:n`, a tag naming a group of
transactions. A GTID set (`@@gtid_executed`, `@@gtid_purged`, a binlog's PREVIOUS_GTIDS event,
where a GTID binlog dump starts) holds GNO ranges per (uuid, tag) pair, MySQL's TSID. It names
a point in history that every server holding the same transactions agrees on, whatever its
binlog coordinates: what a `domain-server-sequence` position (`binlake.mysql.gtids`) is on
MariaDB. Tagged and untagged GTIDs of one UUID are different transactions and never merge.

**Text.** Members are separated by commas, with any whitespace around the parts (the server
prints `,\\n` between UUIDs); UUIDs and tags are case-insensitive and kept in lower case, as
the server keeps them. The canonical text is the one the server prints: one member per UUID,
UUIDs ascending, in each the untagged intervals first, then every tag ascending with its
intervals, intervals ascending and merged (`uuid:1-5:7:a_tag:1-3,uuid2:9`). The manual
(MySQL 8.4, 19.1.3.1 GTID Format and Storage,
https://dev.mysql.com/doc/refman/8.4/en/replication-gtids-concepts.html) gives the forms
`UUID:NUMBER` and `UUID:TAG:NUMBER` and the tag rules, but states no order; its example of two
tags of one UUID, written as two members, is not what the server prints: MySQL Bug #116789
(https://bugs.mysql.com/bug.php?id=116789, verified) reads that example back from the server as
`3e11fa47-71ca-11e1-9e33-c80aa9429562:domain_1:1-3:15-21:domain_2:8-52`. The order is the
server's `mysql::gtid::Gtid_set::to_string` (libs/mysql/gtid/gtidset.cpp), which walks a
`std::map<Uuid, std::map<Tag, std::set<Gno_interval>>>`: the empty tag sorts first.

**Binary.** The body of a PREVIOUS_GTIDS event (checksum stripped) and the data of
COM_BINLOG_DUMP_GTID: a u64 TSID count, then per TSID its 16-byte UUID, in the tagged format its
tag, a u64 interval count and `[start, end)` u64 pairs (little-endian). The tagged format
(MySQL 8.3+) marks itself in the count word: byte 0 and byte 7 hold the format (1), bytes 1-6
the count; a tag is a length in MySQL's variable-length integer then its characters, an empty
one for an untagged TSID. `encode` writes the untagged format unless a member has a tag, the
form every server since 5.6 reads; `decode` reads both and refuses what the server's decoder
refuses (`Gtid_set::add_gtid_encoding`: intervals empty, out of order, touching, or past the
largest GNO; bytes left over).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from uuid import UUID

#: The largest GNO. MySQL's `GNO_END` (INT64_MAX) is one past it and no GTID: an interval's end
#: in the binary form, `[start, end)`, still fits a signed 64-bit integer.
MAX_GNO = 2**63 - 2
_GNO_END = MAX_GNO + 1

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: A tag as MySQL accepts it (`mysql::gtid::Tag`, at most `tag_max_length` = 32 characters).
_TAG = re.compile(r"[a-z_][a-z0-9_]{0,31}")
_INTERVAL = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?")

_U64 = struct.Struct("<Q")
_START_END = struct.Struct("<QQ")
#: The format byte of the tagged binary form.
_TAGGED = 1
_TSID_COUNT_MASK = 2**48 - 1

Tsid = tuple[str, str]  # (uuid, tag); the tag is "" for an untagged GTID
Interval = tuple[int, int]  # the first and the last GNO, both included
Member = tuple[Tsid, tuple[Interval, ...]]


class GtidSetError(ValueError):
    """A GTID, GTID set or binary GTID set encoding that MySQL would not accept."""


@dataclass(frozen=True, slots=True)
class Gtid:
    """One transaction's GTID: `uuid:n`, or `uuid:tag:n` for a tagged one (MySQL 8.4)."""

    uuid: str
    gno: int
    tag: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "uuid", _uuid(self.uuid))
        object.__setattr__(self, "tag", _tag(self.tag) if self.tag else "")
        _interval(self.gno, self.gno)  # 1 <= gno <= MAX_GNO

    @classmethod
    def parse(cls, text: str) -> Gtid:
        """`uuid:n` or `uuid:tag:n`, any case, whitespace around the parts."""
        parts = [part.strip() for part in text.split(":")]
        try:
            if len(parts) not in (2, 3) or not parts[-1].isdigit() or not parts[-1].isascii():
                raise GtidSetError("expected uuid:n or uuid:tag:n")
            tag = _tag(parts[1]) if len(parts) == 3 else ""
            return cls(parts[0], _gno(parts[-1]), tag)
        except GtidSetError as exc:
            raise GtidSetError(f"malformed GTID {text!r}: {exc}") from None

    @property
    def tsid(self) -> Tsid:
        return (self.uuid, self.tag)

    def __str__(self) -> str:
        return ":".join(filter(None, (self.uuid, self.tag, str(self.gno))))


@dataclass(frozen=True, slots=True)
class GtidSet:
    """A MySQL GTID set. `members` is canonical whatever it was built from: TSIDs validated,
    in lower case and ascending, each TSID once with its intervals merged and ascending, none
    empty. So two sets are equal exactly when they hold the same GTIDs, however spelt."""

    members: tuple[Member, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", _canonical(self.members))

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """A GTID set's text as the server prints or reads it; "" (or only whitespace and
        commas) is the empty set. Raises `GtidSetError` naming the first malformed member."""
        found: list[Member] = []
        for member in filter(None, (part.strip() for part in text.split(","))):
            try:
                found.extend(((tsid, (interval,)) for tsid, interval in _parse_member(member)))
            except GtidSetError as exc:
                raise GtidSetError(f"malformed GTID set member {member!r}: {exc}") from None
        return cls(tuple(found))

    def __str__(self) -> str:
        """The canonical text (the module's docstring says which and why)."""
        return ",".join(
            _format_uuid(uuid, group) for uuid, group in groupby(self.members, _member_uuid)
        )

    def __repr__(self) -> str:
        return f"GtidSet.parse({str(self)!r})"

    def __bool__(self) -> bool:
        return bool(self.members)

    def union(self, other: GtidSet) -> GtidSet:
        return GtidSet(self.members + other.members)

    def difference(self, other: GtidSet) -> GtidSet:
        """The GTIDs of this set that `other` does not hold."""
        removed = dict(other.members)
        return GtidSet(
            tuple((tsid, _subtracted(kept, removed.get(tsid, ()))) for tsid, kept in self.members)
        )

    def issuperset(self, other: GtidSet) -> bool:
        """Whether this set holds every GTID of `other`."""
        return not other.difference(self)

    def contains(self, gtid: Gtid | str) -> bool:
        """Whether this set holds the transaction `gtid` (a `Gtid` or its text)."""
        found = _as_gtid(gtid)
        intervals = dict(self.members).get(found.tsid, ())
        return any(first <= found.gno <= last for first, last in intervals)

    def add(self, gtid: Gtid | str) -> GtidSet:
        """The set after the transaction `gtid` (a `Gtid` or its text) is applied."""
        found = _as_gtid(gtid)
        return GtidSet((*self.members, (found.tsid, ((found.gno, found.gno),))))

    def encode(self) -> bytes:
        """The binary form (see the module's docstring): untagged unless a member has a tag."""
        tagged = any(tag for (_, tag), _ in self.members)
        encoded = bytearray(_U64.pack(_count_word(len(self.members), tagged)))
        for (uuid, tag), intervals in self.members:
            encoded += UUID(uuid).bytes
            if tagged:
                encoded += _encoded_tag(tag)
            encoded += _U64.pack(len(intervals))
            for first, last in intervals:
                encoded += _START_END.pack(first, last + 1)
        return bytes(encoded)

    @classmethod
    def decode(cls, data: bytes) -> GtidSet:
        """A set from its binary form, untagged or tagged; `GtidSetError` on bytes the server
        would refuse, truncated ones, or bytes left after the set."""
        reader = _Reader(data)
        tagged, count = _format_and_count(reader.u64("the TSID count"))
        members = tuple(_decoded_member(reader, tagged) for _ in range(count))
        if reader.remaining:
            raise GtidSetError(f"{reader.remaining} bytes after the GTID set encoding")
        return cls(members)


def is_gtid_set(text: str) -> bool:
    """Whether a GTID position's text is a MySQL GTID set (or one GTID) rather than a MariaDB
    position (`0-1-100,1-2-7`): every member names a UUID followed by a colon, which a
    MariaDB position never holds. The one test of a position's flavour."""
    return ":" in text


def _uuid(text: str) -> str:
    uuid = text.lower()
    if not (text.isascii() and _UUID.fullmatch(uuid)):
        raise GtidSetError(f"{text!r} is not a UUID (8-4-4-4-12 hexadecimal digits)")
    return uuid


def _tag(text: str) -> str:
    """A tag in lower case, as MySQL keeps it (tags are case-insensitive). ASCII is checked
    before lowering: `str.lower` maps some other letters into ASCII (the Kelvin sign to `k`)."""
    tag = text.lower()
    if not (text.isascii() and _TAG.fullmatch(tag)):
        raise GtidSetError(
            f"{text!r} is not a GTID tag (a letter or _, then up to 31 letters, digits or _)"
        )
    return tag


def _gno(digits: str) -> int:
    """A GNO's decimal digits as a number; past 19 significant digits it is beyond `MAX_GNO`
    (and `int` would refuse a long enough string with a plain ValueError)."""
    if len(digits.lstrip("0")) > len(str(MAX_GNO)):
        raise GtidSetError(f"GNO {digits} is beyond the largest, {MAX_GNO}")
    return int(digits)


def _interval(first: int, last: int) -> Interval:
    if not 1 <= first <= last <= MAX_GNO:
        raise GtidSetError(f"interval {first}-{last} is not within 1-{MAX_GNO} in order")
    return (first, last)


def _parse_member(member: str) -> Iterator[tuple[Tsid, Interval]]:
    """`uuid:1-3:7:tag:1-2:tag2:5`: a UUID, its untagged intervals, then each tag with its own.
    Every tag, and the member, needs at least one interval (the server never prints less)."""
    uuid_text, *items = (item.strip() for item in member.split(":"))
    uuid, tag, counted = _uuid(uuid_text), "", 0
    for item in items:
        if match := _INTERVAL.fullmatch(item):
            first = _gno(match.group(1))
            last = _gno(match.group(2)) if match.group(2) else first
            counted += 1
            yield (uuid, tag), _interval(first, last)
        elif tag and not counted:
            raise GtidSetError(f"tag {tag!r} has no interval")
        else:
            tag, counted = _tag(item), 0
    if not counted:
        raise GtidSetError(f"{tag or uuid!r} has no interval")


def _canonical(members: Iterable[Member]) -> tuple[Member, ...]:
    by_tsid: dict[Tsid, list[Interval]] = {}
    for (uuid, tag), intervals in members:
        tsid = (_uuid(uuid), _tag(tag) if tag else "")
        by_tsid.setdefault(tsid, []).extend(_interval(*interval) for interval in intervals)
    return tuple((tsid, merged) for tsid in sorted(by_tsid) if (merged := _merged(by_tsid[tsid])))


def _merged(intervals: list[Interval]) -> tuple[Interval, ...]:
    """Ascending and merged: overlapping or touching intervals (`1-3`, `4-5`) become one."""
    merged: list[Interval] = []
    for first, last in sorted(intervals):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return tuple(merged)


def _subtracted(kept: tuple[Interval, ...], removed: tuple[Interval, ...]) -> tuple[Interval, ...]:
    """`kept` without the GNOs of `removed` (both ascending and merged)."""
    remaining: list[Interval] = []
    for first, last in kept:
        for removed_first, removed_last in removed:
            if removed_last < first or removed_first > last:
                continue
            if removed_first > first:
                remaining.append((first, removed_first - 1))
            first = removed_last + 1
        if first <= last:
            remaining.append((first, last))
    return tuple(remaining)


def _member_uuid(member: Member) -> str:
    return member[0][0]


def _format_uuid(uuid: str, members: Iterable[Member]) -> str:
    parts = [uuid]
    for (_, tag), intervals in members:
        if tag:
            parts.append(tag)
        parts.extend(
            str(first) if first == last else f"{first}-{last}" for first, last in intervals
        )
    return ":".join(parts)


def _as_gtid(gtid: Gtid | str) -> Gtid:
    return gtid if isinstance(gtid, Gtid) else Gtid.parse(gtid)


def _count_word(count: int, tagged: bool) -> int:
    return ((_TAGGED << 56) | (count << 8) | _TAGGED) if tagged else count


def _format_and_count(word: int) -> tuple[bool, int]:
    """(tagged, TSID count) from the encoding's first 8 bytes."""
    if word >> 56 == 0:
        return False, word
    if word >> 56 == _TAGGED and word & 0xFF == _TAGGED:
        return True, (word >> 8) & _TSID_COUNT_MASK
    raise GtidSetError(f"unknown GTID set encoding (first 8 bytes {word:#018x})")


def _encoded_tag(tag: str) -> bytes:
    """The length in MySQL's variable-length integer, then the characters. A tag has at most 32
    characters, so the length takes the one-byte form: the value shifted left by one."""
    return bytes((len(tag) << 1,)) + tag.encode("ascii")


class _Reader:
    """Reads an encoding front to back; a read past its end is a truncated encoding."""

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self._pos = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def take(self, size: int, what: str) -> bytes:
        if size > self.remaining:
            raise GtidSetError(f"GTID set encoding truncated in {what} at byte {self._pos}")
        self._pos += size
        return self._data[self._pos - size : self._pos]

    def u64(self, what: str) -> int:
        value: int = _U64.unpack(self.take(_U64.size, what))[0]
        return value


def _decoded_member(reader: _Reader, tagged: bool) -> Member:
    uuid = str(UUID(bytes=reader.take(16, "a UUID")))
    tag = _decoded_tag(reader) if tagged else ""
    intervals: list[Interval] = []
    end_before = 0
    for _ in range(reader.u64("an interval count")):
        start, end = _START_END.unpack(reader.take(_START_END.size, "an interval"))
        if not end_before < start < end <= _GNO_END:
            raise GtidSetError(
                f"interval [{start}, {end}) of {uuid} is empty, out of order, touches the one "
                f"before it or ends past {_GNO_END}"
            )
        intervals.append((start, end - 1))
        end_before = end
    return (uuid, tag), tuple(intervals)


def _decoded_tag(reader: _Reader) -> str:
    """A tag's length byte and characters ("" for an untagged TSID). A length with the low bit
    set takes more than one byte: 128 or more, longer than any tag."""
    (length,) = reader.take(1, "a tag's length")
    if length & 1:
        raise GtidSetError("a tag longer than 127 bytes: not a GTID tag")
    text = reader.take(length >> 1, "a tag").decode("ascii", errors="replace")
    return _tag(text) if text else ""
