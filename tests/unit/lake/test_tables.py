"""Issue 12 without Spark: where lake tables are named (paths, catalog names), how lake roots
are joined and probed, and `ArrowFiles`, the file access of the stream's planning process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from binlake.config.settings import LakeConfig
from binlake.errors import ConfigError, LakeError
from binlake.jobs.preflight import check_lake_writable
from binlake.lake.files import ArrowFiles, _arrow, join, local_path
from binlake.lake.tables import CatalogTable, PathTable, lake_table

ODD = "db `%s 'ü\"#?"  # a database name as test_identifiers uses them, and URI delimiters


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ("s3://bucket/lake/", "s3://bucket/lake/silver/shop/t"),
        ("abfss://c@a.dfs.core.windows.net/lake", "abfss://c@a.dfs.core.windows.net/lake/silver/shop/t"),
        ("dbfs:/lake", "dbfs:/lake/silver/shop/t"),
        ("file:///tmp/lake", "file:///tmp/lake/silver/shop/t"),
        ("/Volumes/main/binlake/lake", "/Volumes/main/binlake/lake/silver/shop/t"),
    ],
)  # fmt: skip
def test_lake_paths_join_uris_with_slashes(root: str, expected: str) -> None:
    assert LakeConfig(root=root).path("silver", "shop", "t") == expected


def test_a_relative_local_root_becomes_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    assert LakeConfig(root="lake").path("_system") == str(tmp_path / "lake" / "_system")


def test_without_a_catalog_tables_are_paths_under_the_root() -> None:
    lake = LakeConfig(root="s3://b/lake")
    assert lake_table(lake, "bronze", "shop", "t__changelog") == PathTable(
        "s3://b/lake/bronze/shop/t__changelog"
    )


def test_with_a_catalog_tables_are_quoted_catalog_names() -> None:
    lake = LakeConfig(catalog="main", bronze_schema="raw")
    bronze = lake_table(lake, "bronze", "shop", "orders")
    assert bronze == CatalogTable("main", "raw_shop", "orders")
    assert bronze.sql == "`main`.`raw_shop`.`orders`"
    assert lake_table(lake, "silver", "shop", "o'rd%s").sql == "`main`.`silver_shop`.`o'rd%s`"


@pytest.mark.parametrize("key", ["catalog", "bronze_schema", "silver_schema"])
@pytest.mark.parametrize("bad", ["", "a.b", "a b", "a/b", "a`b", "x" * 256])
def test_catalog_names_a_catalog_cannot_hold_are_refused(key: str, bad: str) -> None:
    with pytest.raises(ValueError, match=f"{key} .* cannot name a catalog object: it "):
        LakeConfig(**{"catalog": "main", key: bad})


def test_database_and_table_names_a_catalog_cannot_hold_are_refused() -> None:
    lake = LakeConfig(catalog="main")
    with pytest.raises(ConfigError, match=r"schema name 'bronze_my shop'.* holds ' '"):
        lake_table(lake, "bronze", "my shop", "t")
    with pytest.raises(ConfigError, match=r"shop\.a\.b cannot be a catalog table: .* holds '\.'"):
        lake_table(lake, "silver", "shop", "a.b")


def test_schema_prefixes_are_not_checked_without_a_catalog() -> None:
    LakeConfig(bronze_schema="a b")


def test_local_paths_of_file_uris() -> None:
    assert local_path("file:///tmp/a b") == "/tmp/a b"
    assert local_path("file://localhost/tmp/x") == "/tmp/x"
    assert local_path("file:/tmp/x") == "/tmp/x"
    assert local_path("/Volumes/c/s/v") == "/Volumes/c/s/v"
    assert local_path("s3://b/x") is None
    assert local_path("dbfs:/x") is None


def test_dbfs_uris_are_read_through_the_dbfs_mount() -> None:
    assert _arrow("dbfs:/lake/_system/x.json")[1] == "/dbfs/lake/_system/x.json"
    assert _arrow("dbfs:///lake/x")[1] == "/dbfs/lake/x"


def test_file_uri_root_is_probed_like_a_local_path(tmp_path: Path) -> None:
    (tmp_path / "lake").write_text("")
    with pytest.raises(LakeError, match=r"is a file, not a directory"):
        check_lake_writable(LakeConfig(root=(tmp_path / "lake").as_uri()))
    check_lake_writable(LakeConfig(root=(tmp_path / "new").as_uri()))
    assert [p.name for p in tmp_path.iterdir()] == ["lake"]


@pytest.mark.parametrize("as_uri", [False, True])
def test_arrow_files_read_what_they_wrote(tmp_path: Path, as_uri: bool) -> None:
    """Names with `%`, `#`, `?` and spaces stay file names, never URI syntax."""
    root = tmp_path.as_uri() if as_uri else str(tmp_path)
    files = ArrowFiles()
    path = join(root, ODD, "t %20 #x.json")
    assert files.read_text(path) is None and files.modified(path) is None
    assert files.names(join(root, ODD)) == []
    files.write_text(path, "one")
    files.write_text(path, "two")
    assert files.read_text(path) == "two"
    assert (tmp_path / ODD / "t %20 #x.json").read_text() == "two"
    assert files.names(join(root, ODD)) == ["t %20 #x.json"]  # no temporary file left
    modified = files.modified(path)
    assert modified is not None and abs(modified - time.time()) < 60
    files.delete(path)
    files.delete(path)
    assert not files.exists(path)
