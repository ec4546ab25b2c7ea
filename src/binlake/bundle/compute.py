"""Where the bundle's jobs run, chosen by the bundle variable `compute`: `dedicated` (the
default), `standard` or `serverless` (docs/compute.md#what-binlake-needs-of-each-compute-kind).
And each developer's own replica server ids in `dev`.

The job files declare serverless compute, as Databricks' `default-python` template does: an
`environments` entry whose dependencies hold the wheel, and `environment_key` on each task.
These are job mutators of the `databricks-bundles` package, listed under `python.mutators` in
bundle.yml: the Databricks CLI runs them at deploy, and binlake's bundle loader runs the same
functions, so `binlake bundle validate` shows the jobs a deploy makes.

- `classic_compute`: unless `compute` is `serverless`, each job gets one job cluster instead, in
  that access mode (`dedicated`: the one compute on which Databricks documents everything binlake
  does), on the runtime `spark_version` (default the oldest supported LTS), the node type of the
  workspace's `cloud` (or `node_type_id`), the cluster policy `cluster_policy_id` if set,
  binlake's static Spark settings (`runtime.static_settings`; serverless takes none), with the
  environment's dependencies (the wheel) as task libraries. A task that names other compute is
  left alone.
- `developer_server_ids`: where the variable `developer` is set (the `dev` target sets it to the
  deploying user's short name), the jobs' `source_server_id_range` parameter becomes a range of
  that developer's own, derived from the name: developers who share a source never evict each
  other's binlog readers.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from databricks.bundles.core import Bundle, job_mutator
from databricks.bundles.jobs import ClusterSpec, DataSecurityMode, Job, JobCluster, Library, Task

from binlake.runtime.static_settings import compute_settings

SERVERLESS = "serverless"
#: The job clusters' access mode of each classic value of the bundle variable `compute`.
ACCESS_MODES = {
    "dedicated": DataSecurityMode.DATA_SECURITY_MODE_DEDICATED,
    "standard": DataSecurityMode.DATA_SECURITY_MODE_STANDARD,
}
#: The values of the bundle variable `compute`, the default first.
COMPUTE_KINDS = (*ACCESS_MODES, SERVERLESS)
#: The job cluster's key, and the environment key the job files use.
COMPUTE_KEY = "binlake"
#: A node type per cloud for a classic job cluster: 4 cores, 16-32 GiB; local SSD on aws and
#: azure (gcp's n2-standard-4 has none).
NODE_TYPES = {"aws": "m6gd.xlarge", "azure": "Standard_D4ds_v5", "gcp": "n2-standard-4"}
#: The job parameter holding the replica server ids, and where developers' ranges are placed:
#: above the ids replicas and other tools commonly take, in blocks of `DEVELOPER_IDS`.
SERVER_IDS_PARAMETER = "source_server_id_range"
DEVELOPER_IDS = 20
_DEVELOPER_FIRST_ID = 1_000_000
_DEVELOPER_BLOCKS = 100_000_000


@job_mutator
def classic_compute(bundle: Bundle, job: Job) -> Job:
    """`job` on a classic job cluster of the bundle's `compute` access mode; as written (its
    serverless environment) where `compute` is `serverless`."""
    compute = str(bundle.variables.get("compute") or COMPUTE_KINDS[0])
    if compute == SERVERLESS:
        return job
    if compute not in ACCESS_MODES:
        raise ValueError(
            f"variable compute must be {', '.join(COMPUTE_KINDS[:-1])} or {COMPUTE_KINDS[-1]}, "
            f"not {compute!r}"
        )
    environments = {env.environment_key: env for env in _items(job.environments)}
    tasks: list[Any] = [_on_cluster(task, environments) for task in _items(job.tasks)]
    if tasks == job.tasks:
        return job
    spec = _cluster(bundle.variables, ACCESS_MODES[compute])
    cluster = JobCluster(job_cluster_key=COMPUTE_KEY, new_cluster=spec)
    return dataclasses.replace(
        job, tasks=tasks, environments=[], job_clusters=[*_items(job.job_clusters), cluster]
    )


def _items(value: Any) -> list[Any]:
    """A list field of a job; a list given whole as one `${var...}` is not one this can edit."""
    if not isinstance(value, list):
        raise ValueError(f"expected a list in the job, found {value!r}")
    return value


def _on_cluster(task: Task, environments: dict[Any, Any]) -> Task:
    if task.environment_key is None or task.environment_key not in environments:
        return task
    spec = environments[task.environment_key].spec
    wheels = [Library(whl=path) for path in (_items(spec.dependencies) if spec else [])]
    return dataclasses.replace(
        task,
        environment_key=None,
        job_cluster_key=COMPUTE_KEY,
        libraries=[*_items(task.libraries), *wheels],
    )


def _cluster(variables: dict[str, Any], access_mode: DataSecurityMode) -> ClusterSpec:
    cloud = str(variables.get("cloud") or "aws")
    if cloud not in NODE_TYPES:
        raise ValueError(f"variable cloud must be one of {', '.join(NODE_TYPES)}, not {cloud!r}")
    return ClusterSpec(
        spark_version=str(variables["spark_version"]),
        node_type_id=str(variables.get("node_type_id") or NODE_TYPES[cloud]),
        num_workers=int(variables.get("num_workers") or 0),
        policy_id=str(variables.get("cluster_policy_id") or "") or None,
        apply_policy_default_values=bool(variables.get("cluster_policy_id")) or None,
        data_security_mode=access_mode,
        spark_conf=dict[str, Any](compute_settings()),
    )


@job_mutator
def developer_server_ids(bundle: Bundle, job: Job) -> Job:
    """`job` with the developer's own `source_server_id_range`, where `developer` is set."""
    developer = str(bundle.variables.get("developer") or "")
    if not developer:
        return job
    parameters = [
        dataclasses.replace(parameter, default=server_ids_of(developer))
        if parameter.name == SERVER_IDS_PARAMETER
        else parameter
        for parameter in _items(job.parameters)
    ]
    return dataclasses.replace(job, parameters=parameters)


def server_ids_of(developer: str) -> str:
    """`developer`'s block of `DEVELOPER_IDS` replica server ids, as `[first, last]`: the same
    for every deploy, and apart from other developers' but for a hash collision (one in a
    hundred million per pair)."""
    digest = int.from_bytes(hashlib.sha256(developer.encode()).digest()[:8], "big")
    first = _DEVELOPER_FIRST_ID + (digest % _DEVELOPER_BLOCKS) * DEVELOPER_IDS
    return f"[{first}, {first + DEVELOPER_IDS - 1}]"
