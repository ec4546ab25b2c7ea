"""What a bundle job runs: its tasks in dependency order, and the binlake command line of each.

A task is a `python_wheel_task` of package `binlake`, entry point `binlake`: on Databricks the
runtime calls `binlake.jobs.cli.main` with the task's parameters, locally `binlake bundle run-local`
does the same in-process. `{{job.parameters.NAME}}` in the parameters is the Jobs service's dynamic
value reference; here it is replaced by the job parameter's value, as the service would, and
`{{job.id}}` by nothing: a local run belongs to no Databricks job, so no stop pauses one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from databricks.sdk.service.jobs import Task

from binlake.bundle.definition import Job
from binlake.errors import BundleError

PACKAGE = "binlake"
ENTRY_POINT = "binlake"
_JOB_PARAMETER = re.compile(r"\{\{\s*job\.parameters\.([^{}\s]+)\s*\}\}")
_JOB_ID = re.compile(r"\{\{\s*job\.id\s*\}\}")
_DYNAMIC_VALUE = re.compile(r"\{\{.*?\}\}")


def task_order(job: Job) -> list[Task]:
    """The tasks so that each runs after the tasks it depends on; ties keep the file's order."""
    tasks = {task.task_key: task for task in job.settings.tasks or []}
    pending = {key: _dependencies(job, task, tasks) for key, task in tasks.items()}
    ordered: list[Task] = []
    while pending:
        ready = [key for key, needs in pending.items() if not needs]
        if not ready:
            raise BundleError(
                f"tasks {', '.join(sorted(pending))} of job {job.key!r} depend on each other in "
                "a cycle; remove one of their depends_on"
            )
        for key in ready:
            ordered.append(tasks[key])
            del pending[key]
        for needs in pending.values():
            needs.difference_update(ready)
    return ordered


def _dependencies(job: Job, task: Task, tasks: Mapping[str, Task]) -> set[str]:
    needs = {dependency.task_key for dependency in task.depends_on or []}
    unknown = sorted(needs - set(tasks))
    if unknown:
        raise BundleError(
            f"task {task.task_key!r} of job {job.key!r} depends on {', '.join(unknown)}, "
            f"not a task of the job (its tasks are {', '.join(tasks)})"
        )
    return needs


def task_arguments(job: Job, task: Task, parameters: Mapping[str, str] | None = None) -> list[str]:
    """The `binlake` command line of `task`, with job parameters at their defaults or as given."""
    wheel = task.python_wheel_task
    if wheel is None or (wheel.package_name, wheel.entry_point) != (PACKAGE, ENTRY_POINT):
        raise BundleError(
            f"task {task.task_key!r} of job {job.key!r} is not a python_wheel_task with "
            f"package_name {PACKAGE!r} and entry_point {ENTRY_POINT!r}: binlake runs only those"
        )
    values = job_parameters(job, parameters or {})

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise BundleError(
                f"task {task.task_key!r} of job {job.key!r} uses {{{{job.parameters.{name}}}}}, "
                "but the job declares no such parameter"
            )
        return values[name]

    arguments = [
        _JOB_ID.sub("", _JOB_PARAMETER.sub(substitute, argument))
        for argument in wheel.parameters or []
    ]
    for argument in arguments:
        leftover = _DYNAMIC_VALUE.search(argument)
        if leftover:
            raise BundleError(
                f"task {task.task_key!r} of job {job.key!r} uses {leftover.group(0)}, which only "
                "the Jobs service resolves; binlake resolves {{job.parameters.NAME}} and "
                "{{job.id}} only"
            )
    return arguments


def job_parameters(job: Job, overrides: Mapping[str, str]) -> dict[str, str]:
    """The job's parameter values: the declared defaults, replaced by `overrides`."""
    defaults = job.parameter_defaults
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise BundleError(
            f"job {job.key!r} has no parameter {', '.join(unknown)}; "
            f"its parameters are {', '.join(defaults) or 'none'}"
        )
    return {**defaults, **overrides}
