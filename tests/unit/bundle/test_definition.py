"""Loading bundle.yml and its includes for a target, offline: target merging, variables
(--var, BUNDLE_VAR_*, the target's, the default), the parse into the typed models and the SDK's
JobSettings, and `binlake bundle validate`. Modes, presets, run_as, permissions and lookups are
the Databricks CLI's (its JSON schema: test_cli_schema)."""

from __future__ import annotations

from pathlib import Path

import pytest
from databricks.sdk.service.jobs import JobSettings

from binlake.bundle.compute import server_ids_of
from binlake.bundle.definition import STAND_INS
from binlake.bundle.validate import validate
from binlake.errors import BundleError

from .bundles import REPO, load, wheel_task, write_bundle

TARGETS = ["local", "dev", "prod"]


# The project's bundle.


@pytest.mark.parametrize("target", TARGETS)
def test_every_job_resource_parses_into_the_sdks_typed_job_settings(target: str) -> None:
    bundle = load(REPO, target)

    jobs = {"bronze_snapshot", "silver_stream", "silver_catchup", "reset_tables"}
    assert set(bundle.jobs) == jobs
    for key, job in bundle.jobs.items():
        assert isinstance(job.settings, JobSettings)
        assert JobSettings.from_dict(job.settings.as_dict()) == job.settings, key
        assert job.settings.tasks and job.settings.parameters
        assert job.settings.environments or job.settings.job_clusters


@pytest.mark.parametrize("target", TARGETS)
def test_validate_accepts_the_project_bundle(target: str) -> None:
    summary = validate(load(REPO, target))

    catchup = "silver_catchup (binlake silver catch-up): snapshot → stream"
    assert any(line.startswith(catchup) for line in summary)


def test_local_target_points_jobs_at_the_project_database_and_lakehouse() -> None:
    defaults = load(REPO, "local").job("bronze_snapshot").parameter_defaults

    assert defaults["source_host"] == "127.0.0.1"
    assert defaults["source_port"] == "13306"
    assert defaults["source_database"] == "shop"
    assert defaults["lake_root"] == "./lakehouse"
    assert defaults["lake_catalog"] == ""


def test_development_target_names_everything_after_the_deploying_user() -> None:
    """Offline the deploying user is a stand-in; the CLI puts the real one at deploy."""
    short = STAND_INS["workspace.current_user.short_name"]
    bundle = load(REPO, "dev")

    defaults = bundle.job("bronze_snapshot").parameter_defaults
    assert defaults["lake_root"] == f"/Volumes/dev/{short}_binlake/lakehouse"
    assert (defaults["lake_bronze_schema"], defaults["lake_silver_schema"]) == (
        f"{short}_bronze",
        f"{short}_silver",
    )
    assert defaults["source_server_id_range"] == server_ids_of(short)
    schemas = {s.name for s in bundle.resources["schemas"].values()}
    assert schemas == {f"{short}_binlake", f"{short}_bronze_shop", f"{short}_silver_shop"}
    volume = bundle.resources["volumes"]["lakehouse"]
    assert (
        f"/Volumes/{volume.catalog_name}/{volume.schema_name}/{volume.name}"
        == defaults["lake_root"]
    )


def test_production_target_emails_the_on_call_address_on_failure() -> None:
    for job in load(REPO, "prod").jobs.values():
        assert job.settings.email_notifications is not None
        assert job.settings.email_notifications.on_failure == ["binlake-oncall@example.com"]


def test_production_target_without_its_service_principal_is_an_error() -> None:
    with pytest.raises(BundleError, match=r"schemas\.system, .* grant access to nobody"):
        validate(load(REPO, "prod", environ={}))


def test_workspace_targets_resolve_variables_that_reference_variables() -> None:
    prod = load(REPO, "prod").job("bronze_snapshot").parameter_defaults

    assert prod["lake_root"] == "/Volumes/prod/binlake/lakehouse"
    assert prod["snapshot_parallelism"] == "8"


def test_whole_string_reference_keeps_the_variable_type() -> None:
    bundle = load(REPO, "prod", variables={"compute": "dedicated"})
    cluster = bundle.job("silver_stream").settings.job_clusters
    assert cluster is not None and cluster[0].new_cluster is not None

    assert cluster[0].new_cluster.num_workers == 4


