"""GTID positions: MariaDB's `domain-server-sequence` lists and MySQL's GTID sets, compared and
advanced, read from a server and found again on another (a failover, `lineage`).

No MySQL server runs here: a fake one answers the statements binlake sends (`FakeMySQL`), and
real MySQL bytes come from the binlog files in fixtures/mysql-binlogs/.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pymysql
import pytest
from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, NotImplementedEvent
from pymysqlreplication.gtid import GtidSet as LibraryGtidSet

from binlake.config.settings import Config, SourceConfig
from binlake.errors import BinlogResetError
from binlake.lake.files import LakeFiles
from binlake.model.gtid_sets import GtidSet, is_gtid_set
from binlake.model.offsets import BinlogOffset
from binlake.mysql import gtids, lineage, replication, server, transactions
from binlake.mysql.binlog_files import read_binlog_file
from binlake.mysql.gtids import (
    format_position,
    gtid_after,
    gtid_after_event,
    parse_position,
    same_position,
)
from binlake.mysql.lineage import Lineage, SnapshotReads, current_lineage, locate

FIXTURES = Path(__file__).parents[3] / "fixtures" / "mysql-binlogs"
A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "58cf6502-63db-11ed-8079-0242ac110002"
C = "97c7af02-4c50-11ec-acd8-681842034964"


# MariaDB positions: unchanged.


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


# MySQL GTID sets as positions.


def test_a_position_s_flavour_is_told_by_its_text() -> None:
    assert is_gtid_set(f"{A}:1-5") and is_gtid_set(f"{A}:tag:3")
    assert not is_gtid_set("0-1-100,1-2-7") and not is_gtid_set("")
    assert not same_position(f"{A}:1", "0-1-1")  # never the same across flavours


def test_mysql_sets_are_the_same_position_however_spelt() -> None:
    server = f"{B}:1-3:5,\n{A}:1-10:t:1-2"  # as the server prints a few UUIDs: `,\n`
    assert same_position(server, f"{A.upper()}:1-5:6-10:T:1:2,{B}:5:1-3")
    assert not same_position(server, f"{A}:1-10,{B}:1-3:5")  # without the tagged ones
    assert not same_position(f"{A}:1-10", f"{A}:1-9")


def test_a_mysql_transaction_joins_the_set_under_its_own_uuid_and_tag() -> None:
    position = f"{A}:1-10,{B}:1-3"
    assert gtid_after(position, f"{B}:4") == f"{A}:1-10,{B}:1-4"
    assert gtid_after(position, f"{C}:1") == f"{A}:1-10,{B}:1-3,{C}:1"
    # A tagged GTID is another transaction than the untagged one of the same number.
    assert gtid_after(position, f"{A}:Batch:11") == f"{A}:1-10:batch:11,{B}:1-3"
    assert gtid_after(f"{A}:1-10:batch:11", f"{A}:11") == f"{A}:1-11:batch:11"
    assert gtid_after(f"{A}:1-3:5", f"{A}:4") == f"{A}:1-5"  # the gap closes


def _gtid_event(uuid: str, gno: int) -> GtidEvent:
    """A GtidEvent as python-mysql-replication decodes one: `sid` bytes and `gno`."""
    event = GtidEvent.__new__(GtidEvent)
    event.sid, event.gno = bytes.fromhex(uuid.replace("-", "")), gno
    return event


def _undecoded(event_type: int) -> NotImplementedEvent:
    event = NotImplementedEvent.__new__(NotImplementedEvent)
    event.event_type = event_type
    return event


#: MySQL 9.6.0's tagged GTID event (fixtures/mysql-binlogs, at offset 245: 83 bytes with its
#: checksum), and the GTID it holds.
TAGGED_FILE, TAGGED_AT, TAGGED_SIZE = "binlog_transaction_with_GTID_TAG.000001", 245, 83
TAGGED = "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"


def _tagged(log_pos: int = 0) -> NotImplementedEvent:
    """The tagged GTID event as python-mysql-replication passes it on from a live dump:
    undecoded, its bytes still in the packet they came in (an OK byte first)."""
    raw = (FIXTURES / TAGGED_FILE).read_bytes()[TAGGED_AT : TAGGED_AT + TAGGED_SIZE]
    event = _undecoded(gtids.GTID_TAGGED_LOG_EVENT)
    event.event_size = TAGGED_SIZE - 19 - 4
    received = type("Received", (), {"_data": b"\x00" + raw})
    event.packet = type("Packet", (), {"packet": received, "log_pos": log_pos, "event_size": 83})
    return event


def test_a_read_carries_the_set_through_gtid_events_and_loses_it_at_an_undecoded_one() -> None:
    assert gtid_after_event(f"{A}:1-10", _gtid_event(A, 11)) == f"{A}:1-11"
    assert gtid_after_event(f"{A}:1-10", _gtid_event(B, 1)) == f"{A}:1-10,{B}:1"
    mariadb = MariadbGtidEvent.__new__(MariadbGtidEvent)
    mariadb.gtid = "0-2-101"
    assert gtid_after_event("0-1-100,1-2-7", mariadb) == "0-2-101,1-2-7"
    # 1.0.17 decodes no tagged GTID event (42): binlake reads its GTID from its bytes.
    tagged = "55778904-0299-11f1-b1b8-4ef0c4956feb:1-2:mytag:1-3"
    assert gtid_after_event(tagged.replace("1-3", "1-2"), _tagged()) == tagged
    # An anonymous transaction (34) has no GTID: the set no longer names the place.
    assert gtid_after_event(f"{A}:1-10", _undecoded(34)) == ""


def _file_positions(name: str) -> tuple[str, str]:
    """A fixture file's PREVIOUS_GTIDS and the set after its last transaction, carried through
    each GTID event's text as binlake_files reads it (tagged ones included)."""
    previous, position = "", ""
    for event in read_binlog_file(FIXTURES / name):
        if event.gtid_set is not None:
            previous = position = event.gtid_set
        elif event.gtid is not None:
            position = gtid_after(position, event.gtid)
    return previous, position


