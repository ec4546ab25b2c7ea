"""What the Databricks CLI does to a target's jobs at deploy — `mode`, `presets`, `run_as`,
`permissions` — done here too, so `binlake bundle validate` shows the jobs as deployed.

`mode: development` fills in the presets a developer's copy needs to be their own: the name prefix
`[dev <short_name>] `, the tag `dev: <short_name>`, at most 4 concurrent runs where a job sets no
limit, and schedules, continuous runs and triggers paused where a job sets no pause status. It
also requires the workspace paths and the prefix to name the user, so that two developers never
share a folder. `mode: production` requires an explicit `workspace.root_path` (or `run_as` on
every job), so that only one copy is deployed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from databricks.sdk.service.jobs import JobAccessControlRequest, JobPermissionLevel

from binlake.bundle.keys import PERMISSION, PRESETS, PRINCIPAL, RUN_AS, check_keys
from binlake.bundle.remote import CurrentUser
from binlake.errors import BundleError

MODES = ("development", "production")
DEVELOPMENT_CONCURRENT_RUNS = 4
_PAUSE_STATUSES = ("PAUSED", "UNPAUSED")
#: Job settings that carry a `pause_status`.
_PAUSABLE = ("schedule", "continuous", "trigger")
#: Top-level permission levels, as the Databricks CLI maps them onto a job.
_BUNDLE_LEVELS = {"CAN_VIEW": "CAN_VIEW", "CAN_RUN": "CAN_MANAGE_RUN", "CAN_MANAGE": "CAN_MANAGE"}
_JOB_LEVELS = tuple(level.value for level in JobPermissionLevel)

#: The deploying user, asked for with the reason (for the error when nobody can answer).
UserSource = Callable[[str], CurrentUser]


@dataclass(frozen=True)
class Presets:
    """The presets binlake applies to jobs; the others are the Databricks CLI's business."""

    name_prefix: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    jobs_max_concurrent_runs: int = 0
    trigger_pause_status: str = ""

    def apply(self, spec: dict[str, Any]) -> dict[str, Any]:
        """`spec` (a job resource) with the presets applied where the job does not decide."""
        spec = {**spec, "name": self.name_prefix + str(spec.get("name", ""))}
        spec["tags"] = {**self.tags, **(spec.get("tags") or {})}
        if not spec["tags"]:
            del spec["tags"]
        if self.jobs_max_concurrent_runs and not spec.get("max_concurrent_runs"):
            spec["max_concurrent_runs"] = self.jobs_max_concurrent_runs
        for key in _PAUSABLE:
            if self.trigger_pause_status and isinstance(spec.get(key), dict):
                spec[key] = {"pause_status": self.trigger_pause_status, **spec[key]}
        return spec


def target_presets(
    target: str, mode: str | None, document: Mapping[str, Any], user: UserSource
) -> Presets:
    """The target's `presets` with the defaults of its mode filled in."""
    check_keys(document, PRESETS, f"targets.{target}.presets")
    pause = document.get("trigger_pause_status") or ""
    if pause and pause not in _PAUSE_STATUSES:
        raise BundleError(f"presets.trigger_pause_status must be PAUSED or UNPAUSED, not {pause!r}")
    presets = Presets(
        name_prefix=str(document.get("name_prefix") or ""),
        tags={str(k): str(v) for k, v in (document.get("tags") or {}).items()},
        jobs_max_concurrent_runs=int(document.get("jobs_max_concurrent_runs") or 0),
        trigger_pause_status=pause,
    )
    if mode != "development":
        return presets
    if pause == "UNPAUSED":
        raise BundleError(
            f"target {target!r} has mode: development, which cannot set "
            "presets.trigger_pause_status to UNPAUSED (unpause one job's schedule instead)"
        )
    me = user(f"mode: development of target {target!r}")
    presets = Presets(
        name_prefix=presets.name_prefix or f"[dev {me.short_name}] ",
        tags={"dev": me.short_name, **presets.tags},
        jobs_max_concurrent_runs=presets.jobs_max_concurrent_runs or DEVELOPMENT_CONCURRENT_RUNS,
        trigger_pause_status=pause or "PAUSED",
    )
    if not _names(presets.name_prefix, me):
        raise BundleError(
            f"target {target!r} has mode: development: presets.name_prefix must contain the "
            "user name or ${workspace.current_user.short_name}, so that each developer's jobs "
            "are their own"
        )
    return presets


def check_development_paths(target: str, paths: Mapping[str, str], user: CurrentUser) -> None:
    """Each workspace path of a development target must name the user: one copy per developer."""
    for key, path in paths.items():
        if not _names(path, user):
            raise BundleError(
                f"target {target!r} has mode: development: workspace.{key} {path!r} must start "
                "with '~/' or contain the current user name, so that developers do not share it"
            )


def _names(text: str, user: CurrentUser) -> bool:
    return user.user_name in text or user.short_name in text


def check_production(target: str, root_path_set: bool, jobs: Sequence[Mapping[str, Any]]) -> None:
    """A production target sets its root path, so that every deploy updates the same copy."""
    if not root_path_set and not all(job.get("run_as") for job in jobs):
        raise BundleError(
            f"target {target!r} has mode: production and must set workspace.root_path, so that "
            "only one copy is deployed, e.g. "
            "/Workspace/Users/<deploying principal>/.bundle/${bundle.name}/${bundle.target}"
        )


def run_as(document: Any, where: str) -> dict[str, str] | None:
    """`run_as`: one of user_name or service_principal_name."""
    if document is None:
        return None
    if not isinstance(document, dict):
        raise BundleError(f"{where} must be a mapping with user_name or service_principal_name")
    check_keys(document, RUN_AS, where)
    if len(document) != 1:
        raise BundleError(f"{where} must name one identity: user_name or service_principal_name")
    ((kind, identity),) = document.items()
    if not identity:
        raise BundleError(f"{where}.{kind} is empty: give the variable it references a value")
    return {str(kind): str(identity)}


def access_control(
    bundle_permissions: Sequence[Any], job_permissions: Sequence[Any], job: str
) -> list[JobAccessControlRequest]:
    """The job's access control list: the bundle's `permissions` mapped onto job levels (CAN_RUN
    is CAN_MANAGE_RUN), then the job's own, which win for a principal both name."""
    levels: dict[tuple[str, str], str] = {}
    for index, entry in enumerate(bundle_permissions):
        where = f"permissions[{index}]"
        principal, level = _permission(entry, where, tuple(_BUNDLE_LEVELS))
        levels[principal] = _BUNDLE_LEVELS[level]
    for index, entry in enumerate(job_permissions):
        principal, level = _permission(entry, f"job {job!r} permissions[{index}]", _JOB_LEVELS)
        levels[principal] = level
    return [
        JobAccessControlRequest(**{kind: name}, permission_level=JobPermissionLevel(level))
        for (kind, name), level in levels.items()
    ]


def _permission(entry: Any, where: str, allowed: Sequence[str]) -> tuple[tuple[str, str], str]:
    if not isinstance(entry, dict):
        raise BundleError(f"{where} must be a mapping with a level and a principal")
    check_keys(entry, PERMISSION, where)
    principals = [(kind, str(entry[kind])) for kind in sorted(PRINCIPAL) if entry.get(kind)]
    if len(principals) != 1:
        raise BundleError(
            f"{where} must name one principal: user_name, group_name or service_principal_name"
        )
    level = entry.get("level")
    if level not in allowed:
        raise BundleError(f"{where}: level must be one of {', '.join(allowed)}, not {level!r}")
    return principals[0], str(level)
