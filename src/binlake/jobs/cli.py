"""`binlake` command line: parses arguments, builds the config and the Spark session once, and
calls the job entry points in `binlake.jobs.commands` (the same functions the bundle's tasks
call)."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.bundle.cli import add_bundle_command, run_action
from binlake.config.command_line import build_parser as build_job_parser
from binlake.config.command_line import config_from_args
from binlake.errors import BinlakeError, ConfigError
from binlake.jobs.json_logs import JsonLines
from binlake.jobs.terminal_log import TerminalLog, drawing
from binlake.model.counts import counted

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from binlake.lake.event_log import StopHook
    from binlake.stream.task import StreamSummary

log = logging.getLogger("binlake")


def build_parser() -> argparse.ArgumentParser:
    """Every command: the job commands, `bundle` and `completion`."""

    def more_commands(commands: Any, verbosity: argparse.ArgumentParser) -> None:
        add_bundle_command(commands, verbosity)
        completion = commands.add_parser(
            "completion",
            help="print the shell completion script for bash or zsh",
            description="Print binlake's completion script, generated from its own arguments. "
            'bash: `eval "$(binlake completion bash)"` in ~/.bashrc; zsh: `binlake completion '
            "zsh > ~/.zfunc/_binlake` with ~/.zfunc on fpath before compinit.",
            parents=[verbosity],
        )
        completion.add_argument("shell", choices=("bash", "zsh"))

    return build_job_parser(more_commands)


#: Exit code of an exception binlake did not anticipate (sysexits' EX_SOFTWARE): a bug.
UNEXPECTED_EXIT = 70
#: Exit code of a command stopped by Ctrl-C: the shell's for a process SIGINT ended.
INTERRUPTED_EXIT = 130
#: Commands whose source (and, for writers, lake root) is checked before Spark starts.
_PREFLIGHT = {"snapshot", "stream", "run", "verify"}
_WRITES_LAKE = {"snapshot", "stream", "run"}
#: Commands whose output is what they print: their progress is not logged unless `-v` asks.
_PRINTS = {"init", "plan", "completion"}
#: `--set` keys whose values are secrets (the config's `SecretStr` fields).
_SECRET_KEYS = {"password"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure ends in one `binlake: error:` line and its exit code
    (`BinlakeError.exit_code`, `UNEXPECTED_EXIT` for anything else), never a traceback unless
    `-v` asks for it."""
    args = build_parser().parse_args(argv)
    handler = _log_to_stderr(args)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    terminate_as_interrupt()
    pause = _job_pause(args)
    try:
        with drawing(handler):  # a progress bar stops before the last line is printed
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
    except KeyboardInterrupt as stop:  # a command that stopped cleanly says what it left
        print(f"binlake: interrupted: {str(stop) or _interrupted(args.command)}", file=sys.stderr)
        return INTERRUPTED_EXIT


def _log_to_stderr(args: argparse.Namespace) -> logging.Handler:
    """Log lines on stderr: with `--log-json` one JSON object a line; on a terminal, long work
    drawn as a progress bar with the other lines above it (`terminal_log`); else plain lines."""
    handler: logging.Handler
    if args.log_json:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonLines())
    else:
        handler = TerminalLog() if _on_terminal() else logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else _log_level(args.command), handlers=[handler]
    )
    return handler


def _on_terminal() -> bool:
    """Whether stderr is a terminal that can redraw a line (not a pipe, a file or `TERM=dumb`)."""
    return sys.stderr.isatty() and os.environ.get("TERM", "") != "dumb"


