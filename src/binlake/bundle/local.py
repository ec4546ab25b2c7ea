"""`binlake bundle run-local JOB`: a bundle job's tasks on this machine, in dependency order.
(Named so that nobody takes it for `databricks bundle run`, which runs a deployed job on a
workspace.)

Each task calls the function the Databricks runtime calls for it — `binlake.jobs.cli.main` with the
task's parameters — in this process, so a local run and a workspace run share one code path;
the Spark session comes from `binlake.runtime.spark.get_or_create` in both. The CLI passes
`binlake.jobs.cli.main` as `execute`; tests pass their own to record the calls.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping, Sequence

from binlake.bundle.definition import Bundle
from binlake.bundle.tasks import task_arguments, task_order
from binlake.errors import BundleError

log = logging.getLogger(__name__)

#: Runs one task's `binlake` command line and returns its exit code, like `binlake.jobs.cli.main`.
TaskExecutor = Callable[[Sequence[str]], int]


class TaskFailed(BundleError):
    """A task of a local run failed: binlake exits with the task's own exit code, so a script
    tells a source that is down from a bad config as it would for the task's command."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_job(
    bundle: Bundle,
    job_key: str,
    parameters: Mapping[str, str] | None = None,
    *,
    execute: TaskExecutor,
) -> None:
    """Run every task of the job; the first failing task stops the run, as on Databricks,
    where a task whose dependency failed does not start."""
    job = bundle.job(job_key)
    tasks = task_order(job)
    # Resolve every task's arguments first: a bad parameter fails before anything runs.
    runs = [(task.task_key, task_arguments(job, task, parameters)) for task in tasks]
    for index, (task_key, arguments) in enumerate(runs):
        log.info("job %s, task %s: binlake %s", job_key, task_key, shlex.join(arguments))
        exit_code = execute(arguments)
        if exit_code != 0:
            skipped = [key for key, _ in runs[index + 1 :]]
            raise TaskFailed(
                f"task {task_key!r} of job {job_key!r} failed with exit code {exit_code}"
                + (f"; not run: {', '.join(skipped)}" if skipped else ""),
                exit_code,
            )
