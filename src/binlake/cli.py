"""`binlake` command line: parses arguments, builds the config and the Spark session once, and
calls the job entry points in `binlake.jobs` (the same functions the bundle's tasks call)."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence

from binlake.config import Config, load_config, parse_config
from binlake.errors import BinlakeError, ConfigError

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
    parser = argparse.ArgumentParser(
        prog="binlake", description="Lock-free MySQL/MariaDB snapshots and CDC into Delta Lake."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--config", help="YAML config file")
        sub.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            help="override a config key, e.g. --set snapshot.parallelism=2 (repeatable)",
        )
        return sub

    snapshot = command(
        "snapshot", "bronze snapshot: plan chunks, read them lock-free, write bronze"
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
    stream = command("stream", "silver stream: tail the binlog and MERGE into silver")
    stream.add_argument(
        "--available-now", action="store_true", help="catch up to the binlog head, then stop"
    )
    command("run", "snapshot, then stream with --available-now")
    command("status", "chunks done/total, rows and stream lag per table")
    command("verify", "compare silver with the source chunk by chunk; exit 1 on a difference")
    bundle = commands.add_parser("bundle", help="run, validate or deploy the job bundle")
    bundle.add_argument("bundle_args", nargs=argparse.REMAINDER)
    return parser


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
        from binlake.bundle.cli import main as bundle_main

        return bundle_main(args.bundle_args)
    if args.command == "snapshot" and args.reset and not args.tables:
        raise ConfigError("--reset needs --tables naming the tables to snapshot again")
    config = config_from_args(args)
    if args.command in _PREFLIGHT:
        # Before the JVM: bad input ends in seconds, with nothing written.
        from binlake.preflight import preflight

        stream_id = config.stream_server_id if args.command == "stream" else None
        preflight(config, args.command in _WRITES_LAKE, getattr(args, "tables", None), stream_id)
    from binlake import jobs
    from binlake.spark import get_or_create

    spark = get_or_create()
    if args.command == "snapshot":
        jobs.snapshot(spark, config, args.tables, args.reset)
    elif args.command == "stream":
        jobs.stream(spark, config, available_now=args.available_now)
    elif args.command == "run":
        jobs.run(spark, config)
    elif args.command == "status":
        print(jobs.status(spark, config))
    elif args.command == "verify":
        return jobs.verify(spark, config)
    return 0


def run() -> None:
    """Console-script and wheel-task entry point: the exit status reaches the caller (a Databricks
    task fails when this raises SystemExit with a non-zero code)."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
