"""A binlog archive's files, positions and changes (`binlog_archive`), on files real MySQL
servers wrote (fixtures/mysql-binlogs) and on copies of them cut or renamed here. The pipeline
over an archive is tests/integration/test_binlog_archive.py."""

from __future__ import annotations

import json
import shutil
import zlib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from binlake.errors import SourceError
from binlake.model.capture import Capture
from binlake.model.changes import Op, RowChange
from binlake.model.offsets import BinlogOffset
from binlake.mysql.binlog_archive import TABLE_MAP_STATEMENT, ArchiveRead, BinlogArchive
from binlake.mysql.binlog_files import FileEvent, read_binlog_file
from binlake.mysql.schema_history import SchemaChange

from .partial_json_file import full_image_partial_file

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "mysql-binlogs"


def archive_of(tmp_path: Path, **files: str) -> BinlogArchive:
    """A folder holding fixture files under the names given (`name=fixture`)."""
    folder = tmp_path / "archive"
    folder.mkdir(parents=True)
    for name, fixture in files.items():
        shutil.copy(FIXTURES / fixture, folder / name.replace("_", "."))
    return BinlogArchive(folder)


def changes(archive: BinlogArchive, database: str, keys: dict[str, str], **kw: Any) -> list[Any]:
    return list(archive.read(Capture(database, None), keys, archive.first(), archive.head(), **kw))


def test_files_are_ordered_by_their_number_not_their_name(tmp_path: Path) -> None:
    """`.999999` comes before `.1000000` (a server's numbering rolls past six digits), and
    a file without the binlog magic (an index) is no binlog file."""
    archive = archive_of(
        tmp_path, bin_1000000="mysql-bin.checksum-none", bin_999999="mysql-bin.checksum-crc32"
    )
    (archive.folder / "bin.index").write_text("bin.999999\nbin.1000000\n")
    assert archive.files() == ["bin.999999", "bin.1000000"]
    sizes = archive.sizes()
    assert archive.first() == BinlogOffset("bin.999999", 4)
    assert archive.head() == BinlogOffset("bin.1000000", sizes["bin.1000000"])


def test_a_batch_ends_at_its_files_end_then_the_next(tmp_path: Path) -> None:
    archive = archive_of(
        tmp_path, bin_000001="mysql-bin.checksum-crc32", bin_000002="mysql-bin.checksum-none"
    )
    one, two = archive.sizes().values()
    assert archive.next_end(archive.first()) == BinlogOffset("bin.000001", one)
    assert archive.next_end(BinlogOffset("bin.000001", 500)) == BinlogOffset("bin.000001", one)
    assert archive.next_end(BinlogOffset("bin.000001", one)) == BinlogOffset("bin.000002", two)
    assert archive.next_end(BinlogOffset("bin.000002", two)) == BinlogOffset("bin.000002", two)
    with pytest.raises(SourceError, match="does not hold"):
        archive.next_end(BinlogOffset("bin.000003", 4))


def test_rows_in_one_transaction_payload_keep_positions_of_their_own(tmp_path: Path) -> None:
    """Two rows events inside one zstd payload share its end offset: their rows are numbered
    on, and the table each brings in enters just before its rows."""
    archive = archive_of(tmp_path, bin_000057="mysql-bin.000057")
    read = changes(archive, "a", {"b": "@1", "test_table_3": "@1"})
    rows = [c for c in read if isinstance(c, RowChange)]
    created = [c for c in read if isinstance(c, SchemaChange)]
    assert [(c.table, c.kind, c.statement) for c in created] == [
        ("a.b", "create", TABLE_MAP_STATEMENT),
        ("a.test_table_3", "create", TABLE_MAP_STATEMENT),
    ]
    payload = [c for c in rows if c.table == "a.test_table_3"]
    assert [(c.op, c.position.offset.pos, c.position.row) for c in payload] == [
        (Op.UPDATE, 1283, 0),
        (Op.INSERT, 1283, 1),
    ]
    assert all(d.offset < r.position.offset for d in created for r in rows if r.table == d.table)
    assert len({c.position for c in rows}) == len(rows)


