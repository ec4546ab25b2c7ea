"""The bundle's compute and its Unity Catalog resources: a dedicated job cluster on the oldest
supported LTS runtime by default, standard access mode or serverless by the `compute` variable
(the job mutators of `binlake.bundle.compute`, run by the loader as the Databricks CLI runs
them), each developer's own server ids, and the schemas, volume and secret scope
parsed by the typed models of `databricks-bundles`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from databricks.bundles.core import Bundle as MutatorBundle
from databricks.bundles.jobs import Job as BundleJob

from binlake.bundle.compute import COMPUTE_KINDS, NODE_TYPES, classic_compute, server_ids_of
from binlake.bundle.validate import validate
from binlake.errors import BundleError

from .bundles import PRINCIPAL, REPO, load, wheel_task, write_bundle


def test_jobs_run_on_dedicated_job_clusters_of_the_oldest_supported_lts_by_default() -> None:
    for job in load(REPO, "prod").jobs.values():
        (cluster,) = job.settings.job_clusters or []
        spec = cluster.new_cluster
        assert spec is not None and spec.spark_version == "17.3.x-scala2.13"
        assert spec.data_security_mode is not None
        assert spec.data_security_mode.value == "DATA_SECURITY_MODE_DEDICATED"
        assert not job.settings.environments


def test_serverless_jobs_take_the_wheel_in_an_environment_that_can_cache() -> None:
    """Environment version 5: the first whose serverless compute runs `persist()` (the stream
    caches each batch)."""
    for job in load(REPO, "prod", variables={"compute": "serverless"}).jobs.values():
        (environment,) = job.settings.environments or []
        assert environment.spec is not None
        assert environment.spec.environment_version == "5"
        assert not job.settings.job_clusters
        assert all(
            task.environment_key == environment.environment_key for task in job.settings.tasks or []
        )


@pytest.mark.parametrize("cloud", sorted(NODE_TYPES))
def test_classic_compute_puts_each_job_on_a_dedicated_job_cluster_of_its_cloud(cloud: str) -> None:
    bundle = load(REPO, "prod", variables={"compute": "dedicated", "cloud": cloud})

    for job in bundle.jobs.values():
        (cluster,) = job.settings.job_clusters or []
        spec = cluster.new_cluster
        assert spec is not None and spec.node_type_id == NODE_TYPES[cloud]
        assert spec.data_security_mode is not None
        assert spec.data_security_mode.value == "DATA_SECURITY_MODE_DEDICATED"
        assert (spec.num_workers, spec.policy_id) == (4, None)
        # Static: a job cluster starts with it or never has it.
        assert spec.spark_conf == {"spark.sql.codegen.cache.maxEntries": "1000"}
        assert not job.settings.environments
        for task in job.settings.tasks or []:
            assert (task.job_cluster_key, task.environment_key) == (cluster.job_cluster_key, None)


def test_standard_access_mode_is_a_job_cluster_of_its_own_mode() -> None:
    for job in load(REPO, "prod", variables={"compute": "standard"}).jobs.values():
        (cluster,) = job.settings.job_clusters or []
        assert cluster.new_cluster is not None and cluster.new_cluster.data_security_mode
        assert cluster.new_cluster.data_security_mode.value == "DATA_SECURITY_MODE_STANDARD"


@pytest.mark.parametrize("target", ["local", "dev", "prod"])
@pytest.mark.parametrize("compute", COMPUTE_KINDS)
@pytest.mark.parametrize("warehouse", ["", "0123456789abcdef"])
def test_every_target_validates_on_every_compute_kind(
    target: str, compute: str, warehouse: str
) -> None:
    """What `binlake bundle validate -t TARGET --var compute=KIND` runs, with and without the
    stream lag alert (`--var alert_warehouse_id=ID`)."""
    variables = {"compute": compute, "alert_warehouse_id": warehouse}
    lines = validate(load(REPO, target, variables=variables))

    alerted = [line for line in lines if line.startswith("alert ")]
    assert len(alerted) == (1 if warehouse else 0)

    expected = "serverless environment 5" if compute == "serverless" else "job cluster"
    assert all(expected in line for line in lines if line.startswith("silver_"))


def test_classic_compute_takes_a_node_type_and_a_cluster_policy() -> None:
    variables = {"compute": "dedicated", "node_type_id": "r6id.2xlarge", "cluster_policy_id": "P1"}
    job = load(REPO, "prod", variables=variables).job("silver_stream")

    (cluster,) = job.settings.job_clusters or []
    assert cluster.new_cluster is not None
    assert cluster.new_cluster.node_type_id == "r6id.2xlarge"
    assert (cluster.new_cluster.policy_id, cluster.new_cluster.apply_policy_default_values) == (
        "P1",
        True,
    )


def test_an_unknown_compute_is_an_error_naming_the_choices() -> None:
    with pytest.raises(
        BundleError, match="variable compute must be dedicated, standard or serverless, not 'gpu'"
    ):
        load(REPO, "prod", variables={"compute": "gpu"})


def test_a_task_with_compute_of_its_own_keeps_it() -> None:
    job = BundleJob.from_dict(
        {
            "name": "j",
            "environments": [{"environment_key": "binlake", "spec": {"environment_version": "4"}}],
            "tasks": [
                {**wheel_task("mine", "status"), "existing_cluster_id": "0101-abc"},
                {**wheel_task("ours", "status"), "environment_key": "binlake"},
            ],
        }
    )
    bundle = MutatorBundle(target="t", variables={"compute": "dedicated", "spark_version": "19.x"})

    mine, ours = classic_compute.function(bundle, job).tasks

    assert mine == job.tasks[0]
    assert ours.job_cluster_key == "binlake" and ours.environment_key is None


def test_developers_get_ranges_of_their_own_and_the_same_at_every_deploy() -> None:
    names = ["jane_doe", "john_roe", "a", "b", "jane_doe2"]
    ranges = [tuple(map(int, server_ids_of(name).strip("[]").split(", "))) for name in names]

    assert server_ids_of("jane_doe") == server_ids_of("jane_doe")
    assert all(last - first == 19 and first >= 1_000_000 and last < 2**32 for first, last in ranges)
    assert all(a[1] < b[0] or b[1] < a[0] for i, a in enumerate(ranges) for b in ranges[i + 1 :])


def test_production_keeps_its_configured_server_ids() -> None:
    for job in load(REPO, "prod").jobs.values():
        assert job.parameter_defaults["source_server_id_range"] == "[5400, 5499]"


def test_prod_declares_its_schemas_volume_and_secret_scope_with_the_principals_grants() -> None:
    lines = validate(load(REPO, "prod"))

    kept = "; survives destroy"
    assert f"schema prod.binlake (system); USE_SCHEMA for {PRINCIPAL}{kept}" in lines
    writes = "USE_SCHEMA, CREATE_TABLE, SELECT, MODIFY"
    assert f"schema prod.bronze_shop (bronze); {writes} for {PRINCIPAL}{kept}" in lines
    assert (
        f"volume prod.binlake.lakehouse (lakehouse); READ_VOLUME, WRITE_VOLUME for {PRINCIPAL}"
        f"{kept}" in lines
    )
    assert f"secret scope binlake (source); READ for {PRINCIPAL}{kept}" in lines


def _catalog_bundle(tmp_path: Path, schema: dict[str, Any], **extra: Any) -> Path:
    volume = {"catalog_name": "c", "schema_name": "${resources.schemas.s.name}", "name": "v"}
    return write_bundle(
        tmp_path,
        {},
        targets={"dev": {"default": True, "mode": "development"}},
        resources={"schemas": {"s": schema}, "volumes": {"v": volume}},
        **extra,
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"catalog": "c", "name": "raw"}, r"resources\.schemas\.s: Unexpected field 'catalog'"),
        (
            {
                "catalog_name": "c",
                "name": "raw",
                "grants": [{"principal": "p", "privileges": ["READ"]}],
            },
            r"resources\.schemas\.s: .*READ",
        ),
    ],
)
def test_a_malformed_schema_is_refused_by_its_typed_model(
    tmp_path: Path, schema: dict[str, Any], message: str
) -> None:
    with pytest.raises(BundleError, match=message):
        load(_catalog_bundle(tmp_path, schema))


def test_a_mutator_that_cannot_be_loaded_is_named(tmp_path: Path) -> None:
    job = {"name": "j", "tasks": [wheel_task("t", "status")]}
    write_bundle(tmp_path, {"j": job}, python={"mutators": ["binlake.bundle.compute:nothing"]})

    with pytest.raises(
        BundleError, match=r"python\.mutators\[0\] 'binlake\.bundle\.compute:nothing'"
    ):
        load(tmp_path)


def test_the_mutators_see_the_targets_variables(tmp_path: Path) -> None:
    job = {
        "name": "j",
        "environments": [{"environment_key": "binlake", "spec": {"environment_version": "4"}}],
        "tasks": [{**wheel_task("t", "status"), "environment_key": "binlake"}],
    }
    variables = {"compute": {"default": "serverless"}, "spark_version": {"default": "19.x"}}
    write_bundle(
        tmp_path,
        {"j": job},
        variables=variables,
        targets={"local": {"default": True, "variables": {"compute": "standard"}}},
        python={"mutators": ["binlake.bundle.compute:classic_compute"]},
    )

    (cluster,) = load(tmp_path).job("j").settings.job_clusters or []
    assert cluster.new_cluster is not None and cluster.new_cluster.spark_version == "19.x"
    assert dataclasses.is_dataclass(cluster)