@pytest.mark.parametrize(
    ("target", "secret"), [("dev", "someone_binlake/source-password"), ("local", "")]
)
def test_password_comes_from_the_secret_scope_not_from_the_files(target: str, secret: str) -> None:
    for job in load(REPO, target).jobs.values():
        assert job.parameter_defaults["source_password_secret"] == secret
        for task in job.settings.tasks or []:
            assert task.python_wheel_task is not None
            parameters = task.python_wheel_task.parameters or []
            given = "--set=source.password_secret={{job.parameters.source_password_secret}}"
            assert given in parameters
            assert not any("password=" in p or "password_env" in p for p in parameters)


def test_the_wheel_is_the_task_library_on_classic_compute() -> None:
    serverless = load(REPO, "dev", variables={"compute": "serverless"}).job("bronze_snapshot")
    classic = load(REPO, "dev", variables={"compute": "dedicated"}).job("bronze_snapshot")
    (environment,) = serverless.settings.environments or []
    (task,) = classic.settings.tasks or []

    assert environment.spec is not None and environment.spec.dependencies
    assert [library.whl for library in task.libraries or []] == environment.spec.dependencies


def test_default_target_is_the_one_marked_default() -> None:
    assert load(REPO).target == "dev"


def test_unknown_target_is_an_error_listing_the_targets() -> None:
    with pytest.raises(BundleError, match="unknown target 'qa'; the targets are local, dev, prod"):
        load(REPO, "qa")


# Variables.


@pytest.mark.parametrize(
    ("environ", "overrides", "expected"),
    [
        ({}, {}, "target"),
        ({"BUNDLE_VAR_db": "environment"}, {}, "environment"),
        ({"BUNDLE_VAR_db": "environment"}, {"db": "flag"}, "flag"),
    ],
)
def test_variable_precedence_is_var_then_environment_then_target_then_default(
    tmp_path: Path, environ: dict[str, str], overrides: dict[str, str], expected: str
) -> None:
    targets = {"local": {"default": True, "variables": {"db": "target"}}}
    write_bundle(tmp_path, {"j": {"name": "${var.db}"}}, {"db": {"default": "d"}}, targets)

    bundle = load(tmp_path, environ=environ, variables=overrides)

    assert bundle.job("j").settings.name == expected


def test_default_applies_without_any_other_value(tmp_path: Path) -> None:
    write_bundle(tmp_path, {"j": {"name": "${var.db}"}}, {"db": {"default": "d"}})

    assert load(tmp_path).job("j").settings.name == "d"


def test_undeclared_variable_reference_is_an_error(tmp_path: Path) -> None:
    write_bundle(tmp_path, {"j": {"name": "${var.missing}", "tasks": [wheel_task("t", "status")]}})

    with pytest.raises(BundleError, match=r"\$\{var\.missing\}, which is not declared"):
        load(tmp_path)


def test_target_value_for_an_undeclared_variable_is_an_error(tmp_path: Path) -> None:
    targets = {"local": {"default": True, "variables": {"catalgo": "x"}}}
    write_bundle(tmp_path, {}, {"catalog": {"default": ""}}, targets)

    with pytest.raises(BundleError, match=r"targets\.local\.variables sets catalgo, not declared"):
        load(tmp_path)


def test_variable_without_any_value_is_an_error_naming_every_way_to_set_it(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, variables={"db": {"description": "no default"}})

    with pytest.raises(BundleError, match=r"'db' has no value for target 'local'.*BUNDLE_VAR_db"):
        load(tmp_path)


def test_complex_variable_cannot_be_set_from_the_environment(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, variables={"emails": {"type": "complex", "default": []}})

    with pytest.raises(BundleError, match="'emails' is complex"):
        load(tmp_path, environ={"BUNDLE_VAR_emails": "a@example.com"})


def test_variables_referencing_each_other_in_a_cycle_is_an_error(tmp_path: Path) -> None:
    variables = {"a": {"default": "${var.b}"}, "b": {"default": "x-${var.a}"}}
    write_bundle(tmp_path, {"j": {"name": "${var.a}"}}, variables=variables)

    with pytest.raises(BundleError, match="cycle"):
        load(tmp_path)


def test_a_lookup_is_a_visible_stand_in_for_the_id_the_cli_looks_up(tmp_path: Path) -> None:
    variables = {"policy": {"lookup": {"cluster_policy": "Jobs"}}}
    write_bundle(tmp_path, {"j": {"name": "j", "description": "${var.policy}"}}, variables)

    assert load(tmp_path).job("j").settings.description == "lookup(cluster_policy: Jobs)"


# What only the Databricks CLI acts on is left to it.


