"""Loading bundle.yml and its includes for a target: the keys the Databricks CLI accepts, target
merging, variables (BUNDLE_VAR_*, lookups), mode, presets, run_as, permissions, the lossless
parse into the SDK's JobSettings, and `binlake bundle validate`. The workspace, where a target
needs one, is a stub client: the HTTP requests are test_bundle_workspace's business."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from databricks.sdk.service.compute import Policy
from databricks.sdk.service.jobs import JobSettings

from binlake.bundle.compute import server_ids_of
from binlake.bundle.definition import load_bundle
from binlake.bundle.remote import CurrentUser
from binlake.bundle.validate import validate
from binlake.errors import BundleError

from .bundles import PRINCIPAL, REPO, USER, StubWorkspace, load, wheel_task, write_bundle

TARGETS = ["local", "dev", "prod"]


def scheduled_job(**settings: Any) -> dict[str, Any]:
    return {
        "name": "nightly",
        "schedule": {"quartz_cron_expression": "0 0 1 * * ?", "timezone_id": "UTC"},
        "tasks": [wheel_task("t", "status")],
        **settings,
    }


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


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("local", "binlake silver catch-up"),
        ("dev", "[dev jane_doe] binlake silver catch-up"),
        ("prod", "binlake silver catch-up"),
    ],
)
def test_validate_accepts_the_project_bundle(target: str, name: str) -> None:
    summary = validate(load(REPO, target))

    assert any(line.startswith(f"silver_catchup ({name}): snapshot → stream") for line in summary)


def test_local_target_points_jobs_at_the_project_database_and_lakehouse() -> None:
    workspace = StubWorkspace()
    defaults = load(REPO, "local", connect=workspace).job("bronze_snapshot").parameter_defaults

    assert defaults["source_host"] == "127.0.0.1"
    assert defaults["source_port"] == "13306"
    assert defaults["source_database"] == "shop"
    assert defaults["lake_root"] == "./lakehouse"
    assert defaults["lake_catalog"] == ""
    assert workspace.connections == []  # the local target never asks a workspace


def test_development_target_is_the_users_own_copy() -> None:
    bundle = load(REPO, "dev")

    assert bundle.mode == "development"
    assert bundle.root_path == f"/Workspace/Users/{USER}/.bundle/binlake/dev"
    job = bundle.job("bronze_snapshot")
    assert job.settings.name == "[dev jane_doe] binlake bronze snapshot"
    assert job.settings.tags == {"dev": "jane_doe"}
    defaults = job.parameter_defaults
    assert defaults["lake_root"] == "/Volumes/dev/jane_doe_binlake/lakehouse"
    assert (defaults["lake_bronze_schema"], defaults["lake_silver_schema"]) == (
        "jane_doe_bronze",
        "jane_doe_silver",
    )
    assert defaults["source_server_id_range"] == server_ids_of("jane_doe")
    schemas = {s.name for s in bundle.resources["schemas"].values()}
    assert schemas == {"jane_doe_binlake", "jane_doe_bronze_shop", "jane_doe_silver_shop"}
    volume = bundle.resources["volumes"]["lakehouse"]
    assert (
        f"/Volumes/{volume.catalog_name}/{volume.schema_name}/{volume.name}"
        == defaults["lake_root"]
    )


def test_production_target_runs_as_the_principal_with_the_operators_permissions() -> None:
    bundle = load(REPO, "prod")

    assert bundle.root_path == f"/Workspace/Users/{PRINCIPAL}/.bundle/binlake/prod"
    for job in bundle.jobs.values():
        assert job.settings.run_as is not None
        assert job.settings.run_as.service_principal_name == PRINCIPAL
        assert [
            (e.group_name or e.service_principal_name, e.permission_level.value)
            for e in job.access_control
        ] == [("binlake-operators", "CAN_MANAGE_RUN"), (PRINCIPAL, "CAN_MANAGE")]
        assert job.settings.email_notifications is not None
        assert job.settings.email_notifications.on_failure == ["binlake-oncall@example.com"]


def test_production_target_without_its_service_principal_is_an_error() -> None:
    with pytest.raises(BundleError, match=r"run_as\.service_principal_name is empty"):
        load(REPO, "prod", environ={})


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
    ("target", "secret"), [("dev", "jane_doe_binlake/source-password"), ("local", "")]
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


def test_wheel_path_is_relative_to_the_bundle_root_on_either_compute() -> None:
    on_serverless = load(REPO, "dev", variables={"compute": "serverless"})
    serverless = on_serverless.job("bronze_snapshot").settings
    classic = load(REPO, "dev", variables={"compute": "dedicated"}).job("bronze_snapshot").settings
    (environment,) = serverless.environments or []
    (task,) = classic.tasks or []

    assert environment.spec is not None and environment.spec.dependencies == ["dist/*.whl"]
    assert [library.whl for library in task.libraries or []] == ["dist/*.whl"]


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


def test_target_value_for_an_undeclared_variable_names_the_closest(tmp_path: Path) -> None:
    targets = {"local": {"default": True, "variables": {"catalgo": "x"}}}
    write_bundle(tmp_path, {}, {"catalog": {"default": ""}}, targets)

    with pytest.raises(BundleError, match=r"sets 'catalgo', not declared.*did you mean 'catalog'"):
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


def test_lookup_variable_resolves_through_the_workspace(tmp_path: Path) -> None:
    variables = {"policy": {"lookup": {"cluster_policy": "Jobs"}}}
    write_bundle(tmp_path, {"j": {"name": "j", "description": "${var.policy}"}}, variables)
    policies = (Policy(name="Other", policy_id="p-1"), Policy(name="Jobs", policy_id="p-2"))

    bundle = load(tmp_path, connect=StubWorkspace(policies=policies))

    assert bundle.job("j").settings.description == "p-2"


def test_lookup_of_a_missing_object_is_an_error(tmp_path: Path) -> None:
    variables = {"policy": {"lookup": {"cluster_policy": "Jobs"}}}
    write_bundle(tmp_path, {"j": {"name": "${var.policy}"}}, variables)

    with pytest.raises(BundleError, match="'policy': no cluster_policy named 'Jobs'"):
        load(tmp_path)


def test_lookup_offline_is_an_error_that_says_it_needs_the_workspace(tmp_path: Path) -> None:
    variables = {"policy": {"lookup": {"cluster_policy": "Jobs"}}}
    write_bundle(tmp_path, {"j": {"name": "${var.policy}"}}, variables)

    with pytest.raises(BundleError, match=r"looking up cluster_policy 'Jobs'.*no workspace conn"):
        load_bundle(tmp_path)


def test_unused_lookup_asks_nothing(tmp_path: Path) -> None:
    variables = {"policy": {"lookup": {"cluster_policy": "Jobs"}}}
    write_bundle(tmp_path, {"j": {"name": "j"}}, variables)

    assert load_bundle(tmp_path).job("j").settings.name == "j"


def test_unknown_lookup_kind_names_the_closest(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, {"p": {"lookup": {"clusterpolicy": "Jobs"}}})

    with pytest.raises(BundleError, match="did you mean 'cluster_policy'"):
        load(tmp_path)


# Keys: what the Databricks CLI documents is accepted, anything else is named.


def test_documented_settings_binlake_does_not_act_on_are_accepted(tmp_path: Path) -> None:
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

    assert bundle.connection.host == "https://example.cloud.databricks.com"
    assert bundle.job("j").lifecycle == {"prevent_destroy": True}  # kept for the CLI
    assert validate(bundle) == ["j (j): t; survives destroy"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"permisions": []}, "bundle.yml: unknown key 'permisions'; did you mean 'permissions'?"),
        ({"presets": {"name_prefx": "x"}}, "unknown key 'name_prefx'; did you mean 'name_prefix'"),
        ({"workspace": {"hots": "h"}}, "workspace: unknown key 'hots'; did you mean 'host'?"),
    ],
)
def test_unknown_key_is_an_error_naming_the_closest_known_key(
    tmp_path: Path, extra: dict[str, Any], message: str
) -> None:
    write_bundle(tmp_path, {}, **extra)

    with pytest.raises(BundleError, match=message.replace("?", r"\?")):
        load(tmp_path)


def test_unknown_target_key_is_an_error_naming_the_closest(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, targets={"local": {"default": True, "mdoe": "development"}})

    with pytest.raises(BundleError, match=r"targets\.local: unknown key 'mdoe'; did you mean 'mo"):
        load(tmp_path)


def test_unknown_mode_is_an_error(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, targets={"local": {"default": True, "mode": "staging"}})

    with pytest.raises(BundleError, match="mode must be development or production"):
        load(tmp_path)


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


def test_host_with_a_reference_is_an_error(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, workspace={"host": "${var.host}"})

    with pytest.raises(BundleError, match=r"workspace\.host cannot use \$\{...\}"):
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


def test_target_workspace_merges_over_the_top_level_workspace(tmp_path: Path) -> None:
    targets = {"local": {"default": True, "workspace": {"root_path": "/Workspace/Shared/x"}}}
    write_bundle(tmp_path, {}, targets=targets, workspace={"host": "https://h.example.com"})

    bundle = load(tmp_path)

    assert (bundle.connection.host, bundle.root_path) == (
        "https://h.example.com",
        "/Workspace/Shared/x",
    )
    assert bundle.artifact_path == "/Workspace/Shared/x/artifacts"


def test_default_root_path_is_under_the_users_home(tmp_path: Path) -> None:
    write_bundle(tmp_path, {})

    assert load(tmp_path).root_path == f"/Workspace/Users/{USER}/.bundle/demo/local"


def test_profile_reaches_the_connection(tmp_path: Path) -> None:
    targets = {"local": {"default": True, "workspace": {"profile": "team"}}}
    write_bundle(tmp_path, {}, targets=targets)

    assert dict(load(tmp_path).connection.settings) == {"profile": "team"}


# Modes and presets.


def development(presets: dict[str, Any] | None = None, **workspace: Any) -> dict[str, Any]:
    target: dict[str, Any] = {"default": True, "mode": "development"}
    if presets is not None:
        target["presets"] = presets
    if workspace:
        target["workspace"] = workspace
    return {"local": target}


def test_development_mode_prefixes_tags_pauses_and_allows_concurrent_runs(tmp_path: Path) -> None:
    write_bundle(tmp_path, {"j": scheduled_job()}, targets=development())

    settings = load(tmp_path).job("j").settings

    assert settings.name == "[dev jane_doe] nightly"
    assert settings.tags == {"dev": "jane_doe"}
    assert settings.schedule is not None and settings.schedule.pause_status is not None
    assert settings.schedule.pause_status.value == "PAUSED"
    assert settings.max_concurrent_runs == 4


def test_what_a_job_sets_beats_the_development_defaults(tmp_path: Path) -> None:
    job = scheduled_job(max_concurrent_runs=1, tags={"dev": "team"})
    job["schedule"]["pause_status"] = "UNPAUSED"
    write_bundle(tmp_path, {"j": job}, targets=development())

    settings = load(tmp_path).job("j").settings

    assert settings.max_concurrent_runs == 1
    assert settings.tags == {"dev": "team"}
    assert settings.schedule is not None and settings.schedule.pause_status is not None
    assert settings.schedule.pause_status.value == "UNPAUSED"


def test_presets_apply_outside_development_mode_too(tmp_path: Path) -> None:
    presets = {"name_prefix": "[qa] ", "tags": {"team": "cdc"}, "trigger_pause_status": "PAUSED"}
    write_bundle(tmp_path, {"j": scheduled_job()}, presets=presets)

    settings = load(tmp_path).job("j").settings

    assert (settings.name, settings.tags) == ("[qa] nightly", {"team": "cdc"})
    assert settings.schedule is not None and settings.schedule.pause_status is not None
    assert settings.schedule.pause_status.value == "PAUSED"


def test_development_prefix_must_name_the_user(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, targets=development({"name_prefix": "[dev] "}))

    with pytest.raises(BundleError, match="name_prefix must contain the user name"):
        load(tmp_path)


def test_development_root_path_shared_by_everyone_is_an_error(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, targets=development(root_path="/Workspace/Shared/.bundle/demo"))

    with pytest.raises(BundleError, match=r"workspace\.root_path .* must start with '~/'"):
        load(tmp_path)


def test_development_mode_cannot_unpause_every_trigger(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, targets=development({"trigger_pause_status": "UNPAUSED"}))

    with pytest.raises(BundleError, match=r"cannot set presets\.trigger_pause_status to UNPAUSED"):
        load(tmp_path)


def test_development_mode_offline_says_it_needs_the_workspace(tmp_path: Path) -> None:
    write_bundle(tmp_path, {}, targets=development())

    with pytest.raises(BundleError, match=r"current user .*mode: development.*no workspace conn"):
        load_bundle(tmp_path)


def test_production_mode_needs_an_explicit_root_path(tmp_path: Path) -> None:
    job = {"name": "j", "tasks": [wheel_task("t", "status")]}
    write_bundle(tmp_path, {"j": job}, targets={"local": {"default": True, "mode": "production"}})

    with pytest.raises(BundleError, match=r"mode: production and must set workspace\.root_path"):
        load(tmp_path)


@pytest.mark.parametrize(
    ("user_name", "display_name", "short_name"),
    [
        ("Jane.Doe@example.com", None, "jane_doe"),
        ("jane-o'doe+ci@example.com", None, "jane_o_doe_ci"),
        ("ünal.çelik@example.com", None, "ünal_çelik"),
        (PRINCIPAL, "Binlake Deployer", "binlake_deployer"),
    ],
)
def test_short_name_follows_the_databricks_cli(
    user_name: str, display_name: str | None, short_name: str
) -> None:
    assert CurrentUser.of(user_name, display_name).short_name == short_name


# run_as and permissions.


def test_bundle_run_as_applies_to_jobs_that_set_none(tmp_path: Path) -> None:
    jobs = {
        "a": {"name": "a"},
        "b": {"name": "b", "run_as": {"user_name": "owner@example.com"}},
    }
    write_bundle(tmp_path, jobs, run_as={"service_principal_name": PRINCIPAL})

    bundle = load(tmp_path)

    assert bundle.job("a").settings.run_as is not None
    assert bundle.job("a").settings.run_as.service_principal_name == PRINCIPAL
    assert bundle.job("b").settings.run_as is not None
    assert bundle.job("b").settings.run_as.user_name == "owner@example.com"


def test_permissions_map_onto_job_levels_and_the_jobs_own_win(tmp_path: Path) -> None:
    permissions = [
        {"group_name": "ops", "level": "CAN_RUN"},
        {"user_name": "lead@example.com", "level": "CAN_VIEW"},
        {"service_principal_name": PRINCIPAL, "level": "CAN_MANAGE"},
    ]
    job = {"name": "j", "permissions": [{"user_name": "lead@example.com", "level": "IS_OWNER"}]}
    write_bundle(tmp_path, {"j": job}, permissions=permissions)

    acl = load(tmp_path).job("j").access_control

    assert [(e.as_dict()) for e in acl] == [
        {"group_name": "ops", "permission_level": "CAN_MANAGE_RUN"},
        {"user_name": "lead@example.com", "permission_level": "IS_OWNER"},
        {"service_principal_name": PRINCIPAL, "permission_level": "CAN_MANAGE"},
    ]


def test_target_permissions_add_to_the_top_level_ones(tmp_path: Path) -> None:
    targets = {
        "local": {"default": True, "permissions": [{"group_name": "b", "level": "CAN_VIEW"}]}
    }
    write_bundle(
        tmp_path,
        {"j": {"name": "j"}},
        targets=targets,
        permissions=[{"group_name": "a", "level": "CAN_VIEW"}],
    )

    assert [e.group_name for e in load(tmp_path).job("j").access_control] == ["a", "b"]


@pytest.mark.parametrize(
    ("permission", "message"),
    [
        ({"group_name": "ops", "level": "CAN_MANAGE_RUN"}, "level must be one of CAN_VIEW"),
        ({"group_name": "ops", "user_name": "u", "level": "CAN_RUN"}, "must name one principal"),
        ({"group": "ops", "level": "CAN_RUN"}, "unknown key 'group'; did you mean 'group_name'"),
    ],
)
def test_malformed_permission_is_an_error(
    tmp_path: Path, permission: dict[str, str], message: str
) -> None:
    write_bundle(tmp_path, {"j": {"name": "j"}}, permissions=[permission])

    with pytest.raises(BundleError, match=message):
        load(tmp_path)


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