@pytest.mark.parametrize(
    ("name", "previous", "after"),
    [
        # 5.7.40 in GTID mode: ten transactions after 1-52.
        ("mysql-bin.000080", f"{B}:1-52", f"{B}:1-62"),
        # 8.0.31, with transactions compressed: their GTID events stay outside the payload.
        (
            "mysql-bin.000057",
            "76f3e7be-6720-11ed-9cad-0242ac110002:1-10",
            "76f3e7be-6720-11ed-9cad-0242ac110002:1-13",
        ),
        # 9.6.0: a tagged transaction after a tagged PREVIOUS_GTIDS (upstream asserts mytag:3).
        (
            "binlog_transaction_with_GTID_TAG.000001",
            "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2",
            "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-3",
        ),
        # 8.0.26 from an empty set: the first file of a server.
        ("binlog-invisible-columns.000001", "", f"{C}:1-5"),
    ],
)
def test_real_binlog_files_carry_their_previous_gtids_to_the_executed_set(
    name: str, previous: str, after: str
) -> None:
    assert _file_positions(name) == (previous, after)


def test_the_library_s_own_gtid_events_from_a_real_file_advance_the_set() -> None:
    """The live path: python-mysql-replication's GtidEvent objects, decoded from real bytes."""
    position = f"{B}:1-52"
    for event in read_binlog_file(FIXTURES / "mysql-bin.000080"):
        if isinstance(event.decoded, GtidEvent):
            position = gtid_after_event(position, event.decoded)
    assert position == f"{B}:1-62"