def terminate_as_interrupt() -> None:
    """From now on a SIGTERM (`kill`, a service manager's stop) is handled as a Ctrl-C: whatever
    SIGINT handler is in place then (a snapshot finishing its reads, the quiet stop) decides,
    and the command ends with the same one line. Only the main thread may set handlers."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda _signum, _frame: os.kill(os.getpid(), signal.SIGINT))


def _log_level(command: str) -> int:
    """INFO for the jobs; warnings only for the commands whose output is what they print."""
    return logging.WARNING if command in _PRINTS else logging.INFO


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
    if args.command == "completion":
        import shtab

        print(shtab.complete(build_parser(), shell=args.shell), end="")
        return 0
    if args.command == "init":
        return _init(args)
    if args.command == "snapshot" and args.reset and not args.tables:
        raise ConfigError("--reset needs --tables naming the tables to snapshot again")
    config = config_from_args(args)
    if args.command == "plan":  # before anything imports pyspark: a plan starts no Spark
        from binlake.jobs.plan import gather_plan, render_plan

        print(render_plan(gather_plan(config)))
        return 0
    if args.command in _WRITES_LAKE:
        from binlake.lake.lease import refuse_if_running

        refuse_if_running(config, args.command)
    if config.source.binlog_archive is not None and args.command in {*_PREFLIGHT, "status"}:
        from binlake.jobs.preflight import check_archive

        check_archive(config, args.command)
    elif args.command in _PREFLIGHT:
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
        log.info("starting Spark (a local start takes about 10 s)")
        began = time.monotonic()
        session = get_or_create(quiet=not args.verbose, warehouse_dir=warehouse)
        log.info("Spark started in %.0f s", time.monotonic() - began)
        if not args.verbose:
            quiet_interrupts(session)
        return session

    if args.command == "status":  # starts Spark only for a catalog's tables
        print(commands.status(config, spark, as_json=args.json))
    elif args.command == "snapshot":
        commands.snapshot(spark(), config, args.tables, args.reset, on_stop=pause)
        log.info("next: %s (`--available-now` catches up and stops)", _next(args, "stream"))
    elif args.command == "stream":
        caught_up = commands.stream(spark(), config, args.available_now, on_stop=pause)
        if args.available_now and config.source.binlog_archive is not None:
            log.info("%s of the binlog archive", caught_up_text(caught_up))
        elif args.available_now:
            log.info("%s; next: %s", caught_up_text(caught_up), _next(args, "verify"))
    elif args.command == "run":
        caught_up = commands.run(spark(), config, on_stop=pause)
        log.info("%s; next: %s", caught_up_text(caught_up), _next(args, "status"))
    elif args.command == "verify":
        return commands.verify(spark(), config, args.tables, args.wait_for_stream)
    return 0


def _next(args: argparse.Namespace, command: str) -> str:
    """`binlake COMMAND` with the config this run was given, for a closing line to name, shell
    quoted; a secret given with `--set` is named, never shown."""
    given = ["--config", args.config] if args.config else []
    for pair in args.set or []:
        key = pair.partition("=")[0]
        given += ["--set", f"{key}=…" if key.rsplit(".", 1)[-1] in _SECRET_KEYS else pair]
    return shlex.join(["binlake", command, *given])


def caught_up_text(summary: StreamSummary) -> str:
    """A catch-up's closing words: its batches, records and time."""
    if summary.changes == 0:
        return f"caught up: nothing new in {summary.seconds:.1f} s"
    batches = counted(summary.batches, "batch", "batches")
    records = counted(summary.changes, "binlog record")
    return f"caught up: {batches}, {records} in {summary.seconds:.1f} s"


def _init(args: argparse.Namespace) -> int:
    """`binlake init`: the starter config written, what it holds on stdout, and the source's
    refusal of its settings, if any, as one warning line."""
    from binlake.jobs.starter_config import init, summary

    settings = {
        "host": args.host,
        "port": args.port,
        "user": args.user,
        "database": args.database,
        "password_env": args.password_env,
    }
    path = Path(args.output)
    starter = init(settings, path, args.force)
    print(summary(starter, path))
    if starter.warning is not None:
        print(f"binlake: warning: {starter.warning}", file=sys.stderr)
    return 0


def run() -> None:
    """Console-script and wheel-task entry point: the exit status reaches the caller (a Databricks
    task fails when this raises SystemExit with a non-zero code)."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