def test_a_read_starts_from_the_schemas_the_stream_holds(tmp_path: Path) -> None:
    """A table held with the schema its map shows enters nothing; one held with another
    schema changes at its first row event; rows at or before the start are not read again."""
    archive = archive_of(tmp_path, bin_000001="mysql-enum-string-set.000001")
    (create, *rows) = changes(archive, "mysql", {"t": "f1"})
    assert isinstance(create, SchemaChange) and create.after is not None
    held = {"mysql.t": create.after}
    assert changes(archive, "mysql", {"t": "f1"}, in_force=held) == rows
    narrower = replace(create.after, columns=create.after.columns[:4])
    (altered, *_) = changes(archive, "mysql", {"t": "f1"}, in_force={"mysql.t": narrower})
    assert (altered.kind, altered.before, altered.after) == ("alter", narrower, create.after)
    after_insert = rows[0].position.offset
    later = list(
        archive.read(Capture("mysql", None), {"t": "f1"}, after_insert, archive.head(), held)
    )
    assert [c.op for c in later] == [Op.UPDATE, Op.DELETE]


def test_tables_outside_the_capture_are_not_read(tmp_path: Path) -> None:
    archive = archive_of(tmp_path, bin_000001="mysql-enum-string-set.000001")
    assert changes(archive, "shop", {}) == []
    assert (
        list(archive.read(Capture(None, ("mysql\\.other",)), {}, archive.first(), archive.head()))
        == []
    )


def test_each_file_is_opened_for_its_magic_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream lists the archive several times per trigger: a file known to be a binlog is
    not opened again, a file added since is, and one still empty (being copied) is looked at
    again until it holds the magic."""
    archive = archive_of(tmp_path, bin_000001="mysql-bin.checksum-crc32")
    (archive.folder / "bin.index").write_text("bin.000001\n")
    opened: list[str] = []
    real_open = Path.open

    def counting_open(path: Path, *args: Any, **kwargs: Any) -> Any:
        opened.append(path.name)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    assert archive.files() == ["bin.000001"]
    assert sorted(opened) == ["bin.000001", "bin.index"]
    opened.clear()
    archive.head(), archive.sizes(), archive.files()  # a listing each
    assert opened == ["bin.index"] * 3
    copying = archive.folder / "bin.000002"
    copying.write_bytes(b"")
    opened.clear()
    assert archive.files() == ["bin.000001"]
    assert sorted(opened) == ["bin.000002", "bin.index"]
    copying.write_bytes((FIXTURES / "mysql-bin.checksum-crc32").read_bytes())
    opened.clear()
    assert archive.files() == ["bin.000001", "bin.000002"]
    assert archive.files() == ["bin.000001", "bin.000002"]
    assert sorted(opened) == ["bin.000002", "bin.index", "bin.index"]


def test_what_an_archive_cannot_give_is_refused_at_its_offset(tmp_path: Path) -> None:
    """No key in the map and none named; a partial JSON update under a MINIMAL row image (its
    before image lacks the document the diffs change); a file cut inside an event."""
    archive = archive_of(tmp_path, bin_000001="mysql-enum-string-set.000001")
    with pytest.raises(
        SourceError, match=r"mysql\.t has no primary key .* source.split_keys \(t: f1\)"
    ):
        changes(archive, "mysql", {})
    with pytest.raises(SourceError, match=r"names 'nope' for mysql\.t"):
        changes(archive, "mysql", {"t": "nope"})

    partial = archive_of(tmp_path / "partial", bin_000001="json.binlog.000001")
    with pytest.raises(SourceError, match="byte offset 3750: a row event without a FULL row"):
        changes(partial, "mysql", {"t": "@1"})

    cut = archive_of(tmp_path / "cut", bin_000001="mysql-enum-string-set.000001")
    path = cut.folder / "bin.000001"
    path.write_bytes(path.read_bytes()[:2700])
    with pytest.raises(SourceError, match=r"bin\.000001 at byte offset 2659: the event ends after"):
        changes(cut, "mysql", {"t": "f1"})


def test_a_partial_json_update_under_a_full_row_image_is_read_whole(tmp_path: Path) -> None:
    """Each after image's document is the before image's with MySQL's diff applied (`$.age`
    replaced): what MySQL computed into the generated `name` and `age` from it says so."""
    archive = BinlogArchive(tmp_path)
    full_image_partial_file(tmp_path, "bin.000001")
    read = [c for c in changes(archive, "mysql", {"t": "@1"}) if isinstance(c, RowChange)]
    partial = [c for c in read if c.position.offset == BinlogOffset("bin.000001", 4398)]
    assert [c.op for c in partial] == [Op.UPDATE] * 6
    for change in partial:
        assert change.before is not None and change.after is not None
        key, document, name, age = change.after
        assert key == change.before[0]
        assert json.loads(document) == {**json.loads(change.before[1]), "age": age}
        assert (json.loads(document)["name"], age) == (name, change.before[3] + 1)
    assert [c.after[0] for c in partial if c.after] == [1, 2, 3, 4, 5, 6]


def test_row_images_not_laid_out_as_their_table_map_says_are_refused(tmp_path: Path) -> None:
    """A value's length changed inside a WRITE_ROWS' images (its CRC32 made to match): the
    archive's read decodes rows with binlake's decoder alone, which must not yield values read
    past the event; the file and the event's offset are named."""
    archive = archive_of(tmp_path, bin_000001="mysql-enum-string-set.000001")
    path = archive.folder / "bin.000001"
    data = bytearray(path.read_bytes())
    (write, *_) = [e for e in read_binlog_file(path) if e.type_code == 30]
    assert write.row_images is not None
    images_at = write.log_pos - 4 - len(write.row_images)
    data[images_at + 1] = 0xFF  # f1's length: 100 → 255 (after the one-byte null bitmap)
    crc = zlib.crc32(bytes(data[write.offset : write.log_pos - 4]))
    data[write.log_pos - 4 : write.log_pos] = crc.to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(
        SourceError, match=rf"bin\.000001 at byte offset {write.offset}: the row images of mysql\.t"
    ):
        changes(archive, "mysql", {"t": "f1"})