def test_a_dump_sends_the_set_as_our_encoding_says() -> None:
    """python-mysql-replication encodes COM_BINLOG_DUMP_GTID's set from the text binlake
    passes; for untagged sets of several UUIDs its bytes are the server's binary form."""
    text = str(GtidSet.parse(f"{B}:1-3:5-9,{A}:1-10:12,{C}:7"))
    assert LibraryGtidSet(text).encoded() == GtidSet.parse(text).encode()


def test_a_gtid_set_opens_a_mysql_gtid_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[dict[str, Any]] = []
    monkeypatch.setattr(replication, "BinLogStreamReader", lambda **kw: opened.append(kw))
    monkeypatch.setattr(replication, "source_password", lambda source: "secret")
    source = SourceConfig(database="shop")
    replication.open_stream(source, 7, f"{A}:1-10")
    replication.open_stream(source, 7, "0-1-100")
    assert [(o["is_mariadb"], o["auto_position"]) for o in opened] == [
        (False, f"{A}:1-10"),
        (True, "0-1-100"),
    ]


# A fake MySQL server: the statements binlake sends, its binlog, a GTID dump of it.

_FDE, _PREVIOUS, _GTID, _ROWS, _XID = 126, 71, 79, 120, 31  # event sizes


class FakeMySQL:
    """A MySQL server with gtid_mode=ON: `files` maps each binlog file to its transactions'
    GTIDs; the first file's PREVIOUS_GTIDS is `purged`, each later one's the set before it."""

    def __init__(
        self, server_id: int, files: dict[str, list[str]], purged: str = "", mode: str = "ON"
    ) -> None:
        self.server_id, self.mode = server_id, mode
        self.events: dict[str, list[tuple[int, str, str, int]]] = {}
        self.transactions: list[tuple[str, int, str]] = []  # file, begins, gtid
        executed = GtidSet.parse(purged)
        for name, file_gtids in files.items():
            events = [(4, "Format_desc", "Server ver: 8.4.3, Binlog ver: 4", 4 + _FDE)]
            events.append((4 + _FDE, "Previous_gtids", str(executed), 4 + _FDE + _PREVIOUS))
            for gtid in file_gtids:
                begins = events[-1][3]
                self.transactions.append((name, begins, gtid))
                info = f"SET @@SESSION.GTID_NEXT= '{gtid}'"
                events.append((begins, "Gtid", info, begins + _GTID))
                events.append((begins + _GTID, "Write_rows", "table_id: 90", begins + 199))
                events.append((begins + 199, "Xid", "COMMIT /* xid=9 */", begins + 199 + _XID))
                executed = executed.add(gtid)
            self.events[name] = events
        self.executed, self.owned = str(executed), list[str]()
        self.head = BinlogOffset(name, self.events[name][-1][3])
        self.queries: list[str] = []
        self.dumps: list[str] = []

    def query(self, conn: Any, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        self.queries.append(sql)
        if sql == "SELECT @@GLOBAL.gtid_binlog_pos":
            raise pymysql.err.OperationalError(1193, "Unknown system variable 'gtid_binlog_pos'")
        answers: dict[str, Callable[[], Any]] = {
            "SELECT @@GLOBAL.gtid_mode": lambda: self.mode,
            "SELECT @@GLOBAL.gtid_executed": lambda: self.executed.replace(",", ",\n"),
            "SELECT @@GLOBAL.gtid_owned": lambda: self.owned.pop(0) if self.owned else "",
            "SELECT @@GLOBAL.server_id": lambda: self.server_id,
        }
        if sql in answers:
            return [(answers[sql](),)]
        if sql == "SHOW MASTER STATUS":
            return [(self.head.binlog_file, self.head.pos, "", "", self.executed)]
        if sql == "SHOW BINARY LOGS":
            return [(name, events[-1][3]) for name, events in self.events.items()]
        if sql.startswith("SHOW BINLOG EVENTS"):
            return self._binlog_events(*args)
        raise pymysql.err.ProgrammingError(1305, f"not on this fake MySQL: {sql}")

    def _binlog_events(self, name: str, start: int, limit: int) -> list[tuple[Any, ...]]:
        if name not in self.events:
            raise pymysql.err.OperationalError(1220, "Could not find target log")
        rows = [
            (name, p, k, self.server_id, e, i) for p, k, i, e in self.events[name] if p >= start
        ]
        return rows[:limit]

    def dump(self, source: Any, server_id: int, start: Any, **options: Any) -> FakeDump:
        """COM_BINLOG_DUMP_GTID: every transaction the set lacks, in binlog order."""
        assert is_gtid_set(start) and options["filter_non_implemented_events"] is False
        self.dumps.append(start)
        sent = GtidSet.parse(start)
        return FakeDump([t for t in self.transactions if not sent.contains(t[2])])


class FakeDump:
    def __init__(self, transactions: list[tuple[str, int, str]]) -> None:
        self.transactions, self.log_file, self.closed = transactions, "", False

    def __iter__(self) -> Iterator[Any]:
        for name, begins, gtid in self.transactions:
            self.log_file = name
            uuid, _, gno = gtid.rpartition(":")
            if gtid == TAGGED:
                event = _tagged(begins + _GTID)
            else:
                event = _gtid_event(uuid, int(gno))
                event.packet = type("Packet", (), {"log_pos": begins + _GTID, "event_size": _GTID})
            event.timestamp = 0
            yield event

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def answering(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point binlake's server statements, connections and GTID dumps at a fake server."""

    def answer(fake: FakeMySQL) -> FakeMySQL:
        @contextmanager
        def connect(source: Any, *args: Any, **kwargs: Any) -> Iterator[object]:
            yield object()

        for module in (gtids, server):
            monkeypatch.setattr(module, "query", fake.query)
        for module in (gtids, lineage):
            monkeypatch.setattr(module, "connection", connect)
        monkeypatch.setattr(gtids, "open_stream", fake.dump)
        monkeypatch.setattr(gtids, "reconnecting_read", lambda source: lambda f, *a: f(*a))
        return fake

    return answer


SOURCE = SourceConfig(database="shop")


def test_the_mysql_head_comes_with_gtid_executed_in_canonical_text(answering: Any) -> None:
    fake = answering(FakeMySQL(1, {"mysql-bin.000001": [f"{B}:1", f"{A}:1", f"{A}:t:1"]}))
    head = gtids.gtid_head(object())
    assert head == fake.head
    assert head.gtid == f"{A}:1:t:1,{B}:1"


def test_the_mysql_head_waits_out_a_transaction_between_binlog_and_commit(
    answering: Any,
) -> None:
    """A transaction is in the binlog (the head) before its GTID is in gtid_executed, owned in
    between: a head read while one is owned is read again."""
    fake = answering(FakeMySQL(1, {"mysql-bin.000001": [f"{A}:1"]}))
    fake.owned = [f"{A}:2#31"]
    assert gtids.gtid_head(object()).gtid == f"{A}:1"
    assert fake.queries.count("SHOW MASTER STATUS") == 2
    fake.owned = [f"{A}:2#31"] * 5  # never settles: no position rather than a wrong one
    assert gtids.gtid_head(object()).gtid == ""


def test_a_mysql_head_without_gtids_has_no_position(answering: Any) -> None:
    fake = answering(FakeMySQL(1, {"mysql-bin.000001": []}, mode="OFF_PERMISSIVE"))
    assert gtids.gtid_head(object()) == fake.head and not gtids.gtid_head(object()).gtid
    assert "SELECT @@GLOBAL.gtid_executed" not in fake.queries


def test_the_mysql_set_at_an_offset_is_previous_gtids_and_the_file_s_transactions(
    answering: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gtids, "_EVENTS_PER_READ", 2)  # read across pages
    fake = answering(
        FakeMySQL(
            1,
            {
                "mysql-bin.000001": [f"{A}:1", f"{A}:2"],
                "mysql-bin.000002": [f"{B}:1", f"{A}:tag:1", f"{A}:3"],
            },
            purged=f"{C}:1-100",
        )
    )
    file, ((_, second, _), (_, third, _)) = "mysql-bin.000002", fake.transactions[3:]
    at = gtids.gtid_at
    assert at(object(), BinlogOffset(file, second)) == f"{A}:1-2,{B}:1,{C}:1-100"
    assert at(object(), BinlogOffset(file, third)) == f"{A}:1-2:tag:1,{B}:1,{C}:1-100"
    assert at(object(), fake.head) == f"{A}:1-3:tag:1,{B}:1,{C}:1-100"  # the file's end
    assert at(object(), BinlogOffset(file, second + 1)) is None  # inside an event
    assert at(object(), BinlogOffset("mysql-bin.000009", 4)) is None  # not on the server


def test_an_anonymous_transaction_leaves_the_set_at_an_offset_unknown(answering: Any) -> None:
    fake = answering(FakeMySQL(1, {"mysql-bin.000001": [f"{A}:1"]}))
    events = fake.events["mysql-bin.000001"]
    events[2] = (*events[2][:2], "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'", events[2][3])
    assert gtids.gtid_at(object(), fake.head) is None


def test_a_set_is_found_where_its_first_missing_transaction_begins(answering: Any) -> None:
    fake = answering(FakeMySQL(2, {"mysql-bin.000001": [f"{A}:1", f"{B}:1", f"{A}:2"]}))
    found = gtids.offset_of_gtid(SOURCE, 9, f"{B}:1,{A}:1")
    assert found == BinlogOffset("mysql-bin.000001", fake.transactions[2][1])
    assert found is not None and found.gtid == f"{B}:1,{A}:1"
    head = gtids.offset_of_gtid(SOURCE, 9, f"{A}:1-2,{B}:1")  # the whole history: the head
    assert head == fake.head and len(fake.dumps) == 1


def test_a_server_lacking_part_of_the_set_does_not_hold_it(answering: Any) -> None:
    """A GTID dump would send what the set lacks from wherever; the server must hold the set."""
    fake = answering(FakeMySQL(2, {"mysql-bin.000001": [f"{A}:1", f"{A}:3"]}))
    assert gtids.offset_of_gtid(SOURCE, 9, f"{A}:1-2") is None
    assert not gtids.holds(SOURCE, 9, f"{A}:1-2")
    assert gtids.holds(SOURCE, 9, f"{A}:1,{A}:3")
    assert fake.dumps == []


def test_a_tagged_set_is_found_by_a_dump(answering: Any) -> None:
    """A set holding a tagged GTID (MySQL 8.4) is sent in a GTID dump like any other: the
    position after the tagged transaction is found, where the set ends."""
    uuid = TAGGED.split(":")[0]
    file = "mysql-bin.000001"
    fake = answering(FakeMySQL(2, {file: [f"{uuid}:1", TAGGED, f"{uuid}:2", f"{uuid}:3"]}))
    position = f"{uuid}:1:mytag:3"
    found = gtids.offset_of_gtid(SOURCE, 9, position)
    assert found is not None and found.gtid == position
    assert found.pos == fake.transactions[2][1]  # where the third transaction begins
    assert fake.dumps == [position]


class _Server:
    """The stream connection python-mysql-replication opens for a dump: what it writes kept,
    a MySQL 8.4 server's answers to its statements (checksums on), an OK to each packet."""

    def __init__(self, **settings: Any) -> None:
        self.written: list[bytes] = []
        self._next_seq_id = 0

    def cursor(self) -> Any:
        return self

    def execute(self, sql: str, args: Any = None) -> None:
        self.sql = sql

    def fetchone(self) -> tuple[str, str]:
        return ("binlog_checksum", "CRC32")

    def close(self) -> None:
        """Nothing to close."""

    def _write_bytes(self, data: bytes) -> None:
        self.written.append(data)

    def _read_packet(self) -> Any:
        return pymysql.protocol.MysqlPacket(b"\x00\x00\x00\x02\x00\x00\x00", "utf8")


def test_the_library_s_dump_sends_a_tagged_set_as_mysql_writes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The COM_BINLOG_DUMP_GTID packet python-mysql-replication writes for binlake's dump from
    MySQL 9.6.0's tagged set ends with the set's binary form byte for byte as that server wrote
    it in its PREVIOUS_GTIDS event (fixtures/mysql-binlogs), the packet's length field counting
    it; its own encoder knows no tags."""
    (previous,) = [
        e for e in read_binlog_file(FIXTURES / "binlog_transaction_with_GTID_TAG.000001")
        if e.gtid_set is not None
    ]  # fmt: skip
    raw = (FIXTURES / "binlog_transaction_with_GTID_TAG.000001").read_bytes()
    body = raw[previous.offset + 19 : previous.log_pos - 4]  # after the header, before the CRC
    monkeypatch.setattr(replication, "Connection", _Server)
    monkeypatch.setattr(replication, "source_password", lambda source: "secret")
    stream = replication.open_stream(SOURCE, 7, previous.gtid_set)
    stream._BinLogStreamReader__connect_to_stream()
    dump = stream._stream_connection.written[-1]
    assert dump[4] == 0x1E  # COM_BINLOG_DUMP_GTID
    assert dump.endswith(struct.pack("<I", len(body)) + body)
    assert int.from_bytes(dump[:4], "little") == len(dump) - 4
    with pytest.raises(ValueError, match="GTID format is incorrect"):
        LibraryGtidSet(previous.gtid_set).encoded()


# Lineage on MySQL: the stream's position found again on a promoted replica.


class MemoryFiles:
    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def read_text(self, path: str) -> str | None:
        return self.texts.get(path)

    def write_text(self, path: str, text: str) -> None:
        self.texts[path] = text


CONFIG = Config(source=SOURCE)
#: The old primary (server_id 1) wrote A:1-12 in two files; another source's C:1-5 replicated
#: into it earlier. The stream stopped after A:10.
PRIMARY = {"mysql-bin.000001": [f"{A}:{n}" for n in range(1, 6)],
           "mysql-bin.000002": [f"{A}:{n}" for n in range(6, 13)]}  # fmt: skip
STREAM_AT = f"{A}:1-10,{C}:1-5"


def _lake_on_primary(answering: Any) -> tuple[MemoryFiles, BinlogOffset]:
    """A lake whose stream stopped before A:11 on the old primary."""
    primary = answering(FakeMySQL(1, PRIMARY, purged=f"{C}:1-5"))
    files = MemoryFiles()
    files.write_text(lineage.lineage_path(CONFIG), Lineage(0, 1).to_json())
    _, begins, _ = next(t for t in primary.transactions if t[2] == f"{A}:11")
    return files, BinlogOffset("mysql-bin.000002", begins, STREAM_AT)


def _promoted(gtids_held: list[str]) -> FakeMySQL:
    """A replica (server_id 2, its own binlog from the start of the stream's history)."""
    return FakeMySQL(2, {"mysql-bin.000001": gtids_held}, purged=f"{C}:1-5")


def test_on_its_own_server_the_stream_s_mysql_position_is_checked_in_place(
    answering: Any,
) -> None:
    files, start = _lake_on_primary(answering)
    lake = cast(LakeFiles, files)
    assert locate(lake, CONFIG, SOURCE, start, ["shop.items"]) is start
    learnt = locate(lake, CONFIG, SOURCE, start.with_gtid(""), ["shop.items"])
    assert learnt.gtid == STREAM_AT  # a position from before GTIDs were recorded, learnt


def test_a_promoted_replica_holding_more_resumes_after_the_stream_s_last_transaction(
    answering: Any,
) -> None:
    files, start = _lake_on_primary(answering)
    # A:11-12 reached the replica; B:1-2 are its own writes since its promotion.
    replica = answering(_promoted([*(f"{A}:{n}" for n in range(1, 13)), f"{B}:1", f"{B}:2"]))
    found = locate(cast(LakeFiles, files), CONFIG, SOURCE, start, ["shop.items"])
    a11 = next(begins for _, begins, gtid in replica.transactions if gtid == f"{A}:11")
    assert (found.file, found.pos, found.gtid) == ("mysql-bin.000001@1", a11, STREAM_AT)
    assert current_lineage(cast(LakeFiles, files), CONFIG) == Lineage(1, 2, found)
    assert replica.dumps == [STREAM_AT]


def test_a_promoted_replica_with_other_transactions_before_the_stream_s_is_refused(
    answering: Any,
) -> None:
    """B:1, the replica's own, precedes A:1-10 in its binlog: the dump would start at B:1 and
    the stream would read A:1-10 again; starting at A:11 would lose B:1. No place fits."""
    files, start = _lake_on_primary(answering)
    answering(_promoted([f"{B}:1", *(f"{A}:{n}" for n in range(1, 13))]))
    with pytest.raises(BinlogResetError, match="transactions the stream never read before"):
        locate(cast(LakeFiles, files), CONFIG, SOURCE, start, ["shop.items"])
    assert current_lineage(cast(LakeFiles, files), CONFIG) == Lineage(0, 1)


def test_a_promoted_replica_lacking_the_stream_s_last_transaction_is_refused(
    answering: Any,
) -> None:
    files, start = _lake_on_primary(answering)
    replica = answering(_promoted([f"{A}:{n}" for n in range(1, 10)]))  # A:10 never arrived
    with pytest.raises(BinlogResetError, match="does not hold the stream's position"):
        locate(cast(LakeFiles, files), CONFIG, SOURCE, start, ["shop.items"])
    assert replica.dumps == []
    assert current_lineage(cast(LakeFiles, files), CONFIG) == Lineage(0, 1)


@pytest.mark.parametrize(("held", "resumes"), [(12, True), (11, False)])
def test_a_promoted_replica_must_hold_what_snapshots_read_past_the_stream(
    answering: Any, held: int, resumes: bool
) -> None:
    """A chunk's high watermark read A:12 on the old primary, past the stream's A:10."""
    files, start = _lake_on_primary(answering)
    answering(_promoted([f"{A}:{n}" for n in range(1, held + 1)]))
    hw = BinlogOffset("mysql-bin.000002", start.pos + 500, f"{A}:1-12,{C}:1-5")
    reads = SnapshotReads(hw, ("shop.items",))
    if resumes:
        assert locate(cast(LakeFiles, files), CONFIG, SOURCE, start, [], reads).lineage == 1
    else:
        with pytest.raises(BinlogResetError, match="does not hold its GTID position"):
            locate(cast(LakeFiles, files), CONFIG, SOURCE, start, [], reads)


def test_a_transaction_read_carries_a_mysql_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """`transactions` (the stream's batch bounds) advances the set per GTID event, a tagged
    one (MySQL 8.4+) included."""
    fake = FakeMySQL(1, {"mysql-bin.000001": [f"{A}:11", f"{B}:1", TAGGED, f"{A}:12"]})
    monkeypatch.setattr(transactions, "open_stream", lambda *a, **kw: FakeDump(fake.transactions))
    start = BinlogOffset("mysql-bin.000001", fake.transactions[0][1], f"{A}:1-10")
    seen = [at.gtid for at, _, _ in transactions.transactions(SOURCE, 9, start)]
    assert seen == [f"{A}:1-10", f"{A}:1-11", f"{A}:1-11,{B}:1", f"{A}:1-11,{TAGGED},{B}:1"]
