"""`binlake bundle run-local JOB`: tasks in dependency order, each a `binlake` call with the job
parameters resolved for the target — recorded by a fake in place of `binlake.jobs.cli.main`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.bundle.definition import load_bundle
from binlake.bundle.local import TaskFailed, run_job
from binlake.config.settings import StreamConfig
from binlake.errors import BundleError
from binlake.jobs import cli

REPO = Path(__file__).resolve().parents[3]


class Recorder:
    """Stands in for `binlake.jobs.cli.main`: records each call, fails the commands it is told
    to."""

    def __init__(self, failing: str | None = None, exit_code: int = 2) -> None:
        self.calls: list[list[str]] = []
        self.failing = failing
        self.exit_code = exit_code

    def __call__(self, argv: Sequence[str]) -> int:
        self.calls.append(list(argv))
        return self.exit_code if argv[0] == self.failing else 0

    @property
    def commands(self) -> list[str]:
        return [call[0] for call in self.calls]


def wheel_task(key: str, command: str, *depends_on: str) -> dict[str, Any]:
    return {
        "task_key": key,
        "depends_on": [{"task_key": name} for name in depends_on],
        "python_wheel_task": {
            "package_name": "binlake",
            "entry_point": "binlake",
            "parameters": [command, "--set=source.database=shop"],
        },
    }


def write_job(root: Path, tasks: list[dict[str, Any]]) -> Path:
    bundle = {"bundle": {"name": "demo"}, "targets": {"local": {"default": True}}}
    bundle["resources"] = {"jobs": {"j": {"name": "j", "tasks": tasks}}}
    (root / "bundle.yml").write_text(yaml.safe_dump(bundle))
    return root


def test_tasks_run_after_the_tasks_they_depend_on(tmp_path: Path) -> None:
    tasks = [
        wheel_task("verify", "verify", "stream"),
        wheel_task("snapshot", "snapshot"),
        wheel_task("stream", "stream", "snapshot"),
    ]
    recorder = Recorder()

    run_job(load_bundle(write_job(tmp_path, tasks)), "j", execute=recorder)

    assert recorder.commands == ["snapshot", "stream", "verify"]


def test_catchup_job_snapshots_then_streams_available_now() -> None:
    recorder = Recorder()

    run_job(load_bundle(REPO, "local"), "silver_catchup", execute=recorder)

    assert [call[:2] for call in recorder.calls] == [
        ["snapshot", "--set=source.host=127.0.0.1"],
        ["stream", "--available-now"],
    ]
    # A local run belongs to no Databricks job: no stop pauses one.
    assert all(call[-1] == "--job-id=" for call in recorder.calls)


def test_job_parameters_resolve_to_the_target_values() -> None:
    recorder = Recorder()

    run_job(load_bundle(REPO, "local"), "bronze_snapshot", execute=recorder)

    (call,) = recorder.calls
    assert "--set=source.port=13306" in call
    assert "--set=source.database=shop" in call
    assert "--set=lake.root=./lakehouse" in call
    assert not any("{{" in argument or "${" in argument for argument in call)


def test_param_replaces_the_job_parameter_default() -> None:
    recorder = Recorder()

    run_job(
        load_bundle(REPO, "local"),
        "bronze_snapshot",
        {"snapshot_parallelism": "2"},
        execute=recorder,
    )

    assert "--set=snapshot.parallelism=2" in recorder.calls[0]


def test_var_reaches_the_task_through_the_job_parameter_default() -> None:
    recorder = Recorder()

    run_job(
        load_bundle(REPO, "local", {"lake_root": "/tmp/lake"}), "silver_stream", execute=recorder
    )

    assert "--set=lake.root=/tmp/lake" in recorder.calls[0]


def test_unknown_param_is_an_error_before_any_task_runs() -> None:
    recorder = Recorder()

    with pytest.raises(BundleError, match="job 'bronze_snapshot' has no parameter chunk"):
        run_job(load_bundle(REPO, "local"), "bronze_snapshot", {"chunk": "1"}, execute=recorder)
    assert recorder.calls == []


def test_failed_task_stops_the_run_and_names_the_skipped_tasks() -> None:
    recorder = Recorder(failing="snapshot")

    with pytest.raises(BundleError, match="'snapshot' of job 'silver_catchup' failed with exit "):
        run_job(load_bundle(REPO, "local"), "silver_catchup", execute=recorder)
    assert recorder.commands == ["snapshot"]


@pytest.mark.parametrize("exit_code", [3, 8])
def test_failed_task_exit_code_is_the_runs_exit_code(exit_code: int) -> None:
    recorder = Recorder(failing="stream", exit_code=exit_code)

    with pytest.raises(TaskFailed) as failed:
        run_job(load_bundle(REPO, "local"), "silver_catchup", execute=recorder)
    assert failed.value.exit_code == exit_code


def test_dependency_cycle_is_an_error_before_any_task_runs(tmp_path: Path) -> None:
    tasks = [wheel_task("a", "snapshot", "b"), wheel_task("b", "stream", "a")]
    recorder = Recorder()

    with pytest.raises(BundleError, match="tasks a, b of job 'j' depend on each other in a cycle"):
        run_job(load_bundle(write_job(tmp_path, tasks)), "j", execute=recorder)
    assert recorder.calls == []


def test_dependency_on_an_unknown_task_is_an_error(tmp_path: Path) -> None:
    tasks = [wheel_task("stream", "stream", "snap")]

    with pytest.raises(BundleError, match="'stream' of job 'j' depends on snap, not a task"):
        run_job(load_bundle(write_job(tmp_path, tasks)), "j", execute=Recorder())


def test_task_that_is_not_a_binlake_wheel_task_is_refused(tmp_path: Path) -> None:
    tasks = [{"task_key": "nb", "notebook_task": {"notebook_path": "/x"}}]

    with pytest.raises(BundleError, match="'nb' of job 'j' is not a python_wheel_task"):
        run_job(load_bundle(write_job(tmp_path, tasks)), "j", execute=Recorder())


def test_unknown_job_is_an_error_listing_the_jobs() -> None:
    with pytest.raises(BundleError, match="has no job 'gold'; its jobs are bronze_snapshot"):
        run_job(load_bundle(REPO, "local"), "gold", execute=Recorder())


def test_run_local_runs_the_tasks_through_the_cli_entry_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(
        "binlake.bundle.local.run_job", lambda *args, execute: calls.append(execute)
    )
    assert cli.main(["bundle", "run-local", "silver_catchup", "--root", str(REPO)]) == 0
    assert calls == [cli.main]


@pytest.mark.parametrize("job", ["silver_stream", "silver_catchup"])
def test_stream_jobs_take_the_schema_change_remedies_as_parameters(job: str) -> None:
    """Issue 25: how a stream job meets a DDL is a job parameter, so an operator changes it for
    a run (`stop` to look first, `evolve` to mirror the source) without a redeploy."""
    recorder = Recorder()
    params = {"stream_schema_changes": "evolve", "stream_on_unfollowable_ddl": "stop"}

    run_job(load_bundle(REPO, "local"), job, params, execute=recorder)

    stream = next(call for call in recorder.calls if call[0] == "stream")
    config = cli.config_from_args(cli.build_parser().parse_args(stream))
    assert (config.stream.schema_changes, config.stream.on_unfollowable_ddl) == ("evolve", "stop")


def test_the_stream_job_takes_its_trigger_as_a_parameter() -> None:
    """Where the compute runs only AvailableNow (serverless), a run sets `available_now`."""
    recorder = Recorder()

    run_job(load_bundle(REPO, "local"), "silver_stream", {"stream_trigger": "available_now"},
            execute=recorder)  # fmt: skip

    (stream,) = [call for call in recorder.calls if call[0] == "stream"]
    config = cli.config_from_args(cli.build_parser().parse_args(stream))
    assert config.stream.trigger == "available_now"


@pytest.mark.parametrize("job", ["silver_stream", "silver_catchup"])
@pytest.mark.parametrize(
    ("key", "given"),
    [
        ("max_bytes_per_batch", None),
        ("max_bytes_per_batch", 1048576),
        ("max_changes_per_batch", None),
        ("max_changes_per_batch", 20000),
        ("on_binlog_purged", None),
        ("on_binlog_purged", "stop"),
    ],
    ids=[
        "bytes-bundle-default",
        "bytes-set-for-a-run",
        "changes-bundle-default",
        "changes-set-for-a-run",
        "purged-bundle-default",
        "purged-stop",
    ],
)
def test_stream_jobs_take_their_batch_bounds_and_purge_remedy_as_parameters(
    job: str, key: str, given: Any
) -> None:
    """A run that drains a large backlog may take smaller (or larger) batches, and an operator
    may stop, rather than re-snapshot, at a purged binlog; the bundle's defaults are the
    config's."""
    recorder = Recorder()
    params = {} if given is None else {f"stream_{key}": str(given)}

    run_job(load_bundle(REPO, "local"), job, params, execute=recorder)

    stream = next(call for call in recorder.calls if call[0] == "stream")
    config = cli.config_from_args(cli.build_parser().parse_args(stream))
    expected = getattr(StreamConfig(), key) if given is None else given
    assert getattr(config.stream, key) == expected


