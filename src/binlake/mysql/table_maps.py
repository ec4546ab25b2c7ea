"""TABLE_MAP events parsed once: python-mysql-replication's `TableMapEvent.__init__`, replaced
(on import) by one that parses each distinct TABLE_MAP payload once per process.

Every binlog read opens its replication connection through `replication.open_stream`, which
imports this module.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.row_event import TableMapEvent

#: TABLE_MAP events parsed so far: (payload, read options) → the fields the parse set, without
#: what ties an event to its read (the packet, the control connection, the read's table maps).
_PARSED_MAPS: dict[tuple[Any, ...], dict[str, Any]] = {}
#: Distinct table maps kept (a map is a few hundred bytes and its parsed columns).
_PARSED_MAPS_KEPT = 4096
parse_table_map = TableMapEvent.__init__


def table_map_once(
    self: Any, from_packet: Any, event_size: int, table_map: dict[int, Any], ctl: Any, **kw: Any
) -> None:
    """`TableMapEvent.__init__`, parsing each distinct TABLE_MAP payload once.

    Every transaction repeats the map of each table it writes, and the library parses each copy
    anew (a `Column` per column, each asked for its attribute dict twice, then the optional
    metadata): most of reading a binlog of single-row transactions
    (bench/results/2026-11-29-table-maps.md). The parse depends on the
    payload's bytes and the read's options alone, except under `freeze_schema` (the stream's
    table map) or `use_column_name_cache` (a query), which binlake never sets and which are
    parsed as before. Equal bytes under equal options are the same map, so a copy takes the
    first one's parsed fields (kept without its packet, connection and table-map dict: a cached
    map holds no read open); a new table id, an ALTER, or an id reused after a restart for
    another layout are other bytes, parsed anew. The library's own parse is the fallback, and
    its objects are shared read-only: binlake decodes the rows itself (`binlog._TableDecoder`)."""
    if kw.get("freeze_schema") or kw.get("use_column_name_cache") or from_packet.read_bytes:
        parse_table_map(self, from_packet, event_size, table_map, ctl, **kw)
        return
    raw = from_packet.packet
    options = tuple(
        tuple(v) if isinstance(v, list) else v
        for v in (kw.get("only_tables"), kw.get("ignored_tables"), kw.get("only_schemas"),
                  kw.get("ignored_schemas"), kw.get("optional_meta_data"),
                  kw.get("mysql_version"), ctl._get_dbms())
    )  # fmt: skip
    key = (bytes(raw._data[raw._position : raw._position + event_size]), options)
    parsed = _PARSED_MAPS.get(key)
    if parsed is None:
        parse_table_map(self, from_packet, event_size, table_map, ctl, **kw)
        if len(_PARSED_MAPS) >= _PARSED_MAPS_KEPT:
            _PARSED_MAPS.clear()
        read = (from_packet, table_map, ctl)
        _PARSED_MAPS[key] = {k: v for k, v in vars(self).items() if not any(v is r for r in read)}
        return
    BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl, **kw)
    own = vars(self).keys()
    vars(self).update({k: v for k, v in parsed.items() if k not in own})
    self._processed = parsed["_processed"]  # the base sets True; a filtered-out map is False
    if self._processed:
        table_map[self.table_id] = self.table_obj
    from_packet.advance(event_size)


TableMapEvent.__init__ = table_map_once
