"""`binlake bundle validate`: what a deploy or a run would otherwise fail on late and only binlake
can check, offline.

Loading the bundle already resolves every `${...}` binlake resolves, runs the bundle's loaders
and mutators and parses each resource by its typed model. This adds binlake's own rules, which
need the whole job: depends_on names tasks of the job without a cycle; each task's parameters,
with the job parameters at their defaults, form a `binlake` command line whose configuration is
valid; in a target with a `mode` (one that is deployed; `local` is not) every grant of a
schema, volume or secret scope names a principal; and a `mode: production` target's schemas,
volumes and secret scopes carry `lifecycle.prevent_destroy`. The keys and types of the files are
the Databricks CLI's JSON schema's business (tests/unit/bundle/test_cli_schema.py, `databricks
bundle validate`).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from binlake.bundle.definition import Bundle, Job
from binlake.bundle.tasks import task_arguments, task_order
from binlake.config import command_line
from binlake.errors import BundleError, ConfigError

#: The resources that hold data: a production target keeps each through `bundle destroy`.
DATA_RESOURCES = ("schemas", "volumes", "secret_scopes")


def validate(bundle: Bundle) -> list[str]:
    """One line per job naming its tasks in run order, then one per other resource; raises
    `BundleError` listing every problem found."""
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
    if bundle.mode == "production":
        problems += [
            f"{kind}.{key} needs lifecycle.prevent_destroy: true in a production target, so "
            "that `bundle destroy` cannot drop its data"
            for kind in DATA_RESOURCES
            for key, resource in bundle.resources.get(kind, {}).items()
            if not (resource.lifecycle and resource.lifecycle.prevent_destroy)
        ]
    nameless = [
        f"{kind}.{key}"
        for kind in DATA_RESOURCES
        for key, resource in bundle.resources.get(kind, {}).items()
        if bundle.mode and not all(map(_principal, _access(resource)))
    ]
    if nameless:
        problems.append(
            f"{', '.join(nameless)} grant access to nobody: give the variable the principal "
            "references a value (prod: BUNDLE_VAR_prod_service_principal or --var)"
        )
    if problems:
        raise BundleError(
            f"bundle {bundle.name!r}, target {bundle.target!r}: " + "; ".join(problems)
        )
    return summary + _other_resources(bundle)


def _other_resources(bundle: Bundle) -> list[str]:
    """One line per schema, volume and secret scope (its full name and who gets what on it) and
    per alert."""
    lines: list[str] = []
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
        given = [f"{p.level.value} for {_principal(p)}" for p in scope.permissions]
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


def _access(resource: Any) -> list[Any]:
    """A schema's or volume's grants, a secret scope's permissions."""
    return [
        *(getattr(resource, "grants", None) or []),
        *(getattr(resource, "permissions", None) or []),
    ]


def _principal(entry: Any) -> str:
    """Whom a grant or a secret scope permission names ("" for nobody)."""
    names = ("principal", "user_name", "group_name", "service_principal_name")
    return next((str(name) for name in (getattr(entry, n, None) for n in names) if name), "")


def _kept(lifecycle: Any) -> str:
    """`; survives destroy` for a resource whose `lifecycle.prevent_destroy` makes the CLI
    refuse a `bundle destroy` that would delete it."""
    return "; survives destroy" if lifecycle and lifecycle.prevent_destroy else ""


def _grants(resource: Any) -> str:
    return "".join(
        f"; {', '.join(p.value for p in grant.privileges)} for {grant.principal}"
        for grant in resource.grants
    )


def describe(bundle: Bundle) -> list[str]:
    """The target, its mode, and what validating it here leaves to the Databricks CLI."""
    mode = f" (mode: {bundle.mode})" if bundle.mode else ""
    return [
        f"target {bundle.target!r}{mode}: the jobs as the files define them; the mode, presets, "
        "run_as and permissions are applied by `databricks bundle deploy`"
    ]


def _deployed_as(job: Job) -> list[str]:
    """What the job's settings say besides its tasks: compute, pause states, destroy."""
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
