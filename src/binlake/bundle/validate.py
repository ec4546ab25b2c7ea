"""`binlake bundle validate`: offline checks that a deploy or a run would otherwise find late.

Loading the bundle already checks the files' keys, that every `${...}` resolves and that each
job parses into the SDK's `JobSettings` without loss. This adds what needs the whole job:
depends_on names tasks of the job without a cycle, and each task's parameters, with the job
parameters at their defaults, form a `binlake` command line whose configuration is valid.
"""

from __future__ import annotations

import contextlib
import io

from binlake import cli
from binlake.bundle.definition import Bundle
from binlake.bundle.errors import BundleError
from binlake.bundle.tasks import task_arguments, task_order
from binlake.errors import ConfigError


def validate(bundle: Bundle) -> list[str]:
    """One line per job naming its tasks in run order; raises `BundleError` listing every
    problem found."""
    problems: list[str] = []
    summary: list[str] = []
    for job in bundle.jobs.values():
        try:
            tasks = task_order(job)
            for task in tasks:
                where = f"task {task.task_key!r} of job {job.key!r}"
                check_cli_call(where, task_arguments(job, task))
        except BundleError as exc:
            problems.append(str(exc))
            continue
        summary.append(f"{job.key} ({job.settings.name}): {' → '.join(t.task_key for t in tasks)}")
    if problems:
        raise BundleError(
            f"bundle {bundle.name!r}, target {bundle.target!r}: " + "; ".join(problems)
        )
    return summary


def check_cli_call(where: str, arguments: list[str]) -> None:
    """Parse `arguments` as `binlake.cli.main` would and build their configuration."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = cli.build_parser().parse_args(arguments)
    except SystemExit:
        reason = errors.getvalue().strip().splitlines()[-1:] or ["unparseable"]
        raise BundleError(f"{where}: the binlake CLI rejects its parameters: {reason[0]}") from None
    if args.command == "bundle":
        raise BundleError(f"{where} runs `binlake bundle`; a task must run a job command")
    try:
        cli.config_from_args(args)
    except ConfigError as exc:
        raise BundleError(f"{where}: {exc}") from None