def test_settings_only_the_cli_acts_on_are_left_to_it(tmp_path: Path) -> None:
    targets = {
        "local": {
            "default": True,
            "mode": "production",
            "cluster_id": "0101-abc",
            "git": {"branch": "main"},
            "sync": {"exclude": ["*.tmp"]},
            "bundle": {"databricks_cli_version": ">=0.250.0"},
            "workspace": {"root_path": "/Workspace/Shared/.bundle/demo", "auth_type": "pat"},
        }
    }
    task = wheel_task("t", "status", "--set=source.database=shop")
    job = {"name": "j", "lifecycle": {"prevent_destroy": True}, "tasks": [task]}
    write_bundle(
        tmp_path,
        {"j": job},
        targets=targets,
        bundle={"name": "demo", "uuid": "1234"},
        sync={"include": ["*"]},
        scripts={"hello": {"content": "echo hi"}},
        python={"venv_path": ".venv"},
        experimental={"python": {"resources": []}},
        presets={"source_linked_deployment": False, "artifacts_dynamic_version": True},
        workspace={"host": "https://example.cloud.databricks.com"},
        artifacts={"w": {"type": "whl", "build": "true", "dynamic_version": True}},
    )

    bundle = load(tmp_path)

    assert bundle.job("j").lifecycle == {"prevent_destroy": True}  # kept for the CLI
    assert validate(bundle) == ["j (j): t; survives destroy"]


def test_misspelt_job_setting_is_rejected_by_name(tmp_path: Path) -> None:
    job = {"name": "j", "max_concurent_runs": 1, "tasks": [wheel_task("t", "status")]}
    write_bundle(tmp_path, {"j": job})

    with pytest.raises(BundleError, match=r"job 'j': Unexpected field 'max_concurent_runs'"):
        load(tmp_path)


def test_non_string_job_parameter_default_is_an_error(tmp_path: Path) -> None:
    job = {"name": "j", "parameters": [{"name": "port", "default": 3306}]}
    write_bundle(tmp_path, {"j": job})

    with pytest.raises(BundleError, match="parameter 'port' needs a string default"):
        load(tmp_path)


# Targets merge over the top level.


def test_target_resources_merge_into_the_job_by_key(tmp_path: Path) -> None:
    job = {
        "name": "j",
        "max_concurrent_runs": 1,
        "tasks": [wheel_task("a", "status"), wheel_task("b", "verify")],
    }
    override = {
        "max_concurrent_runs": 2,
        "tasks": [{"task_key": "b", "timeout_seconds": 60}],
    }
    targets = {"local": {"default": True, "resources": {"jobs": {"j": override}}}}
    write_bundle(tmp_path, {"j": job}, targets=targets)

    settings = load(tmp_path).job("j").settings

    assert settings.max_concurrent_runs == 2
    assert [(t.task_key, t.timeout_seconds) for t in settings.tasks or []] == [
        ("a", None),
        ("b", 60),
    ]
    assert settings.tasks is not None and settings.tasks[1].python_wheel_task is not None


# binlake's own rules (validate).


def test_validate_rejects_a_task_whose_parameters_the_cli_rejects(tmp_path: Path) -> None:
    write_bundle(tmp_path, {"j": {"name": "j", "tasks": [wheel_task("t", "snapshot", "--fast")]}})

    with pytest.raises(BundleError, match="task 't' of job 'j': the binlake CLI rejects"):
        validate(load(tmp_path))


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
        validate(load(tmp_path))


def test_validate_rejects_a_dependency_on_a_task_the_job_lacks(tmp_path: Path) -> None:
    tasks = [wheel_task("stream", "stream", "--set=source.database=shop", depends_on=("snap",))]
    write_bundle(tmp_path, {"j": {"name": "j", "tasks": tasks}})

    with pytest.raises(BundleError, match="depends on snap, not a task of the job"):
        validate(load(tmp_path))


def test_validate_rejects_a_production_target_whose_data_can_be_destroyed(tmp_path: Path) -> None:
    schemas = {"kept": {"catalog_name": "c", "name": "a", "lifecycle": {"prevent_destroy": True}}}
    schemas["lost"] = {"catalog_name": "c", "name": "b"}
    targets = {"prod": {"default": True, "mode": "production"}}
    write_bundle(tmp_path, {}, targets=targets, resources={"schemas": schemas})

    with pytest.raises(BundleError, match=r"schemas\.lost needs lifecycle\.prevent_destroy") as e:
        validate(load(tmp_path))
    assert "kept" not in str(e.value)
