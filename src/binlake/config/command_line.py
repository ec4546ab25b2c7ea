"""The `binlake` job commands' grammar: their arguments and the config they build.

Both the CLI (`binlake.jobs.cli`, which adds the `bundle` command) and the bundle's validation
of its tasks (`binlake.bundle.validate`) parse with it, so a task is checked exactly as the
runtime will run it, and the bundle package never imports the CLI that imports it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable, Sequence
from typing import Any

import shtab

from binlake.config.settings import Config, SourceConfig, load_config, parse_config
from binlake.errors import ConfigError

#: Adds commands to the parser: (its subparsers, the `-v` option's parent parser).
MoreCommands = Callable[[Any, argparse.ArgumentParser], None]


def _overrides(pairs: Sequence[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE (e.g. source.host=db1), got {pair!r}")
        result[key.strip()] = value
    return result


def config_from_args(args: argparse.Namespace) -> Config:
    overrides = _overrides(args.set or [])
    if args.config:
        return load_config(args.config, overrides)
    if not overrides:
        raise ConfigError("give --config FILE (and/or --set KEY=VALUE for every required key)")
    return parse_config({}, overrides)


def build_parser(more_commands: MoreCommands | None = None) -> argparse.ArgumentParser:
    """The job commands' parser; `more_commands(subparsers, verbosity)` adds others (the CLI's
    `bundle`)."""
    # `-v` is accepted before and after the command: the subparsers' copy defaults to SUPPRESS,
    # so an absent `-v` after the command keeps what the main parser found before it.
    verbosity = _verbosity(argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="binlake",
        description="Lock-free MySQL/MariaDB snapshots and CDC into Delta Lake.",
        epilog="`binlake COMMAND --help` describes a command and its options.",
        parents=[_verbosity(False)],
    )
    parser.add_argument("--version", action="version", version=f"binlake {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _first_commands(commands, verbosity)
    _job_commands(commands, verbosity)
    _report_commands(commands, verbosity)
    if more_commands is not None:
        more_commands(commands, verbosity)
    return parser


def _command(
    commands: Any, verbosity: argparse.ArgumentParser, name: str, summary: str, description: str
) -> argparse.ArgumentParser:
    """A job command's parser, with the options every job command takes: `--config`, `--set`
    and `-v`."""
    sub = commands.add_parser(name, help=summary, description=description, parents=[verbosity])
    config = sub.add_argument(
        "--config", help="YAML config file (keys: docs/configuration.md#every-key)"
    )
    config.complete = shtab.FILE  # shtab reads it: complete file names
    sub.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set snapshot.parallelism=2 (repeatable)",
    )
    return sub


def _first_commands(commands: Any, verbosity: argparse.ArgumentParser) -> None:
    """The commands of a first setup, which start no job: `init` and `plan`."""
    init = commands.add_parser(
        "init",
        help="write a commented starter config from a source database",
        description="Connect to the source, list the database's base tables with the key each "
        "would be read by and the server's row estimate, and write a config that loads as it "
        "is. The password comes from the environment variable --password-env names (asked for "
        "at the terminal when it is unset) and is never written to the file.",
        parents=[verbosity],
    )
    init.add_argument("--database", required=True, help="the database to capture")
    # Unset options take the config's defaults (`SourceConfig`), named in their help.
    default = {name: field.default for name, field in SourceConfig.model_fields.items()}
    init.add_argument("--host", help=f"the source's host (default {default['host']})")
    init.add_argument("--port", type=int, help=f"the source's port (default {default['port']})")
    init.add_argument("--user", help=f"the source user (default {default['user']})")
    init.add_argument(
        "--password-env",
        metavar="VARIABLE",
        help="the environment variable holding the password, written as source.password_env "
        f"(default {default['password_env']})",
    )
    output = init.add_argument(
        "--output", "-o", default="binlake.yml", help="the file to write (default binlake.yml)"
    )
    output.complete = shtab.FILE  # shtab reads it: complete file names
    init.add_argument("--force", action="store_true", help="replace the file if it exists")
    _command(
        commands,
        verbosity,
        "plan",
        "show what a snapshot would read, without Spark",
        "A dry run of `binlake snapshot`: per captured table its key and split column, the "
        "server's row estimate and its chunks (the ledger's recorded plan, or the snapshot "
        "planner's), the chunk reads the source would see at once and the server ids the job "
        "would take. Reads no rows, writes nothing, starts no Spark.",
    )


def _job_commands(commands: Any, verbosity: argparse.ArgumentParser) -> None:
    """The commands a job runs, each with `--job-id`: `snapshot`, `stream` and `run`."""
    snapshot = _command(
        commands,
        verbosity,
        "snapshot",
        "bronze snapshot: plan chunks, read them lock-free, write bronze",
        "Split each captured table by its key into chunks, read the chunks in parallel without "
        "locks, correct each with the binlog between its watermarks and write it to bronze. "
        "Resumable: a rerun skips the chunks the ledger records as finished.",
    )
    _tables_option(snapshot)
    snapshot.add_argument(
        "--reset",
        action="store_true",
        help="with --tables: forget their snapshot, silver and changelog and snapshot them "
        "again while the stream keeps applying the other tables",
    )
    stream = _command(
        commands,
        verbosity,
        "stream",
        "silver stream: tail the binlog and MERGE into silver",
        "Tail the binlog from the snapshot's smallest high watermark (or stream.startup_mode), "
        "drop the changes a chunk already holds and MERGE the rest into silver, exactly once. "
        "Runs until interrupted unless --available-now.",
    )
    stream.add_argument(
        "--available-now", action="store_true", help="catch up to the binlog head, then stop"
    )
    run = _command(
        commands,
        verbosity,
        "run",
        "snapshot, then stream with --available-now",
        "Finish the snapshot (a no-op once the ledger is complete), then catch silver up to the "
        "binlog head and stop: what a scheduled catch-up job runs.",
    )
    for job_command in (snapshot, stream, run):
        job_command.add_argument(
            "--job-id",
            metavar="ID",
            help="the Databricks job running this command (the bundle passes {{job.id}}): a "
            "stop that a retry cannot fix pauses the job's trigger, schedule or continuous run",
        )


def _report_commands(commands: Any, verbosity: argparse.ArgumentParser) -> None:
    """The commands that report on the lake: `status` and `verify`."""
    status = _command(
        commands,
        verbosity,
        "status",
        "chunks done/total, rows and stream lag per table",
        "Per table: snapshot chunks done/total, bronze and silver rows; the stream's offset and "
        "its lag behind the source's binlog head.",
    )
    status.add_argument(
        "--json", action="store_true", help="print one JSON object, for scripts and alerts"
    )
    verify = _command(
        commands,
        verbosity,
        "verify",
        "compare silver with the source; exit 1 on a difference",
        "Compare every silver table with the source chunk by chunk (the source read without "
        "locks) and name the keys that differ, and whether the stream is behind; exit 1 on a "
        "difference.",
    )
    _tables_option(verify)
    verify.add_argument(
        "--wait-for-stream",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for a stream running elsewhere to apply the binlog up to "
        "the source's head, so that its lag is not taken for a difference",
    )


def _tables_option(command: argparse.ArgumentParser) -> None:
    """`--tables`: the captured tables a command is limited to."""
    command.add_argument(
        "--tables",
        type=lambda text: [t.strip() for t in text.split(",") if t.strip()],
        action="extend",
        metavar="T[,T...]",
        help="only these captured tables (repeatable or comma-separated)",
    )


def _verbosity(default: object) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="debug logging, Spark's own messages, tracebacks of unexpected errors",
    )
    options.add_argument(
        "--log-json",
        action="store_true",
        default=default,
        help="log lines as JSON objects, one a line (time, level, logger, message, event)",
    )
    return options


def _version() -> str:
    try:
        return importlib.metadata.version("binlake")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "(not installed)"
