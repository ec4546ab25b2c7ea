"""The tables one stream job applies (`StreamTables`), kept beside its checkpoint in the lake.

A table joins a job's list when its snapshot finishes, or at its CREATE; a reset takes it out
(`snapshot.resets.send_back`). The stream's threads, its joins and a `snapshot --reset` in another
process change the list at once, so it is a `VersionedText`: no change overwrites another.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from binlake.lake.files import LakeFiles, VersionedText
from binlake.model.offsets import BinlogOffset

#: A job's tables ("db.table"), each with the offset it joined at (None: the stream's start).
Tables = dict[str, BinlogOffset | None]


class StreamTables:
    """The tables one stream job applies, each from the offset it joined at (`None`: from the
    stream's start). A table joins when its snapshot finishes (at or after its last high
    watermark) or at its CREATE (silver then holds every row from the binlog, whatever a later
    snapshot reads); `--reset` takes it out until its new snapshot finishes. Kept beside the
    job's checkpoint as a `VersionedText`: the stream's threads (a CREATE per table, side by
    side), its joins, and `snapshot --reset` in another process change it at once."""

    def __init__(self, path: str, files: LakeFiles) -> None:
        self.document = VersionedText(path, files)

    def read(self) -> Tables:
        """The newest tables; none if the job has no list yet."""
        return _tables(self.document.read()) or {}

    def exists(self) -> bool:
        """Whether the job has a list (an empty one counts)."""
        return self.document.read() is not None

    def update(self, change: Callable[[Tables], Tables]) -> Tables:
        """Apply `change` to the newest tables as one step, against every other writer; returns
        the tables it was applied to. `change` may run more than once (see
        `VersionedText.update`): it only computes adds and removes of tables."""
        before: Tables = {}

        def on_text(text: str | None) -> str | None:
            nonlocal before
            before = _tables(text) or {}
            after = change(dict(before))
            return None if after == before else _tables_json(after)

        self.document.update(on_text)
        return before


def _tables(text: str | None) -> Tables | None:
    """The tables a version's JSON text holds; None for no version."""
    if text is None:
        return None
    return {t: BinlogOffset.from_dict(o) if o else None for t, o in json.loads(text).items()}


def _tables_json(tables: Tables) -> str:
    """A version's JSON text: the tables sorted by name, so equal lists write equal text."""
    return json.dumps({t: o.to_dict() if o else None for t, o in sorted(tables.items())}, indent=1)
