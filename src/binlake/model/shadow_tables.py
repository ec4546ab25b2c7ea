"""The shadow tables of online schema-change tools, and how their cut-over reads for binlake.

pt-online-schema-change and gh-ost alter a large table `t` without locking it: they create a
shadow (`_t_new`, `_t_gho`), alter the shadow, copy `t`'s rows into it while mirroring every write
(triggers, or gh-ost's own binlog reader), then swap the names in one statement,
`RENAME TABLE t TO _t_old, _t_new TO t` (gh-ost: `_t_del`, `_t_gho`; its two-step cut-over
renames each table on its own). At the swap the shadow holds exactly `t`'s rows, so for binlake
the cut-over is an ALTER of `t` from its old layout to the shadow's: silver keeps its rows and
takes the new layout, and no re-snapshot is needed. Meanwhile the shadow's own rows are the tool's
copy, never a table of their own: a name of a shadow's shape is not captured by a pattern (or by
`source.tables: null`), only when `source.tables` names it exactly.

pt-online-schema-change prefixes more underscores while the name is taken (`__t_new`); gh-ost
names its changelog `_t_ghc` and, with `--timestamp-old-table`, its old table `_t_<14 digits>_del`.
"""

from __future__ import annotations

import re

_SUFFIX = r"(?:_new|_old|_gho|_ghc|(?:_\d{14})?_del)"
_SHADOW = re.compile(rf"_+.+{_SUFFIX}", re.DOTALL)


def is_shadow_name(name: str) -> bool:
    """Whether `name` has the shape of an online schema-change tool's table (of any table)."""
    return _SHADOW.fullmatch(name) is not None


def is_incoming_shadow_of(name: str, table: str) -> bool:
    """Whether `name` is the tool's altered copy of `table`, the one that takes its name at
    the cut-over (not the old table it leaves behind, nor gh-ost's changelog)."""
    return re.fullmatch(rf"_+{re.escape(table)}_(?:new|gho)", name, re.DOTALL) is not None


def is_shadow_of(name: str, table: str) -> bool:
    """Whether `name` is one of the names a tool gives to `table`'s shadow or old copy."""
    return re.fullmatch(rf"_+{re.escape(table)}{_SUFFIX}", name, re.DOTALL) is not None
