"""`binlake bundle validate`: the checks a deploy or a run would otherwise fail on late, and
what the target's mode, presets, run_as and permissions make of each job.

Loading the bundle already checks the files' keys, that every `${...}` resolves, the rules of
the target's mode and that each job parses into the SDK's `JobSettings` without loss. This adds
binlake's own rules, which need the whole job: depends_on names tasks of the job without a
cycle, and each task's parameters, with the job parameters at their defaults, form a `binlake`
command line whose configuration is valid.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from binlake.bundle.definition import Bundle, Job
from binlake.bundle.tasks import task_arguments, task_order
from binlake.config import command_line
from binlake.errors import BundleError, ConfigError


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
        summary.append(
            f"{job.key} ({job.settings.name}): {' → '.join(t.task_key for t in tasks)}"
            + "".join(f"; {fact}" for fact in _deployed_as(job))
        )
    if problems:
        raise BundleError(
            f"bundle {bundle.name!r}, target {bundle.target!r}: " + "; ".join(problems)
        )
    return summary + _other_resources(bundle)


def _other_resources(bundle: Bundle) -> list[str]:
    """One line per schema, volume and secret scope (its full name and who gets what on it) and
    per alert (none for a target with neither a mode nor a workspace, which only runs locally;
    `dev` and `prod` take their workspace from the CLI's authentication)."""
    lines: list[str] = []
    if bundle.mode is None and not bundle.connection.settings:
        return lines
    for key, schema in bundle.resources.get("schemas", {}).items():
        lines.append(
            f"schema {schema.catalog_name}.{schema.name} ({key})"
            + _grants(schema)
            + _kept(schema.lifecycle)
        )
    for key, volume in bundle.resources.get("volumes", {}).items():
        name = f"{volume.catalog_name}.{volume.schema_name}.{volume.name}"
        lines.append(f"volume {name} ({key})" + _grants(volume) + _kept(volume.lifecycle))
    for key, scope in bundle.resources.get("secret_scopes", {}).items():
        given = [
            f"{p.level.value} for {p.user_name or p.group_name or p.service_principal_name}"
            for p in scope.permissions
        ]
        lines.append(
            f"secret scope {scope.name} ({key})"
            + "".join(f"; {g}" for g in given)
            + _kept(scope.lifecycle)
        )
    lines += [_alert(key, alert) for key, alert in bundle.resources.get("alerts", {}).items()]
    return lines


def _alert(key: str, alert: Any) -> str:
    """The alert's name, warehouse, schedule and who it notifies."""
    notification = alert.evaluation.notification
    emails = [s.user_email or s.destination_id for s in notification.subscriptions or []]
    return (
        f"alert {alert.display_name} ({key}) on warehouse {alert.warehouse_id}, "
        f"{alert.schedule.quartz_cron_schedule} {alert.schedule.timezone_id}; "
        f"notifies {', '.join(emails) or 'nobody'}"
    )


def _kept(lifecycle: Any) -> str:
    """`; survives destroy` for a resource whose `lifecycle.prevent_destroy` makes the CLI
    refuse a `bundle destroy` that would delete it."""
    return "; survives destroy" if lifecycle and lifecycle.prevent_destroy else ""


def _grants(resource: Any) -> str:
    return "".join(
        f"; {', '.join(p.value for p in grant.privileges)} for {grant.principal or '(nobody)'}"
        for grant in resource.grants
    )


def describe(bundle: Bundle) -> list[str]:
    """Where the target deploys: its mode, workspace and root path. A target with neither a
    mode nor a workspace (no host, no profile) only runs locally and is not asked for its root
    path: that would need whatever workspace the environment points at."""
    line = f"target {bundle.target!r}" + (f" (mode: {bundle.mode})" if bundle.mode else "")
    if bundle.mode is None and not bundle.connection.settings:
        return [f"{line}: no workspace (run-local, or deploy to DATABRICKS_HOST)"]
    return [f"{line} on {bundle.connection.describe()}, root path {bundle.root_path}"]


def _deployed_as(job: Job) -> list[str]:
    """What a deploy makes of the job besides its tasks: compute, pause states, run_as,
    permissions."""
    settings = job.settings
    facts = [_compute(job)] if _compute(job) else []
    facts += [
        f"{name} {trigger.pause_status.value}"
        for name, trigger in (
            ("schedule", settings.schedule),
            ("continuous", settings.continuous),
            ("trigger", settings.trigger),
        )
        if trigger is not None and trigger.pause_status is not None
    ]
    if settings.run_as:
        identity = settings.run_as.user_name or settings.run_as.service_principal_name
        facts.append(f"runs as {identity}")
    facts += [
        f"{entry.permission_level.value if entry.permission_level else '?'} for "
        f"{entry.user_name or entry.group_name or entry.service_principal_name}"
        for entry in job.access_control
    ]
    return facts + (["survives destroy"] if job.lifecycle.get("prevent_destroy") else [])


def _compute(job: Job) -> str:
    """Where the job runs: a serverless environment, or its job clusters' node types."""
    settings = job.settings
    clusters = [
        f"job cluster {c.new_cluster.node_type_id or '(policy default)'} "
        f"× {c.new_cluster.num_workers or 0}"
        for c in settings.job_clusters or []
        if c.new_cluster is not None
    ]
    environments = [
        f"serverless environment {e.spec.environment_version or e.spec.client}"
        for e in settings.environments or []
        if e.spec is not None
    ]
    return ", ".join(clusters + environments)


def check_cli_call(where: str, arguments: list[str]) -> None:
    """Parse `arguments` as `binlake.jobs.cli.main` parses a job command (a task runs no `binlake
    bundle`: its parser refuses it) and build their configuration."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = command_line.build_parser().parse_args(arguments)
    except SystemExit:
        reason = errors.getvalue().strip().splitlines()[-1:] or ["unparseable"]
        raise BundleError(f"{where}: the binlake CLI rejects its parameters: {reason[0]}") from None
    try:
        command_line.config_from_args(args)
    except ConfigError as exc:
        raise BundleError(f"{where}: {exc}") from None
