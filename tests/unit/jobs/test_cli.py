"""The `binlake` command line: its help, version and options, and bad input refused before any
Spark or database work."""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import replace
from pathlib import Path

import pytest

from binlake.errors import ConfigError
from binlake.jobs.cli import build_parser, main
from binlake.model.schema import Column, TableSchema
from binlake.snapshot.task import chosen_tables


def _table(name: str) -> TableSchema:
    return TableSchema("db", name, (Column("id", "int", "int", False),), ("id",), "id")


def test_reset_without_tables_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["snapshot", "--set", "source.database=db", "--reset"]) == 2
    assert "--reset needs --tables" in capsys.readouterr().err


def test_tables_accept_repeats_and_comma_lists() -> None:
    args = build_parser().parse_args(["snapshot", "--tables", "a,b", "--tables", " c "])
    assert args.tables == ["a", "b", "c"]


def test_tables_that_are_not_captured_are_named() -> None:
    tables = [_table("orders"), _table("items")]
    assert [t.name for t in chosen_tables(tables, ["items"])] == ["items"]
    assert chosen_tables(tables, None) == tables
    with pytest.raises(ConfigError, match=r"--tables names ordres.*captured: db.items, db.orders"):
        chosen_tables(tables, ["ordres"])


def test_tables_of_several_databases_are_named_as_db_table() -> None:
    tables = [_table("orders"), replace(_table("orders"), database="eu"), _table("items")]
    assert chosen_tables(tables, ["eu.orders", "items"]) == [tables[1], tables[2]]
    assert chosen_tables(tables, ["db.orders"]) == [tables[0]]
    with pytest.raises(ConfigError, match=r"--tables names orders, a table of several databases"):
        chosen_tables(tables, ["orders"])


COMMANDS = ["snapshot", "stream", "run", "status", "verify", "bundle"]
BUNDLE_ACTIONS = ["validate", "run-local", "deploy"]


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_lists_every_command_with_a_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys)
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\s+\S", text, re.MULTILINE), command


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_description_of_its_own(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    text = _help(capsys, command)
    description = text.split("\n\n")[1]
    assert not description.startswith(("positional", "options")), text
    assert len(description.split()) >= 8


def test_bundle_help_lists_its_actions(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "bundle")
    for action in BUNDLE_ACTIONS:
        assert re.search(rf"^\s+{action}\s+\S", text, re.MULTILINE), action


@pytest.mark.parametrize("action", BUNDLE_ACTIONS)
def test_every_bundle_action_has_help(capsys: pytest.CaptureFixture[str], action: str) -> None:
    assert "--target" in _help(capsys, "bundle", action)


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"binlake {importlib.metadata.version('binlake')}"


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["status"], False),
        (["-v", "status"], True),
        (["status", "-v"], True),
        (["status", "--config", "x.yml", "--verbose"], True),
        (["-v", "status", "--config", "x.yml"], True),
        (["bundle", "validate", "-v"], True),
        (["bundle", "-v", "validate"], True),
        (["-v", "bundle", "validate"], True),
        (["bundle", "validate"], False),
    ],
)
def test_verbose_is_accepted_anywhere(argv: list[str], verbose: bool) -> None:
    assert build_parser().parse_args(argv).verbose is verbose


def test_commands_do_not_import_the_databricks_sdk_to_parse_arguments() -> None:
    """A bad config answers in well under 2 s: parsing must not pull in the SDK (or Spark)."""
    import subprocess
    import sys

    probe = (
        "import sys; from binlake.jobs.cli import build_parser; "
        "build_parser().parse_args(['status']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('databricks', 'pyspark')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_complete_every_command(
    capsys: pytest.CaptureFixture[str], shell: str
) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    for command in ("init", "plan", "snapshot", "stream", "status", "verify", "bundle"):
        assert command in script
    assert "--password-env" in script and "--config" in script


def test_init_refuses_an_existing_file_before_it_asks_for_a_password(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    existing = tmp_path / "binlake.yml"
    existing.write_text("mine\n")
    assert main(["init", "--database", "shop", "--output", str(existing)]) == 2
    assert "exists: binlake init does not overwrite it" in capsys.readouterr().err
    assert existing.read_text() == "mine\n"


@pytest.mark.parametrize(
    ("argv", "next_command"),
    [
        (["snapshot", "--config", "binlake.yml"], "binlake stream --config binlake.yml"),
        (
            ["snapshot", "--set", "source.database=shop", "--set", "lake.root=/l"],
            "binlake stream --set source.database=shop --set lake.root=/l",
        ),
        (
            ["snapshot", "--set", "lake.root=/my lake", "--set", "source.password=hunter2"],
            "binlake stream --set 'lake.root=/my lake' --set 'source.password=…'",
        ),
    ],
)
def test_a_closing_line_names_the_next_command_with_this_runs_config(
    argv: list[str], next_command: str
) -> None:
    from binlake.jobs.cli import _next

    assert _next(build_parser().parse_args(argv), "stream") == next_command


def test_a_catch_ups_closing_words_count_its_batches_and_records() -> None:
    from binlake.jobs.cli import caught_up_text
    from binlake.stream.task import StreamSummary

    assert caught_up_text(StreamSummary(1, 3042, 12.34)) == (
        "caught up: 1 batch, 3,042 binlog records in 12.3 s"
    )
    assert caught_up_text(StreamSummary(2, 1, 3.0)) == (
        "caught up: 2 batches, 1 binlog record in 3.0 s"
    )
    # A batch that found nothing is no news: "0 batches" beside "batch 0 applied" misled.
    assert caught_up_text(StreamSummary(1, 0, 0.5)) == "caught up: nothing new in 0.5 s"


def test_every_secret_key_of_the_config_is_kept_out_of_closing_lines() -> None:
    from pydantic import BaseModel, SecretStr

    from binlake.config.settings import Config
    from binlake.jobs.cli import _SECRET_KEYS

    def secret_fields(model: type[BaseModel]) -> set[str]:
        found = set()
        for name, field in model.model_fields.items():
            hint = str(field.annotation)
            if SecretStr.__name__ in hint:
                found.add(name)
            for arg in getattr(field.annotation, "__args__", (field.annotation,)):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    found |= secret_fields(arg)
        return found

    assert secret_fields(Config) == _SECRET_KEYS


def test_a_sigterm_is_handled_as_a_ctrl_c() -> None:
    """`kill` stops a command as Ctrl-C does: through the SIGINT handler in place then."""
    import os
    import signal

    from binlake.jobs.cli import terminate_as_interrupt

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    seen: list[int] = []
    try:
        signal.signal(signal.SIGINT, lambda signum, _frame: seen.append(signum))
        terminate_as_interrupt()
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        # A Ctrl-C that reaches the command as a bare KeyboardInterrupt (a stream between
        # batches): on an earlier commit the line ended after "interrupted: ", saying nothing.
        (KeyboardInterrupt(), "stream stopped; what it committed stays: run the same command"),
        (KeyboardInterrupt("snapshot stopped with 3/9 chunks committed"), "3/9 chunks committed"),
    ],
)
def test_an_interrupt_ends_with_a_line_that_says_what_stays(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    raised: KeyboardInterrupt,
    said: str,
) -> None:
    def interrupted(*_: object) -> int:
        raise raised

    monkeypatch.setattr("binlake.jobs.cli._run_command", interrupted)
    assert main(["stream", "--set", "source.database=db"]) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("binlake: interrupted: ") and said in last, last
