"""`binlake bundle deploy`: build the wheel, upload it, create or update the jobs — without the
Databricks CLI, through `databricks-sdk`.

Deploying twice updates the same jobs. A job is found by its name as deployed (with a development
target's prefix, e.g. `[dev alice] binlake bronze snapshot`) and must carry this bundle's identity
tags; a job of that name without them belongs to someone else and is never overwritten. A job's
access control list (the bundle's `permissions`) goes with its creation, and replaces the job's
permissions on each later deploy, keeping its owner unless the list names one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import logging
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from databricks.sdk import WorkspaceClient
from databricks.sdk.service.compute import Library
from databricks.sdk.service.jobs import JobAccessControlRequest, JobPermissionLevel, JobSettings
from databricks.sdk.service.workspace import ImportFormat

from binlake.bundle.definition import Artifact, Bundle, Job, is_local_path
from binlake.bundle.errors import BundleError
from binlake.bundle.workspace import calling

log = logging.getLogger(__name__)

#: Builds an artifact and returns the path of the wheel it produced.
WheelBuilder = Callable[[Artifact], Path]


@dataclass(frozen=True)
class DeployedJob:
    key: str
    job_id: int
    created: bool


def deploy(
    bundle: Bundle, client: WorkspaceClient, build: WheelBuilder | None = None
) -> list[DeployedJob]:
    """Upload the bundle's wheels to `${workspace.artifact_path}/.internal`, then create each job
    or reset the one a previous deploy created."""
    if bundle.other_resources:
        raise BundleError(
            f"binlake deploys jobs only, and this bundle also defines resources."
            f"{', resources.'.join(bundle.other_resources)}: deploy it with "
            f"`databricks bundle deploy -t {bundle.target}`"
        )
    folder = f"{bundle.artifact_path}/.internal"
    wheels = upload_wheels(bundle, client, folder, build or build_wheel)
    return [_upsert_job(bundle, client, job, wheels) for job in bundle.jobs.values()]


def build_wheel(artifact: Artifact) -> Path:
    """Run the artifact's build command in its folder; the wheel it wrote to `dist/`.

    A leading `python` means the interpreter running binlake, which has pip, whatever `python`
    is on PATH.
    """
    if artifact.type != "whl" or not artifact.build:
        raise BundleError(
            f"artifacts.{artifact.key}: binlake builds `type: whl` artifacts that have a `build` "
            "command; deploy this bundle with `databricks bundle deploy`"
        )
    command = shlex.split(artifact.build)
    if command and command[0] in ("python", "python3"):
        command[0] = sys.executable
    log.info("building artifact %s: %s", artifact.key, shlex.join(command))
    started = time.time()
    result = subprocess.run(command, cwd=artifact.path, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise BundleError(
            f"building artifact {artifact.key!r} with `{artifact.build}` failed "
            f"(exit code {result.returncode}): {' / '.join(tail)}"
        )
    # pip rewrites the wheel even when its name is unchanged, so the fresh one is the newest.
    fresh = [w for w in (artifact.path / "dist").glob("*.whl") if w.stat().st_mtime >= started - 1]
    if not fresh:
        raise BundleError(f"`{artifact.build}` wrote no wheel to {artifact.path / 'dist'}")
    return max(fresh, key=lambda wheel: wheel.stat().st_mtime)


def upload_wheels(
    bundle: Bundle, client: WorkspaceClient, folder: str, build: WheelBuilder
) -> dict[str, str]:
    """Build and upload every artifact; maps each wheel's bundle-relative path to its workspace
    path, which the jobs' `whl` libraries then point at."""
    with _calling(bundle, f"creating {folder}"):
        client.workspace.mkdirs(folder)
    uploaded: dict[str, str] = {}
    for artifact in bundle.artifacts.values():
        wheel = build(artifact)
        remote = f"{folder}/{wheel.name}"
        with _calling(bundle, f"uploading {wheel.name} to {remote}"):
            client.workspace.upload(
                remote, wheel.read_bytes(), format=ImportFormat.AUTO, overwrite=True
            )
        uploaded[wheel.relative_to(bundle.root).as_posix()] = remote
    return uploaded


