"""`spark.session_settings`: binlake's session settings go together or not at all, and each is
restored to what the session had (unset where it was unset). A compute that refuses one of
`DETERMINISTIC_MERGE_SOURCES` must keep both as they were: the copy off without the check off
fails every MERGE of a cached source."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.runtime.spark import DETERMINISTIC_MERGE_SOURCES, session_settings


class Conf:
    """A session's runtime settings that refuse to change the keys in `refused`."""

    def __init__(self, values: dict[str, str], refused: set[str] = frozenset()) -> None:
        self.values, self.refused = dict(values), refused

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        if key in self.refused:
            raise RuntimeError(f"[CONFIG_NOT_AVAILABLE] {key} is not available")
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class Session:
    def __init__(self, conf: Conf) -> None:
        self.conf = conf


MATERIALIZE, CACHED_CHECK = DETERMINISTIC_MERGE_SOURCES


def test_settings_hold_inside_and_the_sessions_own_come_back_after() -> None:
    conf = Conf({MATERIALIZE: "all", "other": "x"})
    with session_settings(Session(conf), DETERMINISTIC_MERGE_SOURCES):  # type: ignore[arg-type]
        assert conf.values == {**DETERMINISTIC_MERGE_SOURCES, "other": "x"}
    assert conf.values == {MATERIALIZE: "all", "other": "x"}  # the check was unset: unset again


def test_a_setting_refused_leaves_every_setting_as_the_compute_has_it() -> None:
    conf = Conf({MATERIALIZE: "auto"}, refused={CACHED_CHECK})
    with session_settings(Session(conf), DETERMINISTIC_MERGE_SOURCES):  # type: ignore[arg-type]
        assert conf.values == {MATERIALIZE: "auto"}
    assert conf.values == {MATERIALIZE: "auto"}


def test_settings_are_restored_when_the_block_fails() -> None:
    conf = Conf({})
    with (
        pytest.raises(ValueError, match="batch failed"),
        session_settings(Session(conf), DETERMINISTIC_MERGE_SOURCES),  # type: ignore[arg-type]
    ):
        raise ValueError("batch failed")
    assert conf.values == {}
