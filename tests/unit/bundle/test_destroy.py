"""Data survives `databricks bundle destroy`: prod's schemas (bronze, silver, the changelog, the
ledger's volume) and its secret scope carry `lifecycle.prevent_destroy`, which makes the CLI
refuse a destroy that would drop them, and binlake's own model keeps that setting. Readers are
granted through the bundle variable `silver_readers`, so a deploy, whose grants are
authoritative, never revokes them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.bundle.definition import Bundle
from binlake.bundle.validate import validate
from binlake.errors import BundleError

from .bundles import PRINCIPAL, REPO, load

DATA = ("schemas", "volumes", "secret_scopes")
READERS = [
    {"principal": "analysts", "privileges": ["USE_SCHEMA", "SELECT"]},
    {"principal": "bi-service", "privileges": ["SELECT"]},
]


def _destroyable(target: str) -> list[str]:
    resources = load(REPO, target).resources
    return [
        f"{kind}.{key}"
        for kind in DATA
        for key, resource in resources.get(kind, {}).items()
        if not (resource.lifecycle and resource.lifecycle.prevent_destroy)
    ]


def test_destroy_cannot_drop_a_prod_schema_volume_or_secret_scope() -> None:
    assert _destroyable("prod") == []


def test_a_developer_can_destroy_their_own_dev_copy() -> None:
    assert sorted(_destroyable("dev")) == sorted(
        f"{kind}.{key}" for kind in DATA for key in load(REPO, "dev").resources.get(kind, {})
    )


def test_validate_shows_what_destroy_keeps() -> None:
    lines = validate(load(REPO, "prod"))

    assert (
        "schema prod.silver_shop (silver); USE_SCHEMA, CREATE_TABLE, SELECT, MODIFY for "
        + (f"{PRINCIPAL}; survives destroy")
        in lines
    )


def _with_readers(tmp_path: Path, readers: Any) -> Bundle:
    """The project's prod, with `silver_readers` set in the target (a complex variable: the
    bundle files set it, not --var)."""
    document = yaml.safe_load((REPO / "bundle.yml").read_text())
    document["targets"]["prod"]["variables"]["silver_readers"] = readers
    (tmp_path / "bundle.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    shutil.copytree(REPO / "resources", tmp_path / "resources")
    return load(tmp_path, "prod")


def _grants(schema: Any) -> list[tuple[str, list[str]]]:
    return [(g.principal, [p.value for p in g.privileges]) for g in schema.grants]


def test_silver_readers_join_the_silver_schema_grants_after_the_jobs_identity(
    tmp_path: Path,
) -> None:
    bundle = _with_readers(tmp_path, READERS)

    silver = bundle.resources["schemas"]["silver"]
    assert _grants(silver) == [
        (PRINCIPAL, ["USE_SCHEMA", "CREATE_TABLE", "SELECT", "MODIFY"]),
        ("analysts", ["USE_SCHEMA", "SELECT"]),
        ("bi-service", ["SELECT"]),
    ]
    for key in ("system", "bronze"):
        assert [p for p, _ in _grants(bundle.resources["schemas"][key])] == [PRINCIPAL]


def test_no_readers_by_default() -> None:
    silver = load(REPO, "prod").resources["schemas"]["silver"]

    assert [principal for principal, _ in _grants(silver)] == [PRINCIPAL]


@pytest.mark.parametrize(
    ("readers", "message"),
    [
        ("analysts", "silver_readers must be a list"),
        ([{"principal": "analysts"}], "privileges"),
        ([{"principal": "", "privileges": ["SELECT"]}], "principal"),
    ],
)
def test_malformed_readers_are_one_clear_error(readers: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=f"mutator silver_readers: .*{message}"):
        _with_readers(tmp_path, readers)