def identity_tags(bundle: Bundle, job: Job) -> dict[str, str]:
    """Tags that mark a job as deployed by this bundle for this target."""
    return {"binlake_bundle": bundle.name, "binlake_target": bundle.target, "binlake_job": job.key}


def workspace_settings(bundle: Bundle, job: Job, wheels: dict[str, str]) -> JobSettings:
    """The job's settings as deployed: local `whl` globs replaced by the uploaded wheels, plus the
    identity tags."""
    tasks = []
    for task in job.settings.tasks or []:
        libraries: list[Library] = []
        for library in task.libraries or []:
            pattern = library.whl
            if pattern is None or not is_local_path(pattern):
                libraries.append(library)
                continue
            matches = [
                remote for local, remote in wheels.items() if fnmatch.fnmatch(local, pattern)
            ]
            if not matches:
                raise BundleError(
                    f"task {task.task_key!r} of job {job.key!r} needs the wheel {pattern}, "
                    f"which no artifact built (built: {', '.join(wheels) or 'nothing'})"
                )
            libraries += [Library(whl=remote) for remote in matches]
        tasks.append(dataclasses.replace(task, libraries=libraries or None))
    tags = {**(job.settings.tags or {}), **identity_tags(bundle, job)}
    return dataclasses.replace(job.settings, tasks=tasks, tags=tags)


def _upsert_job(
    bundle: Bundle, client: WorkspaceClient, job: Job, wheels: dict[str, str]
) -> DeployedJob:
    settings = workspace_settings(bundle, job, wheels)
    name = settings.name or job.key
    with _calling(bundle, f"listing jobs named {name!r}"):
        same_name = list(client.jobs.list(name=name))
    identity = identity_tags(bundle, job).items()
    ours = [
        found
        for found in same_name
        if found.settings and identity <= (found.settings.tags or {}).items()
    ]
    if len(ours) > 1:
        ids = ", ".join(str(found.job_id) for found in ours)
        raise BundleError(f"jobs {ids} are all {name!r} of this bundle: delete all but one")
    if not ours and same_name:
        raise BundleError(
            f"job {same_name[0].job_id} is named {name!r} but was not deployed by this bundle "
            f"for target {bundle.target!r} (its binlake_* tags differ): rename or delete it"
        )
    if ours and ours[0].job_id is not None:
        job_id = ours[0].job_id
        with _calling(bundle, f"updating job {job_id} ({name})"):
            client.jobs.reset(job_id, settings)
        if job.access_control:
            _replace_permissions(bundle, client, job_id, list(job.access_control))
        log.info("updated job %s: %s", job_id, name)
        return DeployedJob(job.key, job_id, created=False)
    fields = {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings)}
    with _calling(bundle, f"creating job {name!r}"):
        created = client.jobs.create(access_control_list=list(job.access_control) or None, **fields)
    if created.job_id is None:
        raise BundleError(f"the Jobs API created {name!r} but returned no job_id")
    log.info("created job %s: %s", created.job_id, name)
    return DeployedJob(job.key, created.job_id, created=True)


def _replace_permissions(
    bundle: Bundle, client: WorkspaceClient, job_id: int, acl: list[JobAccessControlRequest]
) -> None:
    """Set the job's permissions to `acl` (the Jobs API's reset leaves them alone); without an
    IS_OWNER entry the job keeps its current owner, as a job must have one."""
    if not any(entry.permission_level == JobPermissionLevel.IS_OWNER for entry in acl):
        with _calling(bundle, f"reading the permissions of job {job_id}"):
            current = client.jobs.get_permissions(str(job_id))
        acl = acl + [
            JobAccessControlRequest(
                user_name=entry.user_name,
                group_name=entry.group_name,
                service_principal_name=entry.service_principal_name,
                permission_level=JobPermissionLevel.IS_OWNER,
            )
            for entry in current.access_control_list or []
            if any(
                grant.permission_level == JobPermissionLevel.IS_OWNER and not grant.inherited
                for grant in entry.all_permissions or []
            )
        ]
    with _calling(bundle, f"setting the permissions of job {job_id}"):
        client.jobs.set_permissions(str(job_id), access_control_list=acl)


def _calling(bundle: Bundle, action: str) -> contextlib.AbstractContextManager[None]:
    return calling(action, bundle.connection.describe())
