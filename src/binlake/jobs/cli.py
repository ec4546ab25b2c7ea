"""`binlake` command line: parses arguments, builds the config and the Spark session once, and
calls the job entry points in `binlake.jobs.commands` (the same functions the bundle's tasks
call)."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from binlake.bundle.cli import add_bundle_command, run_action
from binlake.config.command_line import build_parser as build_job_parser
from binlake.config.command_line import config_from_args
from binlake.errors import BinlakeError, ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from binlake.lake.event_log import StopHook

log = logging.getLogger("binlake")


def build_parser() -> argparse.ArgumentParser:
    """Every command: the job commands and `bundle`."""
    return build_job_parser(add_bundle_command)


#: Exit code of an exception binlake did not anticipate (sysexits' EX_SOFTWARE): a bug.
UNEXPECTED_EXIT = 70
#: Exit code of a command stopped by Ctrl-C: the shell's for a process SIGINT ended.
INTERRUPTED_EXIT = 130
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
    pause = _job_pause(args)
    try:
        return _run_command(args, pause)
    except BinlakeError as exc:
        if pause is not None:
            pause(exc)
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
    except KeyboardInterrupt:
        print(f"binlake: interrupted: {_interrupted(args.command)}", file=sys.stderr)
        return INTERRUPTED_EXIT


def _interrupted(command: str) -> str:
    """What a command stopped by Ctrl-C leaves, and what to do next."""
    if command in _WRITES_LAKE:
        return (
            f"{command} stopped; what it committed stays: run the same command again and it "
            "resumes where it stopped"
        )
    return f"{command} stopped"


def _job_pause(args: argparse.Namespace) -> StopHook | None:
    """The pause of the Databricks job that runs this command (`--job-id`), if any."""
    job_id = getattr(args, "job_id", None)
    if not job_id:
        return None
    from binlake.jobs.pause import JobPause

    return JobPause(job_id)


def _run_command(args: argparse.Namespace, pause: StopHook | None = None) -> int:
    if args.command == "bundle":
        return run_action(args, main)
    if args.command == "snapshot" and args.reset and not args.tables:
        raise ConfigError("--reset needs --tables naming the tables to snapshot again")
    config = config_from_args(args)
    if args.command in _WRITES_LAKE:
        from binlake.lake.lease import refuse_if_running

        refuse_if_running(config, args.command)
    if args.command in _PREFLIGHT:
        # Before the JVM: bad input ends in seconds, with nothing written.
        from binlake.jobs.preflight import preflight

        stream_id = config.stream_server_id if args.command == "stream" else None
        preflight(config, args.command in _WRITES_LAKE, getattr(args, "tables", None), stream_id)
    elif args.command == "status":
        from binlake.jobs.preflight import check_lake_root, check_reachable

        check_lake_root(config.lake)
        check_reachable(config.source)
    from binlake.runtime.spark import check_spark_version, get_or_create

    check_spark_version()
    from binlake.jobs import commands

    def spark() -> SparkSession:
        from binlake.lake.paths import system_path
        from binlake.runtime.interrupts import quiet_interrupts

        # The session catalog's warehouse inside the lake, not a `spark-warehouse/` left in
        # whatever directory the command ran from.
        warehouse = system_path(config, "warehouse")
        session = get_or_create(quiet=not args.verbose, warehouse_dir=warehouse)
        if not args.verbose:
            quiet_interrupts(session)
        return session

    if args.command == "status":  # starts Spark only for a catalog's tables
        print(commands.status(config, spark, as_json=args.json))
    elif args.command == "snapshot":
        commands.snapshot(spark(), config, args.tables, args.reset, on_stop=pause)
    elif args.command == "stream":
        commands.stream(spark(), config, available_now=args.available_now, on_stop=pause)
    elif args.command == "run":
        commands.run(spark(), config, on_stop=pause)
    elif args.command == "verify":
        return commands.verify(spark(), config, args.tables)
    return 0


def run() -> None:
    """Console-script and wheel-task entry point: the exit status reaches the caller (a Databricks
    task fails when this raises SystemExit with a non-zero code)."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
