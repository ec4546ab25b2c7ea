"""`binlake init`'s file: every key valid, names quoted where YAML would misread them, refused
tables commented out with their reason, no password."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from binlake.config.secrets import source_password
from binlake.config.settings import parse_config
from binlake.errors import ConfigError
from binlake.jobs.starter_config import (
    FoundTable,
    Starter,
    connection_settings,
    render_config,
    summary,
    with_password,
    write_config,
)

SETTINGS = {"host": "db1", "port": 3307, "user": None, "database": "shop", "password_env": None}


def _starter(*tables: FoundTable, warning: str | None = None) -> Starter:
    return Starter(connection_settings(SETTINGS), list(tables), warning)


def _table(name: str, key: tuple[str, ...] = ("id",), split_key: str | None = None) -> FoundTable:
    return FoundTable(name, key, split_key or key[0], split_key, 1234)


def test_the_file_loads_with_the_tables_and_split_keys_it_lists() -> None:
    starter = _starter(
        _table("customers"),
        _table("order_lines", ("order_id", "line_no")),
        _table("codes", ("code",), split_key="code"),
        FoundTable("raw_log", (), "", None, 7, "table shop.raw_log has no primary key: set it"),
    )
    text = render_config(starter, Path("binlake.yml"))

    config = parse_config(yaml.safe_load(text))

    assert (config.source.host, config.source.port, config.source.user) == ("db1", 3307, "binlake")
    assert config.source.password is None
    assert config.source.password_env == "BINLAKE_SOURCE_PASSWORD"
    assert config.source.tables == ["customers", "order_lines", "codes"]
    assert config.snapshot.split_keys == {"codes": "code"}
    assert "    - customers                            # key id, ~1,234 rows" in text
    assert "# key order_id, line_no, split by order_id, ~1,234 rows" in text
    assert "# split by code (snapshot.split_keys), ~1,234 rows" in text
    assert "    # - raw_log                            # refused, ~7 rows:" in text
    assert "    #   table shop.raw_log has no primary key: set it" in text


@pytest.mark.parametrize("name", ["yes", "null", "123", "-x", "a b", "it's", "a#b", "ünï"])
def test_names_yaml_would_misread_are_quoted(name: str) -> None:
    text = render_config(_starter(_table(name, ("id",), split_key=name)), Path("c.yml"))
    config = parse_config(yaml.safe_load(text))
    assert config.source.tables == [name]
    assert config.snapshot.split_keys == {name: name}


def test_with_no_usable_table_the_file_captures_none_rather_than_all() -> None:
    refused = FoundTable("t", (), "", None, 0, "no key")
    config = parse_config(yaml.safe_load(render_config(_starter(refused), Path("c.yml"))))
    assert config.source.tables == []


def test_the_servers_refusal_heads_the_file_as_a_comment() -> None:
    text = render_config(
        _starter(_table("t"), warning="the source has binlog_format=MIXED"), Path("c.yml")
    )
    assert "# WARNING: binlake refuses this source now: the source has binlog_format=MIXED" in text
    assert parse_config(yaml.safe_load(text)).source.tables == ["t"]


def test_the_summary_names_what_was_left_out() -> None:
    starter = _starter(_table("a"), FoundTable("b", (), "", None, 0, "no key"))
    assert summary(starter, Path("x.yml")) == (
        "wrote x.yml: 1 table; left out, refused (the file says why): b\n"
        "next: binlake plan --config x.yml"
    )


def test_an_existing_file_is_kept_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "c.yml"
    path.write_text("mine\n")
    with pytest.raises(ConfigError, match="exists: binlake init does not overwrite it"):
        write_config(path, "new\n", force=False)
    assert path.read_text() == "mine\n"
    write_config(path, "new\n", force=True)
    assert path.read_text() == "new\n"


def test_an_unset_password_variable_is_asked_for_at_a_terminal_and_never_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BINLAKE_SOURCE_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("getpass.getpass", lambda prompt: "s3cret-typed")
    starter = _starter(_table("t"))

    source = with_password(starter.config.source)

    assert source_password(source) == "s3cret-typed"
    assert "s3cret-typed" not in render_config(starter, Path("c.yml"))


def test_without_a_terminal_the_unset_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BINLAKE_SOURCE_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(ConfigError, match=r"'BINLAKE_SOURCE_PASSWORD' .* is not set"):
        with_password(_starter().config.source)
