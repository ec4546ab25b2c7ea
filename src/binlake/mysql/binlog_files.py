"""A binlog FILE read without a server: each event of a file a MySQL server wrote (magic
`\\xfebin`, a FORMAT_DESCRIPTION, then events with or without CRC32 checksums), decoded by
python-mysql-replication's own event classes.

The library decodes events from the packets of a replication connection; here each event's
bytes are put in the packet it would have arrived in (`pymysql.protocol.MysqlPacket`, an OK byte
before the event), so the same classes decode a file as they decode the stream, with no control
connection (`_NoServer` answers the two things they ask of one). What the library lacks is done
here, each as small as it can be:

- TRANSACTION_PAYLOAD (binlog_transaction_compression): the zstd payload decompressed and the
  events inside decoded in order, as if they stood in the file (they carry no checksum);
- GTID_TAGGED (MySQL 8.4's `uuid:tag:n`) and PREVIOUS_GTIDS, tagged and untagged: read as text
  (GTID-set arithmetic is `binlake.model.gtid_sets`' concern, not this module's);
- PARTIAL_UPDATE_ROWS (`binlog_row_value_options=PARTIAL_JSON`): every JSON diff of a column
  read (the library keeps only the first) and applied to the before image's value, giving the
  full after image; under a MINIMAL row image, whose before image lacks the value, the diffs
  are the after value, for `apply_json_diffs` on the value the reader holds;
- TABLE_MAP without column names (`binlog_row_metadata=MINIMAL`): columns named `@1`, `@2` …
  as `mysqlbinlog` names them, or by a schema the caller supplies; signedness and charsets still
  taken from the metadata the map carries; VECTOR columns read as their raw bytes;
- binary JSON read by `json_values`, as the stream reads it: a TIME inside a document of any
  length and sign, DATE as a date, other opaque values as MySQL's JSON text shows them;
- each rows event's raw row images kept (`FileEvent.row_images`), for binlake's own decoder;
- event types without a decoder (Aurora's padding, type 100, or one newer than the library)
  skipped, each kept with its type code.

A file that ends inside an event, an event size that cannot be, or a checksum that does not
match is refused with a `SourceError` naming the file and the byte offset.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import zstandard
from pymysql.protocol import MysqlPacket
from pymysqlreplication import event as ev
from pymysqlreplication import row_event as rows
from pymysqlreplication.constants import BINLOG, FIELD_TYPE
from pymysqlreplication.exceptions import MalformedBinLogEvent, StatusVariableMismatch
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.util.bytes import length_encoded_int

from binlake.errors import SourceError
from binlake.mysql import table_maps
from binlake.mysql.json_values import apply_json_diffs, json_diffs, json_value

MAGIC = b"\xfebin"
#: timestamp, type, server_id, event_size, log_pos, flags (little-endian, 19 bytes).
_HEADER = struct.Struct("<IBIIIH")
_CHECKSUM_LEN = 4
#: LOG_EVENT_BINLOG_IN_USE_F: a FORMAT_DESCRIPTION's flag while its file is being written.
_BINLOG_IN_USE = 0x1
FORMAT_DESCRIPTION = BINLOG.FORMAT_DESCRIPTION_EVENT
GTID = BINLOG.GTID_LOG_EVENT
ANONYMOUS_GTID = BINLOG.ANONYMOUS_GTID_LOG_EVENT
PREVIOUS_GTIDS = BINLOG.PREVIOUS_GTIDS_LOG_EVENT
TRANSACTION_PAYLOAD = 40
GTID_TAGGED = 42
#: MySQL's VECTOR column type (9.0), which the library does not know.
_VECTOR = 242
#: TABLE_MAP optional-metadata fields the library reads (SIGNEDNESS … COLUMN_VISIBILITY).
_KNOWN_METADATA = range(1, 13)

#: What the decoders raise at bytes that are not what the event's type promises.
_UNDECODABLE = (
    ValueError,
    IndexError,
    KeyError,
    AssertionError,
    NotImplementedError,
    struct.error,
    zstandard.ZstdError,
    MalformedBinLogEvent,
    StatusVariableMismatch,
)

#: The library's decoder of each event type a MySQL (or MariaDB) file holds; `_TableMap` and
#: `_PartialUpdateRows` are the library's, extended below.
_DECODERS: dict[int, type[ev.BinLogEvent]] = {
    BINLOG.QUERY_EVENT: ev.QueryEvent,
    BINLOG.STOP_EVENT: ev.StopEvent,
    BINLOG.ROTATE_EVENT: ev.RotateEvent,
    BINLOG.INTVAR_EVENT: ev.IntvarEvent,
    BINLOG.RAND_EVENT: ev.RandEvent,
    BINLOG.USER_VAR_EVENT: ev.UserVarEvent,
    FORMAT_DESCRIPTION: ev.FormatDescriptionEvent,
    BINLOG.XID_EVENT: ev.XidEvent,
    BINLOG.BEGIN_LOAD_QUERY_EVENT: ev.BeginLoadQueryEvent,
    BINLOG.EXECUTE_LOAD_QUERY_EVENT: ev.ExecuteLoadQueryEvent,
    BINLOG.ROWS_QUERY_LOG_EVENT: ev.RowsQueryLogEvent,
    BINLOG.XA_PREPARE_EVENT: ev.XAPrepareEvent,
    GTID: ev.GtidEvent,
    ANONYMOUS_GTID: ev.GtidEvent,  # the same layout, with a zero UUID and number
    BINLOG.WRITE_ROWS_EVENT_V1: rows.WriteRowsEvent,
    BINLOG.UPDATE_ROWS_EVENT_V1: rows.UpdateRowsEvent,
    BINLOG.DELETE_ROWS_EVENT_V1: rows.DeleteRowsEvent,
    BINLOG.WRITE_ROWS_EVENT_V2: rows.WriteRowsEvent,
    BINLOG.UPDATE_ROWS_EVENT_V2: rows.UpdateRowsEvent,
    BINLOG.DELETE_ROWS_EVENT_V2: rows.DeleteRowsEvent,
    BINLOG.MARIADB_ANNOTATE_ROWS_EVENT: ev.MariadbAnnotateRowsEvent,
    BINLOG.MARIADB_BINLOG_CHECKPOINT_EVENT: ev.MariadbBinLogCheckPointEvent,
    BINLOG.MARIADB_GTID_EVENT: ev.MariadbGtidEvent,
    BINLOG.MARIADB_GTID_GTID_LIST_EVENT: ev.MariadbGtidListEvent,
}


@dataclass(frozen=True)
class FileEvent:
    """One event of a binlog file.

    `offset` is where the event starts in the file; an event inside a TRANSACTION_PAYLOAD has
    its payload's offset and `in_payload` set (it has no place of its own in the file).
    `decoded` is the library's event object (rows in `decoded.rows`); None for the events read
    here (TRANSACTION_PAYLOAD, GTID_TAGGED, PREVIOUS_GTIDS) and for those no decoder reads,
    which are `skipped` (an unknown type, or Aurora's own: `type_code` says which). `gtid` is a
    GTID or GTID_TAGGED event's GTID as text (`uuid:n`, `uuid:tag:n`); `gtid_set` a PREVIOUS_GTIDS
    event's set as text (`uuid:1-5:7:tag:1-3,uuid2:1-9`, empty when the set is). `row_images`
    is a rows event's images as the event holds them (after its columns-present bitmaps): what
    binlake's own decoder reads (`row_images.decode_images`), where the stream reads them."""

    offset: int
    type_code: int
    timestamp: int
    server_id: int
    log_pos: int
    in_payload: bool = False
    decoded: Any = None
    gtid: str | None = None
    gtid_set: str | None = None
    skipped: bool = False
    row_images: bytes | None = None


ColumnNames = Mapping[tuple[str, str], Sequence[str]]


def read_binlog_file(
    path: Path | str, column_names: ColumnNames | None = None, library_rows: bool = True
) -> Iterator[FileEvent]:
    """Every event of the binlog file at `path`, in file order, those inside each
    TRANSACTION_PAYLOAD right after it.

    `column_names` maps `(schema, table)` to the table's column names, for files written with
    `binlog_row_metadata=MINIMAL`, whose table maps carry none (`@1`, `@2` … otherwise).
    Raises `SourceError` at the first byte that cannot be a binlog's. With `library_rows`, each
    rows event's rows are decoded by the library as it is read (`decoded.rows`; a malformed row
    fails at its offset); a caller decoding the row images itself (`FileEvent.row_images`, with
    binlake's decoder) turns it off: the library's decoding would cost it most of its read."""
    path = Path(path)
    with path.open("rb") as file:
        if file.read(len(MAGIC)) != MAGIC:
            raise SourceError(f"{path} is not a binlog file: it does not begin with \\xfebin")
        reader = _Reader(path, column_names or {}, library_rows)
        yield from reader.events(file)


class _NoServer:
    """What the library's events ask of their control connection, answered without one: the
    connection's charset, and whether the server is MySQL or MariaDB (from the file's
    FORMAT_DESCRIPTION). `column_names` stands in for the catalog a server would be asked."""

    charset = "utf8mb4"

    def __init__(self, column_names: ColumnNames) -> None:
        self.column_names = column_names
        self.dbms = "mysql"

    def _get_dbms(self) -> str:
        return self.dbms


class _Reader:
    """The decoding state a file's events share: its FORMAT_DESCRIPTION (server version,
    checksum, post-header lengths) and the table maps seen so far."""

    def __init__(self, path: Path, column_names: ColumnNames, library_rows: bool = True) -> None:
        self.path = path
        self.library_rows = library_rows
        self.server = _NoServer(column_names)
        self.version: tuple[int, ...] = (0, 0, 0)
        self.checksum = False
        self.post_header_lengths: tuple[int, ...] | None = None
        self.table_map: dict[int, Any] = {}

    def events(self, file: BinaryIO) -> Iterator[FileEvent]:
        """The events of `file`, positioned after the magic."""
        offset = len(MAGIC)
        while header := file.read(_HEADER.size):
            size = self._event_size(header, offset)
            body = file.read(size - _HEADER.size)
            if len(body) != size - _HEADER.size:
                raise self._error(
                    offset, f"the event ends after {len(header) + len(body)} of its {size} bytes"
                )
            yield from self._decode(header, body, offset, in_payload=False)
            offset += size

    def _event_size(self, header: bytes, offset: int) -> int:
        if len(header) < _HEADER.size:
            raise self._error(
                offset, f"the file ends inside an event header ({len(header)} of 19 bytes)"
            )
        size = _HEADER.unpack(header)[3]
        if size < _HEADER.size:
            raise self._error(offset, f"event size {size} is smaller than the 19-byte header")
        return size

    def _error(self, offset: int, what: str) -> SourceError:
        return SourceError(f"binlog file {self.path} at byte offset {offset}: {what}")

    def _decode(
        self, header: bytes, body: bytes, offset: int, in_payload: bool
    ) -> Iterator[FileEvent]:
        """The event `header + body` (body with its checksum, if the file has them) and, for a
        TRANSACTION_PAYLOAD, the events inside it."""
        timestamp, type_code, server_id, _, log_pos, _ = _HEADER.unpack(header)
        found = FileEvent(offset, type_code, timestamp, server_id, log_pos, in_payload)
        try:
            if type_code == FORMAT_DESCRIPTION:
                self.checksum = _checksum_of(body)
            if self.checksum and not in_payload:
                body = self._verified(header, body, offset)
            if type_code == TRANSACTION_PAYLOAD:
                yield found
                yield from self._payload_events(body, offset)
                return
            yield self._decoded(found, header, body)
        except _UNDECODABLE as e:
            raise self._error(offset, f"event type {type_code} cannot be decoded: {e!r}") from e

    def _verified(self, header: bytes, body: bytes, offset: int) -> bytes:
        """`body` without its CRC32, which must match the event's bytes. A FORMAT_DESCRIPTION's
        was computed before the server set its "binlog in use" flag (and clears it at close),
        so it is checked with the flag cleared, as `mysqlbinlog` checks it."""
        data, stored = body[:-_CHECKSUM_LEN], body[-_CHECKSUM_LEN:]
        if header[4] == FORMAT_DESCRIPTION:
            header = header[:17] + bytes([header[17] & ~_BINLOG_IN_USE]) + header[18:]
        if len(stored) < _CHECKSUM_LEN or zlib.crc32(header + data) != int.from_bytes(
            stored, "little"
        ):
            raise self._error(offset, "the event's CRC32 checksum does not match its bytes")
        return data

    def _decoded(self, found: FileEvent, header: bytes, body: bytes) -> FileEvent:
        """`found` with its decoded content (`body` without a checksum)."""
        type_code = found.type_code
        if type_code == GTID_TAGGED:
            return replace(found, gtid=_tagged_gtid(body))
        if type_code == PREVIOUS_GTIDS:
            return replace(found, gtid_set=_gtid_set_text(body))
        if type_code == BINLOG.TABLE_MAP_EVENT:
            body = _table_map_for_library(body)
        decoder = _decoder(type_code)
        if decoder is None:
            return replace(found, skipped=True)
        decoded = decoder(
            self._packet(header, body), len(body), self.table_map, self.server, **self._options()
        )
        if not decoded._processed:
            raise ValueError("the rows event names a table id no TABLE_MAP before it mapped")
        images = _row_images(decoded, body) if isinstance(decoded, rows.RowsEvent) else None
        self._learn(decoded)
        gtid = decoded.gtid if type_code == GTID else None
        return replace(found, decoded=decoded, gtid=gtid, row_images=images)

    def _packet(self, header: bytes, body: bytes) -> BinLogPacketWrapper:
        """The packet the library would read this event from: an OK byte, the header, the body
        and a checksum's room (the library always skips one; it is never read here), with the
        header's event size counting it."""
        timestamp, type_code, server_id, _, log_pos, flags = _HEADER.unpack(header)
        size = _HEADER.size + len(body) + _CHECKSUM_LEN
        raw = b"\x00" + _HEADER.pack(timestamp, type_code, server_id, size, log_pos, flags)
        packet = MysqlPacket(raw + body + bytes(_CHECKSUM_LEN), "utf8")
        return _EventBytes(
            packet,
            self.table_map,
            self.server,
            self.version,
            use_checksum=True,
            allowed_events=(),  # the wrapper reads the header only; `_decoded` builds the event
            only_tables=None,
            ignored_tables=None,
            only_schemas=None,
            ignored_schemas=None,
            freeze_schema=False,
            ignore_decode_errors=False,
            verify_checksum=False,
            optional_meta_data=True,
            enable_logging=False,
        )

    def _options(self) -> dict[str, Any]:
        return {
            "mysql_version": self.version,
            "only_tables": None,
            "ignored_tables": None,
            "only_schemas": None,
            "ignored_schemas": None,
            "freeze_schema": False,
            "ignore_decode_errors": False,
            "verify_checksum": False,
            "use_checksum": True,
            "optional_meta_data": True,
            "post_header_lengths": self.post_header_lengths,
        }

    def _learn(self, decoded: Any) -> None:
        """What later events need from this one: the FORMAT_DESCRIPTION's server version and
        post-header lengths; with `library_rows`, every row read now, so a malformed one fails
        at its offset."""
        if isinstance(decoded, ev.FormatDescriptionEvent):
            self.version = decoded.mysql_version
            self.post_header_lengths = decoded.post_header_len
            self.server.dbms = "mariadb" if "MariaDB" in decoded.mysql_version_str else "mysql"
        elif self.library_rows and isinstance(decoded, rows.RowsEvent):
            _ = decoded.rows

    def _payload_events(self, body: bytes, offset: int) -> Iterator[FileEvent]:
        """The events inside a TRANSACTION_PAYLOAD body, in order."""
        inner = _payload_bytes(body)
        position = 0
        while position < len(inner):
            header = inner[position : position + _HEADER.size]
            size = self._event_size(header, offset)
            event_body = inner[position + _HEADER.size : position + size]
            if len(event_body) != size - _HEADER.size:
                raise self._error(offset, "an event inside the transaction payload is truncated")
            yield from self._decode(header, event_body, offset, in_payload=True)
            position += size


def undecoded_body(event: ev.NotImplementedEvent) -> bytes:
    """The body of an event a live stream passed on undecoded (python-mysql-replication's
    NotImplementedEvent skips it): the bytes after its header, without a checksum, still in the
    packet it arrived in (an OK byte, then the 19-byte header)."""
    start = 1 + _HEADER.size
    return bytes(event.packet.packet._data[start : start + event.event_size])


def tagged_gtid(event: ev.NotImplementedEvent) -> str:
    """A GTID_TAGGED event a live stream passed on undecoded, as `uuid:tag:n`."""
    return _tagged_gtid(undecoded_body(event))


def payload_events(event: ev.NotImplementedEvent, stream: Any) -> Iterator[FileEvent]:
    """The events inside a TRANSACTION_PAYLOAD a live stream (`BinLogStreamReader`) passed on
    undecoded, decoded with the stream's own table maps (a map inside joins them, as the
    library's TABLE_MAP decoding does) and its server's format, as if they had arrived one by
    one."""
    reader = _Reader(Path(f"{stream.log_file} (live)"), {}, library_rows=False)
    reader.version = stream.mysql_version
    reader.post_header_lengths = getattr(stream, "_BinLogStreamReader__post_header_lengths", None)
    reader.table_map = stream.table_map
    offset = event.packet.log_pos - event.packet.event_size
    try:
        yield from reader._payload_events(undecoded_body(event), offset)
    except _UNDECODABLE as e:
        raise reader._error(offset, f"the transaction payload cannot be decoded: {e!r}") from e


def _decoder(type_code: int) -> type[ev.BinLogEvent] | None:
    if type_code == BINLOG.TABLE_MAP_EVENT:
        return _TableMap
    if type_code == BINLOG.PARTIAL_UPDATE_ROWS_EVENT:
        return _PartialUpdateRows
    return _DECODERS.get(type_code)


def _checksum_of(fde_body: bytes) -> bool:
    """Whether the events after this FORMAT_DESCRIPTION (body with its own checksum, if any)
    end in a CRC32: servers from 5.6.1 on end it with the algorithm byte (1 = CRC32) and a
    checksum's room; older ones with neither."""
    version = fde_body[2:52].split(b"\0", 1)[0].decode("ascii", "replace")
    numbers = tuple(int(n) for n in re.findall(r"\d+", version.split("-", 1)[0])[:3])
    if numbers < (5, 6, 1):
        return False
    return fde_body[-_CHECKSUM_LEN - 1] == 1


def _payload_bytes(body: bytes) -> bytes:
    """A TRANSACTION_PAYLOAD body's events: its header fields (type, length, value, each
    length-encoded, until type 0) then the payload, zstd-compressed (type 0) or plain (255)."""
    fields: dict[int, int] = {}
    position = 0
    while True:
        field, _, n = length_encoded_int(body[position:])
        position += n
        if field == 0:
            break
        length, _, n = length_encoded_int(body[position:])
        fields[field], _, _ = length_encoded_int(body[position + n : position + n + length])
        position += n + length
    payload, compression, size = body[position:], fields.get(2, 0), fields.get(3, 0)
    if compression == 255:
        return payload
    if compression != 0:
        raise ValueError(f"transaction payload compression type {compression} is not zstd")
    inner = zstandard.ZstdDecompressor().decompress(payload, max_output_size=size)
    if len(inner) != size:
        raise ValueError(f"the payload holds {len(inner)} bytes, its header says {size}")
    return inner


def _row_images(event: rows.RowsEvent, body: bytes) -> bytes:
    """The row images of a rows event, `body`, that the library has read up to them (its
    post-header and bitmaps, `read_bytes` of the body): the bytes the stream hands binlake's
    decoder (`binlog._TableDecoder.images`)."""
    return body[event.packet.read_bytes :]


def _table_map_for_library(body: bytes) -> bytes:
    """A TABLE_MAP body the library reads: a VECTOR column typed BLOB (both a length-prefixed
    byte string with a one-byte length size, both counted among the columns with a charset,
    VECTOR's being binary, so its value is read as its raw bytes: float32s, little-endian), and
    optional-metadata fields newer than the library's (VECTOR_DIMENSIONALITY) dropped, which it
    would refuse."""
    position = 8  # table id (6) and flags (2)
    for _ in range(2):  # schema, table: length byte, name, NUL
        position += body[position] + 2
    count, _, n = length_encoded_int(body[position:])
    types_at = position + n
    types = bytes(FIELD_TYPE.BLOB if t == _VECTOR else t for t in body[types_at : types_at + count])
    position = types_at + count
    meta_length, _, n = length_encoded_int(body[position:])
    position += n + meta_length + (count + 7) // 8
    kept = bytearray(body[:types_at] + types + body[types_at + count : position])
    while position < len(body):
        length, _, n = length_encoded_int(body[position + 1 :])
        field_end = position + 1 + n + length
        if body[position] in _KNOWN_METADATA:
            kept += body[position:field_end]
        position = field_end
    return bytes(kept)


class _EventBytes(BinLogPacketWrapper):
    """The library's packet wrapper, with its binary JSON read by `json_values`, and every JSON
    diff of a partially updated column read (the library's reads the first, drops the rest)."""

    def read_binary_json(self, size: int, is_partial: bool) -> Any:
        data = self.read(self.read_uint_by_size(size))
        if is_partial:
            return tuple(json_diffs(data))
        return json_value(data[0], data[1:]) if data else None


class _TableMap(rows.TableMapEvent):
    """The library's TABLE_MAP, naming the columns a MINIMAL-metadata map leaves unnamed (the
    caller's schema, else `@1`, `@2` …) and still applying the signedness and charsets it
    carries, which the library applies only alongside names. An ENUM or SET, whose strings such
    a map lacks (the library would read None), reads as its member numbers: 1-based, as MySQL
    numbers them (an ENUM's 0 is its error value '')."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The library's own parse, never `table_maps`' once-per-process cache: that would hand
        # this map the columns of an equal map parsed before, named by another read's schema.
        table_maps.parse_table_map(self, *args, **kwargs)

    def _sync_column_info(self) -> None:
        super()._sync_column_info()
        if self.optional_metadata.column_name_list:
            return
        names = self._column_names()
        metadata = self.optional_metadata
        charsets = iter(metadata.charset_collation_list or ())
        for i, column in enumerate(self.columns):
            column.name = names[i]
            column.unsigned = bool(
                metadata.unsigned_column_list and metadata.unsigned_column_list[i]
            )
            column.enum_values = _MEMBER_NUMBERS if column.type == FIELD_TYPE.ENUM else None
            column.set_values = _MEMBER_NUMBERS[1:] if column.type == FIELD_TYPE.SET else None
            if self._is_character_column(column.type, dbms=self.dbms):
                charset = next(charsets, None)
                if charset is not None:
                    column.character_set_name, column.collation_name, _ = rows.find_charset(
                        str(charset), dbms=self.dbms
                    )

    def _column_names(self) -> list[str]:
        known = self._ctl_connection.column_names.get((self.schema, self.table))
        if known is None:
            return [f"@{i + 1}" for i in range(self.column_count)]
        if len(known) != self.column_count:
            raise ValueError(
                f"{len(known)} column names were given for {self.schema}.{self.table}, "
                f"whose table map has {self.column_count} columns"
            )
        return list(known)


#: An ENUM's or SET's members by number (an ENUM has up to 65535, a SET 64).
_MEMBER_NUMBERS = range(65536)


class _PartialUpdateRows(rows.PartialUpdateRowsEvent):
    """The library's PARTIAL_UPDATE_ROWS, with each partially updated JSON column's after image
    made whole where the before image holds the column (`binlog_row_image=FULL`): its diffs
    applied, in order, to the before image's value. Under a MINIMAL row image the before image
    holds the key alone: the after value stays the diffs (a tuple of the library's `JsonDiff`),
    for `apply_json_diffs` on the value the reader holds for that row."""

    def _fetch_one_row(self) -> dict[str, Any]:
        row: dict[str, Any] = super()._fetch_one_row()
        before, after = row["before_values"], row["after_values"]
        for name, value in after.items():
            if isinstance(value, tuple) and name not in row["before_none_sources"]:
                after[name] = apply_json_diffs(before[name], value)
        return row


def _varlen_uint(data: bytes, position: int) -> tuple[int, int]:
    """MySQL's serialization-library unsigned integer at `position` and the position after it:
    the first byte's trailing one-bits count the bytes that follow, the value is the whole
    little-endian number shifted past them (nine bytes: the last eight hold it)."""
    first = data[position]
    extra = 8 if first == 0xFF else (~first & (first + 1)).bit_length() - 1
    raw = int.from_bytes(data[position : position + 1 + extra], "little")
    value = raw >> 8 if extra == 8 else raw >> (extra + 1)
    return value, position + 1 + extra


def _uuid_text(sid: bytes) -> str:
    h = sid.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _tagged_gtid(body: bytes) -> str:
    """A GTID_TAGGED event's GTID as `uuid:tag:n`. Its body is a serialization-library message:
    a version byte (2), the message size and last non-ignorable field id, then (field id, value)
    pairs, unsigned and zig-zag signed integers of variable length: 0 flags, 1 the UUID (16
    integers), 2 the number (signed), 3 the tag (length, bytes), then fields read nowhere here."""
    if body[0] != 2:
        raise ValueError(f"GTID_TAGGED serialization version {body[0]} is not 2")
    _, position = _varlen_uint(body, 1)
    _, position = _varlen_uint(body, position)
    sid, gno, tag = bytearray(), 0, ""
    while not tag:
        field, position = _varlen_uint(body, position)
        if field == 1:
            for _ in range(16):
                byte, position = _varlen_uint(body, position)
                sid.append(byte)
        elif field == 3:
            length, position = _varlen_uint(body, position)
            tag = body[position : position + length].decode("ascii")
            position += length
        else:  # 0 flags, 2 the number (zig-zag: the low bit is the sign)
            value, position = _varlen_uint(body, position)
            gno = value >> 1 if field == 2 else gno
    return f"{_uuid_text(bytes(sid))}:{tag}:{gno}"


def _gtid_set_text(body: bytes) -> str:
    """A PREVIOUS_GTIDS body (MySQL's `Gtid_set::encode`) as GTID-set text. Eight bytes open it:
    the number of UUIDs (untagged), or format byte 1, the number in the six bytes after it, and
    1 again (tagged, 8.3+). Each UUID (16 bytes; tagged: a length-prefixed tag after it) has an
    interval count (8) and its intervals (start, end exclusive: 8 + 8)."""
    tagged = body[7] == 1
    count = int.from_bytes(body[1:7] if tagged else body[:8], "little")
    position, members = 8, list[str]()
    for _ in range(count):
        uuid, text = _uuid_text(body[position : position + 16]), ""
        position += 16
        if tagged:
            length, position = _varlen_uint(body, position)
            tag = body[position : position + length].decode("ascii")
            text, position = f":{tag}" if tag else "", position + length
        (intervals,) = struct.unpack_from("<Q", body, position)
        position += 8
        for _ in range(intervals):
            start, end = struct.unpack_from("<QQ", body, position)
            position += 16
            text += f":{start}" if end - start == 1 else f":{start}-{end - 1}"
        if members and members[-1].startswith(uuid):
            members[-1] += text  # the same UUID with another tag: `uuid:1-5:tag:1-3`
        else:
            members.append(uuid + text)
    if position != len(body):
        raise ValueError(f"PREVIOUS_GTIDS holds {len(body) - position} bytes after its set")
    return ",".join(members)