@pytest.mark.parametrize(
    "job", ["bronze_snapshot", "silver_stream", "silver_catchup", "reset_tables"]
)
@pytest.mark.parametrize("given", [None, "soft"])
def test_every_task_takes_how_silver_keeps_deletes_as_a_parameter(job: str, given: Any) -> None:
    """`silver_deletes` reaches every task, the snapshot's too (a reset rebuilds silver), so
    one run never meets another's kind of silver."""
    recorder = Recorder()
    params = {"tables": "items"} if job == "reset_tables" else {}
    params.update({} if given is None else {"silver_deletes": given})

    run_job(load_bundle(REPO, "local"), job, params, execute=recorder)

    assert recorder.calls
    for call in recorder.calls:
        config = cli.config_from_args(cli.build_parser().parse_args(call))
        assert config.silver.deletes == (given or "hard")


@pytest.mark.parametrize(
    "job", ["bronze_snapshot", "silver_stream", "silver_catchup", "reset_tables"]
)
def test_every_task_takes_the_history_silver_keeps_as_parameters(job: str) -> None:
    """`silver_history` and `silver_history_tables` (a YAML mapping) reach every task: a reset
    joins the snapshot into the history it keeps."""
    recorder = Recorder()
    params = {"tables": "items"} if job == "reset_tables" else {}
    params["silver_history_tables"] = "{customers: scd2, 'orders_.*': latest}"

    run_job(load_bundle(REPO, "local"), job, params, execute=recorder)

    assert recorder.calls
    for call in recorder.calls:
        config = cli.config_from_args(cli.build_parser().parse_args(call))
        assert config.silver.history == "latest"
        assert config.silver.history_of("shop.customers") == "scd2"
        assert config.silver.history_of("shop.orders_07") == "latest"


@pytest.mark.parametrize(
    "job", ["bronze_snapshot", "silver_stream", "silver_catchup", "reset_tables"]
)
def test_every_task_takes_the_routes_as_a_parameter(job: str) -> None:
    """`silver_routes` (a YAML list) reaches every task: each validates it, the stream and a
    reset's join land by it."""
    recorder = Recorder()
    params = {"tables": "items"} if job == "reset_tables" else {}
    params["silver_routes"] = r"[{source: 'orders_[0-9]+', target: orders}]"

    run_job(load_bundle(REPO, "local"), job, params, execute=recorder)

    assert recorder.calls
    for call in recorder.calls:
        config = cli.config_from_args(cli.build_parser().parse_args(call))
        assert config.silver.route_of("shop.orders_07") == "shop.orders"
        assert config.silver.route_of("shop.customers") is None
