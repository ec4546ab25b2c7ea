"""Bad configuration through the real CLI entry point, without a database or Spark: one
`binlake: error:` line naming the problem, the exit code of its kind, no traceback, no secret,
and no lake root created. Also the exit-code contract and the preflight checks that need no
server (the lake root, the server-id collision logic)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from binlake import errors
from binlake.config.settings import LakeConfig, parse_config
from binlake.errors import LakeError, SourceError
from binlake.jobs.cli import UNEXPECTED_EXIT, main
from binlake.jobs.preflight import check_lake_writable, check_server_ids

SECRET = "hunter2-not-for-printing"

#: case → (config file text, [--set pairs], words the message must hold).
_BAD_CONFIGS: dict[str, tuple[str, list[str], list[str]]] = {
    "malformed_yaml": (
        f"source:\n  database: shop\n  password: [{SECRET}\n",
        [],
        ["not valid YAML", "line"],
    ),
    "incomplete_yaml_without_database": (
        "source:\n  host: db1\n",
        [],
        ["source.database", "required"],
    ),
    "unknown_key_with_a_close_name": (
        "source: {database: shop}\nsnapshot: {chunksize: 100}\n",
        [],
        ["snapshot.chunksize", "unknown key", "did you mean 'chunk_size'?"],
    ),
    "unknown_override_key": (
        "source: {database: shop}\n",
        ["source.hots=db1"],
        ["source.hots", "unknown key", "did you mean 'host'?"],
    ),
    "unknown_section": (
        "source: {database: shop}\nsnapshots: {chunk_size: 100}\n",
        [],
        ["snapshots", "unknown section", "did you mean 'snapshot'?"],
    ),
    "unknown_key_nothing_close": (
        "source: {database: shop, xyzzy: 1}\n",
        [],
        ["source.xyzzy", "unknown key"],
    ),
    "port_not_a_number": (
        "source: {database: shop, port: many}\n",
        [],
        ["source.port", "valid integer"],
    ),
    "parallelism_a_list": (
        "source: {database: shop}\nsnapshot: {parallelism: [1, 2]}\n",
        [],
        ["snapshot.parallelism", "valid integer"],
    ),
    "tables_not_a_list": (
        "source: {database: shop, tables: {orders: 1}}\n",
        [],
        ["source.tables", "valid list"],
    ),
    "connect_timeout_below_a_second": (
        "source: {database: shop, connect_timeout_s: 0.5}\n",
        [],
        ["source.connect_timeout_s", "greater than or equal to 1"],
    ),
    "server_id_range_reversed": (
        "source: {database: shop, server_id_range: [5499, 5400]}\n",
        [],
        ["source.server_id_range", "[5499, 5400]", "low <= high"],
    ),
    "server_id_range_too_small": (
        "source: {database: shop, server_id_range: [1, 3]}\nsnapshot: {parallelism: 4}\n",
        [],
        ["source.server_id_range [1, 3] holds 3 ids", "plus the stream need 5"],
    ),
    "server_id_range_not_a_pair": (
        "source: {database: shop, server_id_range: [5400, 5401, 5402]}\n",
        [],
        ["source.server_id_range", "at most 2 items"],
    ),
    "override_without_a_value": (
        "source: {database: shop}\n",
        ["snapshot.parallelism"],
        ["--set expects KEY=VALUE"],
    ),
    "password_env_not_set": (
        "source: {database: shop, password_env: BINLAKE_TEST_UNSET_PASSWORD}\n",
        [],
        ["source.password_env", "'BINLAKE_TEST_UNSET_PASSWORD'", "not set"],
    ),
}


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, overrides: list[str]
) -> tuple[int, str, Path]:
    config = tmp_path / "binlake.yml"
    config.write_text(text)
    lake = tmp_path / "lake"
    args = ["snapshot", "--config", str(config), "--set", f"lake.root={lake}"]
    for pair in overrides:
        args += ["--set", pair]
    code = main(args)
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err, lake


def assert_one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("binlake: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("case", sorted(_BAD_CONFIGS))
def test_bad_config_ends_in_one_line_with_exit_code_2(
    case: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, overrides, words = _BAD_CONFIGS[case]
    monkeypatch.delenv("BINLAKE_TEST_UNSET_PASSWORD", raising=False)
    code, stderr, lake = _run(capsys, tmp_path, text, overrides)
    line = assert_one_error_line(stderr)
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"
    assert SECRET not in stderr
    assert code == 2
    assert not lake.exists(), "a refused start created the lake root"


def test_missing_config_file_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["status", "--config", str(tmp_path / "nope.yml")]) == 2
    line = assert_one_error_line(capsys.readouterr().err)
    assert "nope.yml" in line and "does not exist" in line


def test_unexpected_failure_is_one_line_and_its_own_exit_code(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: Any) -> Any:
        raise RuntimeError("something broke\n  at a Java frame")

    monkeypatch.setattr("binlake.jobs.cli.config_from_args", broken)
    assert main(["verify", "--set", "source.database=shop"]) == UNEXPECTED_EXIT
    line = assert_one_error_line(capsys.readouterr().err)
    assert line == (
        "binlake: error: unexpected RuntimeError: something broke (run with -v for the traceback)"
    )

    assert main(["-v", "verify", "--set", "source.database=shop"]) == UNEXPECTED_EXIT
    stderr = capsys.readouterr().err
    assert "Traceback" in stderr and "something broke" in stderr
    assert stderr.rstrip().endswith("binlake: error: unexpected RuntimeError: something broke")


def test_each_kind_of_failure_has_its_own_exit_code() -> None:
    kinds = [
        errors.ConfigError,
        errors.SourceConnectionError,
        errors.SourceError,
        errors.LakeError,
        errors.BinlogPurgedError,
        errors.SchemaChangeError,
        errors.SnapshotIncompleteError,
        errors.LedgerError,
    ]
    codes = [kind.exit_code for kind in kinds]
    assert codes == [2, 3, 4, 5, 6, 7, 8, 9]
    # 1 is verify's "differences found"; UNEXPECTED_EXIT is anything binlake did not anticipate.
    assert UNEXPECTED_EXIT not in codes and 1 not in codes


# ---------------------------------------------------------------------------------------------
# The lake root: probed without leaving anything behind


def test_lake_root_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    root = tmp_path / "afile" / "deeper" / "lake"
    with pytest.raises(LakeError, match=r"cannot be created: .*afile is a file"):
        check_lake_writable(LakeConfig(root=str(root)))


def test_lake_root_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "lake").write_text("")
    with pytest.raises(LakeError, match=r"lake'? is a file, not a directory"):
        check_lake_writable(LakeConfig(root=str(tmp_path / "lake")))


def test_unwritable_lake_root_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root ignores permission bits, so the refusal is simulated where the probe creates its file.
    def refuse(**_: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("binlake.jobs.preflight.tempfile.TemporaryFile", refuse)
    with pytest.raises(LakeError, match=r"is not writable: .*\(Permission denied\); fix"):
        check_lake_writable(LakeConfig(root=str(tmp_path / "lake")))


def test_writable_lake_root_is_left_as_it_was(tmp_path: Path) -> None:
    check_lake_writable(LakeConfig(root=str(tmp_path / "new" / "lake")))
    existing = tmp_path / "existing"
    existing.mkdir()
    check_lake_writable(LakeConfig(root=str(existing)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing"]
    assert list(existing.iterdir()) == []


def test_lake_uri_is_left_to_the_runtime() -> None:
    check_lake_writable(LakeConfig(root="s3://bucket/lake"))


# ---------------------------------------------------------------------------------------------
# Server ids: the source's own and registered replicas' must stay outside the range


class _FakeSource:
    """Answers `SELECT @@server_id` and `SHOW SLAVE HOSTS` like a server would."""

    def __init__(self, own: int, replicas: list[int] | Exception) -> None:
        self.answers: dict[str, list[tuple[Any, ...]] | Exception] = {
            "SELECT @@server_id": [(own,)],
            "SHOW SLAVE HOSTS": replicas
            if isinstance(replicas, Exception)
            else [(r, "replica", 3306, own) for r in replicas],
        }
        self.rows: list[tuple[Any, ...]] = []

    def cursor(self) -> _FakeSource:
        return self

    def __enter__(self) -> _FakeSource:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def execute(self, sql: str, args: tuple[Any, ...]) -> None:
        answer = self.answers[sql]
        if isinstance(answer, Exception):
            raise answer
        self.rows = answer

    def fetchall(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)


def _source(low: int, high: int) -> Any:
    return parse_config({"source": {"database": "shop", "server_id_range": [low, high]}}).source


def test_server_id_range_holding_the_sources_own_id_is_refused() -> None:
    with pytest.raises(SourceError) as raised:
        check_server_ids(_FakeSource(1, []), _source(1, 10))  # type: ignore[arg-type]
    message = str(raised.value)
    assert "[1, 10]" in message and "1 (the source's own @@server_id)" in message
    assert "choose another source.server_id_range" in message


def test_server_id_range_holding_a_replicas_id_is_refused() -> None:
    with pytest.raises(SourceError, match=r"5405 \(a replica registered .*SHOW SLAVE HOSTS\)"):
        check_server_ids(_FakeSource(1, [2, 5405]), _source(5400, 5499))  # type: ignore[arg-type]


def test_server_id_range_clear_of_every_id_passes() -> None:
    check_server_ids(_FakeSource(1, [2, 5500]), _source(5400, 5499))  # type: ignore[arg-type]


def test_replicas_are_skipped_when_the_user_may_not_list_them() -> None:
    denied = pymysql.err.OperationalError(1227, "Access denied; you need REPLICATION MASTER ADMIN")
    check_server_ids(_FakeSource(1, denied), _source(5400, 5499))  # type: ignore[arg-type]
    with pytest.raises(SourceError, match="source's own"):
        check_server_ids(_FakeSource(5400, denied), _source(5400, 5499))  # type: ignore[arg-type]