def _statements(read: ArchiveRead, *statements: str) -> list[SchemaChange]:
    """What `read` makes of QUERY events holding `statements`, in database `mysql`."""
    event = FileEvent(offset=900, type_code=2, timestamp=0, server_id=1, log_pos=1000)
    found: list[SchemaChange] = []
    for number, statement in enumerate(statements):
        query = SimpleNamespace(query=statement, schema=b"mysql")
        at = BinlogOffset("bin.000001", 1000 + number)
        found += read._statement(query, at, Path("bin.000001"), event)
    return found


def test_statements_that_change_a_held_tables_rows_are_followed_or_refused(tmp_path: Path) -> None:
    """TRUNCATE and DROP (of the table, or of its database) are followed; a rename, an ALTER
    that removes rows, DML as a statement, and a name equal to a held one but for case (the
    archive does not say how the server compared them) are refused, never skipped."""
    archive = archive_of(tmp_path, bin_000001="mysql-enum-string-set.000001")
    (create, *_) = changes(archive, "mysql", {"t": "f1"})
    held = {"mysql.t": create.after}

    def read() -> ArchiveRead:
        return ArchiveRead(Capture("mysql", None), {"t": "f1"}, archive.first(), held)

    truncated, dropped = _statements(read(), "TRUNCATE TABLE t", "DROP TABLE `mysql`.`t`")
    assert (truncated.kind, truncated.before, truncated.after) == (
        "truncate",
        create.after,
        create.after,
    )
    assert (dropped.kind, dropped.after) == ("drop", None)
    (gone,) = _statements(read(), "DROP DATABASE mysql")
    assert (gone.table, gone.kind) == ("mysql.t", "drop")
    assert _statements(read(), "TRUNCATE TABLE other", "ALTER TABLE t ADD COLUMN x INT") == []
    for statement, why in [
        ("RENAME TABLE t TO t_old", "renamed"),
        ("ALTER TABLE t RENAME TO t2", "renamed"),
        ("ALTER TABLE t TRUNCATE PARTITION p0", "removes rows"),
        ("UPDATE t SET f2 = 'x'", "DML logged as a statement"),
        ("TRUNCATE TABLE T", "differs from mysql.t by case alone"),
    ]:
        with pytest.raises(SourceError, match=rf"bin\.000001 at byte offset 900: .*{why}"):
            _statements(read(), statement)
