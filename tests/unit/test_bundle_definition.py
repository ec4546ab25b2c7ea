"""Loading bundle.yml and resources/ for a target: variables, targets, the lossless parse into
the SDK's JobSettings, and `binlake bundle validate`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from databricks.sdk.service.jobs import JobSettings

from binlake.bundle.definition import load_bundle
from binlake.bundle.errors import BundleError
from binlake.bundle.validate import validate

REPO = Path(__file__).resolve().parents[2]
TARGETS = ["local", "dev", "prod"]


def wheel_task(key: str, *parameters: str, depends_on: tuple[str, ...] = ()) -> dict[str, Any]:
    task: dict[str, Any] = {
        "task_key": key,
        "python_wheel_task": {
            "package_name": "binlake",
            "entry_point": "binlake",
            "parameters": list(parameters),
        },
    }
    if depends_on:
        task["depends_on"] = [{"task_key": name} for name in depends_on]
    return task


def write_bundle(
    root: Path, jobs: dict[str, Any], variables: dict[str, Any] | None = None, **extra: Any
) -> Path:
    """A minimal bundle with one `local` target and the given jobs in resources/jobs.yml."""
    document = {
        "bundle": {"name": "demo"},
        "include": ["resources/*.yml"],
        "variables": variables or {},
        "targets": {"local": {"default": True}},
        **extra,
    }
    (root / "bundle.yml").write_text(yaml.safe_dump(document))
    (root / "resources").mkdir(exist_ok=True)
    (root / "resources" / "jobs.yml").write_text(yaml.safe_dump({"resources": {"jobs": jobs}}))
    return root


@pytest.mark.parametrize("target", TARGETS)
def test_every_job_parses_into_job_settings_without_loss(target: str) -> None:
    bundle = load_bundle(REPO, target)

    assert set(bundle.jobs) == {"bronze_snapshot", "silver_stream", "silver_catchup"}
    for job in bundle.jobs.values():
        assert JobSettings.from_dict(job.settings.as_dict()) == job.settings
        assert job.settings.tasks and job.settings.job_clusters and job.settings.parameters


@pytest.mark.parametrize("target", TARGETS)
def test_validate_accepts_the_project_bundle(target: str) -> None:
    summary = validate(load_bundle(REPO, target))

    assert f"silver_catchup ([{target}] binlake silver catch-up): snapshot → stream" in summary


def test_misspelt_job_setting_is_rejected_by_name(tmp_path: Path) -> None:
    job = {"name": "j", "max_concurent_runs": 1, "tasks": [wheel_task("t", "status")]}
    write_bundle(tmp_path, {"j": job})

    with pytest.raises(BundleError, match=r"Jobs API does not know .*: j\.max_concurent_runs"):
        load_bundle(tmp_path)


def test_local_target_points_jobs_at_the_project_database_and_lakehouse() -> None:
    defaults = load_bundle(REPO, "local").job("bronze_snapshot").parameter_defaults

    assert defaults["source_host"] == "127.0.0.1"
    assert defaults["source_port"] == "13306"
    assert defaults["source_database"] == "shop"
    assert defaults["lake_root"] == "./lakehouse"
    assert defaults["lake_catalog"] == ""


def test_workspace_targets_resolve_variables_that_reference_variables() -> None:
    dev = load_bundle(REPO, "dev").job("bronze_snapshot").parameter_defaults
    prod = load_bundle(REPO, "prod").job("bronze_snapshot").parameter_defaults

    assert dev["lake_root"] == "/Volumes/dev/binlake/lakehouse"
    assert prod["lake_root"] == "/Volumes/prod/binlake/lakehouse"
    assert (dev["snapshot_parallelism"], prod["snapshot_parallelism"]) == ("4", "8")


def test_bundle_name_and_target_resolve_in_names_and_paths() -> None:
    bundle = load_bundle(REPO, "prod")

    assert bundle.job("silver_stream").settings.name == "[prod] binlake silver stream"
    assert bundle.workspace.root_path == "/Workspace/Shared/.bundle/binlake/prod"
    assert bundle.workspace.host == "https://prod.cloud.databricks.com"


def test_var_override_beats_the_target_value() -> None:
    bundle = load_bundle(REPO, "prod", {"snapshot_parallelism": "2"})

    assert bundle.job("bronze_snapshot").parameter_defaults["snapshot_parallelism"] == "2"


def test_whole_string_reference_keeps_the_variable_type() -> None:
    cluster = load_bundle(REPO, "prod").job("silver_stream").settings.job_clusters
    assert cluster is not None and cluster[0].new_cluster is not None

    assert cluster[0].new_cluster.num_workers == 4


def test_password_comes_from_the_secret_scope_not_from_the_files() -> None:
    for job in load_bundle(REPO, "dev").jobs.values():
        assert job.settings.job_clusters is not None
        cluster = job.settings.job_clusters[0].new_cluster
        assert cluster is not None
        assert cluster.spark_env_vars == {
            "BINLAKE_SOURCE_PASSWORD": "{{secrets/binlake/source-password}}"
        }


def test_wheel_library_path_is_relative_to_the_bundle_root() -> None:
    task = load_bundle(REPO, "dev").job("bronze_snapshot").settings.tasks[0]  # type: ignore[index]

    assert [library.whl for library in task.libraries or []] == ["dist/*.whl"]


def test_default_target_is_the_one_marked_default() -> None:
    assert load_bundle(REPO).target == "local"


def test_unknown_target_is_an_error_listing_the_targets() -> None:
    with pytest.raises(BundleError, match="unknown target 'qa'; the targets are local, dev, prod"):
        load_bundle(REPO, "qa")


def test_undeclared_variable_reference_is_an_error(tmp_path: Path) -> None:
    write_bundle(tmp_path, {"j": {"name": "${var.missing}", "tasks": [wheel_task("t", "status")]}})

    with pytest.raises(BundleError, match=r"\$\{var\.missing\}, which is not declared"):
        load_bundle(tmp_path)


def test_variable_without_any_value_is_an_error(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, variables={"db": {"description": "no default"}})

    with pytest.raises(BundleError, match="variable 'db' has no value for target 'local'"):
        load_bundle(tmp_path)


def test_variables_referencing_each_other_in_a_cycle_is_an_error(tmp_path: Path) -> None:
    variables = {"a": {"default": "${var.b}"}, "b": {"default": "x-${var.a}"}}
    write_bundle(tmp_path, {"j": {"name": "${var.a}"}}, variables=variables)

    with pytest.raises(BundleError, match="cycle"):
        load_bundle(tmp_path)


def test_workspace_reference_on_a_target_without_workspace_is_an_error(tmp_path: Path) -> None:
    write_bundle(tmp_path, {"j": {"name": "${workspace.root_path}/j"}})

    with pytest.raises(BundleError, match="it has no `workspace`"):
        load_bundle(tmp_path)


def test_unsupported_bundle_key_is_rejected_not_ignored(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, sync={"include": ["*"]})

    with pytest.raises(BundleError, match="binlake does not support sync"):
        load_bundle(tmp_path)


def test_non_string_job_parameter_default_is_an_error(tmp_path: Path) -> None:
    job = {"name": "j", "parameters": [{"name": "port", "default": 3306}]}
    write_bundle(tmp_path, {"j": job})

    with pytest.raises(BundleError, match="parameter 'port' needs a string default"):
        load_bundle(tmp_path)


def test_validate_rejects_a_task_whose_parameters_the_cli_rejects(tmp_path: Path) -> None:
    write_bundle(tmp_path, {"j": {"name": "j", "tasks": [wheel_task("t", "snapshot", "--fast")]}})

    with pytest.raises(BundleError, match="task 't' of job 'j': the binlake CLI rejects"):
        validate(load_bundle(tmp_path))


def test_validate_rejects_a_task_whose_configuration_is_invalid(tmp_path: Path) -> None:
    job = {
        "name": "j",
        "parameters": [{"name": "parallelism", "default": "many"}],
        "tasks": [
            wheel_task(
                "t",
                "snapshot",
                "--set=source.database=shop",
                "--set=snapshot.parallelism={{job.parameters.parallelism}}",
            )
        ],
    }
    write_bundle(tmp_path, {"j": job})

    with pytest.raises(BundleError, match=r"task 't' of job 'j': invalid config: snapshot\.par"):
        validate(load_bundle(tmp_path))


def test_validate_rejects_a_dependency_on_a_task_the_job_lacks(tmp_path: Path) -> None:
    tasks = [wheel_task("stream", "stream", "--set=source.database=shop", depends_on=("snap",))]
    write_bundle(tmp_path, {"j": {"name": "j", "tasks": tasks}})

    with pytest.raises(BundleError, match="depends on snap, not a task of the job"):
        validate(load_bundle(tmp_path))
