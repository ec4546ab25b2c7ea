"""`binlake` command line: parses arguments, builds the config and the Spark session once, and
calls the job entry points in `binlake.jobs` (the same functions the bundle's tasks call)."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from binlake.config import Config, load_config, parse_config
from binlake.errors import BinlakeError, ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake")


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


def build_parser() -> argparse.ArgumentParser:
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

    def command(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=description, parents=[verbosity])
        sub.add_argument("--config", help="YAML config file (keys: see the README)")
        sub.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            help="override a config key, e.g. --set snapshot.parallelism=2 (repeatable)",
        )
        return sub

    snapshot = command(
        "snapshot",
        "bronze snapshot: plan chunks, read them lock-free, write bronze",
        "Split each captured table by its key into chunks, read the chunks in parallel without "
        "locks, correct each with the binlog between its watermarks and write it to bronze. "
        "Resumable: a rerun skips the chunks the ledger records as finished.",
    )
    snapshot.add_argument(
        "--tables",
        type=lambda text: [t.strip() for t in text.split(",") if t.strip()],
        action="extend",
        metavar="T[,T...]",
        help="only these captured tables (repeatable or comma-separated)",
    )
    snapshot.add_argument(
        "--reset",
        action="store_true",
        help="with --tables: forget their snapshot, silver and changelog and snapshot them "
        "again while the stream keeps applying the other tables",
    )
    stream = command(
        "stream",
        "silver stream: tail the binlog and MERGE into silver",
        "Tail the binlog from the snapshot's smallest high watermark (or stream.startup_mode), "
        "drop the changes a chunk already holds and MERGE the rest into silver, exactly once. "
        "Runs until interrupted unless --available-now.",
    )
    stream.add_argument(
        "--available-now", action="store_true", help="catch up to the binlog head, then stop"
    )
    command(
        "run",
        "snapshot, then stream with --available-now",
        "Finish the snapshot (a no-op once the ledger is complete), then catch silver up to the "
        "binlog head and stop: what a scheduled catch-up job runs.",
    )
    command(
        "status",
        "chunks done/total, rows and stream lag per table",
        "Per table: snapshot chunks done/total, bronze and silver rows; the stream's offset and "
        "its lag behind the source's binlog head.",
    )
    command(
        "verify",
        "compare silver with the source; exit 1 on a difference",
        "Compare every silver table with the source chunk by chunk (the source read without "
        "locks) and name the keys that differ; exit 1 on a difference.",
    )
    from binlake.bundle.cli import add_actions

    add_actions(
        commands.add_parser(
            "bundle",
            help="validate or deploy the job bundle, or run a job here (run-local)",
            description="The Databricks job bundle (bundle.yml, resources/*.yml): validate it, "
            "deploy its jobs to a workspace, or run a job's tasks on this machine.",
            parents=[verbosity],
        ),
        verbosity,
    )
    return parser


def _verbosity(default: object) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="debug logging, Spark's own messages, tracebacks of unexpected errors",
    )
    return options


def _version() -> str:
    try:
        return importlib.metadata.version("binlake")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "(not installed)"


#: Exit code of an exception binlake did not anticipate (sysexits' EX_SOFTWARE): a bug.
UNEXPECTED_EXIT = 70
#: Commands whose source (and, for writers, lake root) is checked before Spark starts.
_PREFLIGHT = {"snapshot", "stream", "run", "verify"}
_WRITES_LAKE = {"snapshot", "stream", "run"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure ends in one `binlake: error:` line and its exit code
    (`BinlakeError.exit_code`, `UNEXPECTED_EXIT` for anything else), never a traceback unless
    `-v` asks for it."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        return _run_command(args)
    except BinlakeError as exc:
        message = " ".join(str(exc).splitlines())  # one line, whatever the message holds
        print(f"binlake: error: {message}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        if args.verbose:
            traceback.print_exc()
        first = next(iter(str(exc).strip().splitlines()), "")
        hint = "" if args.verbose else " (run with -v for the traceback)"
        print(f"binlake: error: unexpected {type(exc).__name__}: {first}{hint}", file=sys.stderr)
        return UNEXPECTED_EXIT


def _run_command(args: argparse.Namespace) -> int:
    if args.command == "bundle":
        from binlake.bundle.cli import run_action

        return run_action(args)
    if args.command == "snapshot" and args.reset and not args.tables:
        raise ConfigError("--reset needs --tables naming the tables to snapshot again")
    config = config_from_args(args)
    if args.command in _WRITES_LAKE:
        from binlake.lease import refuse_if_running

        refuse_if_running(config, args.command)
    if args.command in _PREFLIGHT:
        # Before the JVM: bad input ends in seconds, with nothing written.
        from binlake.preflight import preflight

        stream_id = config.stream_server_id if args.command == "stream" else None
        preflight(config, args.command in _WRITES_LAKE, getattr(args, "tables", None), stream_id)
    elif args.command == "status":
        from binlake.preflight import check_reachable

        check_reachable(config.source)
    from binlake.spark import check_spark_version, get_or_create

    check_spark_version()
    from binlake import jobs

    def spark() -> SparkSession:
        return get_or_create(quiet=not args.verbose)

    if args.command == "status":  # starts Spark only for a catalog's tables
        print(jobs.status(config, spark))
    elif args.command == "snapshot":
        jobs.snapshot(spark(), config, args.tables, args.reset)
    elif args.command == "stream":
        jobs.stream(spark(), config, available_now=args.available_now)
    elif args.command == "run":
        jobs.run(spark(), config)
    elif args.command == "verify":
        return jobs.verify(spark(), config)
    return 0


def run() -> None:
    """Console-script and wheel-task entry point: the exit status reaches the caller (a Databricks
    task fails when this raises SystemExit with a non-zero code)."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
