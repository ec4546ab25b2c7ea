"""Load `bundle.yml` and its `resources/*.yml` for one target, with every `${...}` resolved.

The files are in the Databricks Asset Bundle format, so the Databricks CLI deploys the same
bundle. binlake reads the subset it uses — bundle name, includes, variables, targets (workspace
host and root path, variable values), whl artifacts, jobs — and rejects any other key instead of
ignoring it. Each job is parsed into the SDK's `JobSettings`, and the parse must lose nothing:
what `binlake bundle deploy` sends is then exactly what the files say.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from databricks.sdk.service.jobs import JobSettings

from binlake.bundle.errors import BundleError
from binlake.bundle.variables import Interpolator

BUNDLE_FILE = "bundle.yml"
_TOP_LEVEL_KEYS = {"bundle", "include", "artifacts", "variables", "targets", "resources"}
_TARGET_KEYS = {"default", "workspace", "variables"}
_WORKSPACE_KEYS = {"host", "root_path"}
_ARTIFACT_KEYS = {"type", "path", "build"}


@dataclass(frozen=True)
class Workspace:
    """Where a target deploys: the workspace URL and the bundle's folder in it."""

    host: str | None
    root_path: str | None

    @property
    def artifact_path(self) -> str | None:
        """Folder of the uploaded wheels (the Databricks CLI's `${workspace.artifact_path}`)."""
        return f"{self.root_path}/artifacts" if self.root_path else None


@dataclass(frozen=True)
class Artifact:
    """A wheel the bundle builds: `build` runs in `path` and leaves the wheel in `path/dist`."""

    key: str
    path: Path
    build: str


@dataclass(frozen=True)
class Job:
    """One job resource: its key in `resources.jobs` and its settings as the Jobs API takes them.

    Relative `whl` library paths are relative to the bundle root (the files write them relative
    to the resource file); deploy replaces them with the uploaded wheel's workspace path.
    """

    key: str
    settings: JobSettings

    @property
    def parameter_defaults(self) -> dict[str, str]:
        return {p.name: p.default for p in self.settings.parameters or []}


@dataclass(frozen=True)
class Bundle:
    name: str
    target: str
    root: Path
    workspace: Workspace
    artifacts: Mapping[str, Artifact]
    jobs: Mapping[str, Job]

    def job(self, key: str) -> Job:
        if key not in self.jobs:
            raise BundleError(
                f"bundle {self.name!r} has no job {key!r}; its jobs are {', '.join(self.jobs)}"
            )
        return self.jobs[key]


def load_bundle(
    root: str | Path = ".", target: str | None = None, variables: Mapping[str, str] | None = None
) -> Bundle:
    """The bundle in `root` for `target` (default: the target marked `default: true`).

    `variables` override the values of declared variables, like the Databricks CLI's `--var`.
    """
    root = Path(root).absolute()
    document = _read_yaml(root / BUNDLE_FILE)
    _only_keys(document, _TOP_LEVEL_KEYS, BUNDLE_FILE)
    name = _mapping(document.get("bundle"), "bundle").get("name")
    if not isinstance(name, str) or not name:
        raise BundleError(f"{BUNDLE_FILE} must set bundle.name")
    target, target_doc = _target(document, target)
    values = _variable_values(document, target, target_doc, variables or {})
    workspace_doc = _mapping(target_doc.get("workspace"), f"targets.{target}.workspace")
    _only_keys(workspace_doc, _WORKSPACE_KEYS, f"targets.{target}.workspace")

    table: dict[str, Any] = {"bundle.name": name, "bundle.target": target}
    table.update({f"var.{key}": value for key, value in values.items()})
    table.update({f"workspace.{key}": value for key, value in workspace_doc.items()})
    if "root_path" in workspace_doc:
        table["workspace.file_path"] = "${workspace.root_path}/files"
        table["workspace.artifact_path"] = "${workspace.root_path}/artifacts"
    interpolator = Interpolator(table)

    workspace = Workspace(
        host=interpolator.resolve(workspace_doc.get("host"), f"targets.{target}.workspace"),
        root_path=interpolator.resolve(workspace_doc.get("root_path"), f"targets.{target}"),
    )
    artifacts = {
        key: _artifact(root, key, interpolator.resolve(spec, f"artifact {key!r}"))
        for key, spec in _mapping(document.get("artifacts"), "artifacts").items()
    }
    jobs = {
        key: _job(root, source, key, interpolator.resolve(spec, f"job {key!r}"))
        for key, (source, spec) in _job_documents(root, document).items()
    }
    return Bundle(name, target, root, workspace, artifacts, jobs)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise BundleError(
            f"{path} does not exist: run binlake bundle in the bundle's root"
        ) from None
    except yaml.YAMLError as exc:
        raise BundleError(f"{path} is not valid YAML: {exc}") from None
    return _mapping(document, str(path))


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BundleError(f"{where} must be a mapping, found {type(value).__name__}")
    return value


def _only_keys(document: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(document) - allowed)
    if unknown:
        raise BundleError(
            f"{where}: binlake does not support {', '.join(unknown)} "
            f"(it reads {', '.join(sorted(allowed))})"
        )


def _target(document: Mapping[str, Any], requested: str | None) -> tuple[str, dict[str, Any]]:
    targets = _mapping(document.get("targets"), "targets")
    if not targets:
        raise BundleError(f"{BUNDLE_FILE} defines no targets")
    if requested is None:
        defaults = [key for key, spec in targets.items() if _mapping(spec, key).get("default")]
        if len(defaults) != 1:
            raise BundleError(
                f"give --target ({', '.join(targets)}): "
                f"{len(defaults)} targets are marked default: true, expected 1"
            )
        requested = defaults[0]
    if requested not in targets:
        raise BundleError(f"unknown target {requested!r}; the targets are {', '.join(targets)}")
    spec = _mapping(targets[requested], f"targets.{requested}")
    _only_keys(spec, _TARGET_KEYS, f"targets.{requested}")
    return requested, spec


def _variable_values(
    document: Mapping[str, Any],
    target: str,
    target_doc: Mapping[str, Any],
    overrides: Mapping[str, str],
) -> dict[str, Any]:
    """Each declared variable's value: `--var`, else the target's value, else its default."""
    declared = _mapping(document.get("variables"), "variables")
    target_values = _mapping(target_doc.get("variables"), f"targets.{target}.variables")
    for source, names in ((f"targets.{target}.variables", target_values), ("--var", overrides)):
        undeclared = sorted(set(names) - set(declared))
        if undeclared:
            raise BundleError(
                f"{source} sets {', '.join(undeclared)}, not declared under `variables`"
            )
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        spec = _mapping(spec, f"variables.{name}")
        if name in overrides:
            values[name] = overrides[name]
        elif name in target_values:
            values[name] = target_values[name]
        elif "default" in spec:
            values[name] = spec["default"]
        else:
            raise BundleError(
                f"variable {name!r} has no value for target {target!r}: give it a default, "
                f"set it under targets.{target}.variables or pass --var {name}=VALUE"
            )
    return values


def _artifact(root: Path, key: str, spec: Any) -> Artifact:
    spec = _mapping(spec, f"artifacts.{key}")
    _only_keys(spec, _ARTIFACT_KEYS, f"artifacts.{key}")
    if spec.get("type") != "whl" or not isinstance(spec.get("build"), str):
        raise BundleError(f"artifacts.{key} must be `type: whl` with a `build` command")
    return Artifact(key, (root / spec.get("path", ".")).resolve(), spec["build"])


def _job_documents(root: Path, document: Mapping[str, Any]) -> dict[str, tuple[Path, Any]]:
    """Every job spec with the file it comes from: bundle.yml, then the `include` globs."""
    sources = [(root / BUNDLE_FILE, document)]
    for pattern in document.get("include") or []:
        sources += [(path, _read_yaml(path)) for path in sorted(root.glob(pattern))]
    jobs: dict[str, tuple[Path, Any]] = {}
    for path, doc in sources:
        if path.name != BUNDLE_FILE:
            _only_keys(doc, {"resources"}, str(path.relative_to(root)))
        resources = _mapping(doc.get("resources"), f"{path}: resources")
        _only_keys(resources, {"jobs"}, f"{path.relative_to(root)}: resources")
        for key, spec in _mapping(resources.get("jobs"), f"{path}: resources.jobs").items():
            if key in jobs:
                raise BundleError(
                    f"job {key!r} is defined twice: in {jobs[key][0].relative_to(root)} "
                    f"and in {path.relative_to(root)}"
                )
            jobs[key] = (path, spec)
    return jobs


def _job(root: Path, source: Path, key: str, spec: Any) -> Job:
    spec = _mapping(spec, f"job {key!r}")
    for task in spec.get("tasks") or []:
        for library in task.get("libraries") or []:
            if is_local_path(library.get("whl")):
                library["whl"] = _relative_to_root(root, source.parent / library["whl"])
    for parameter in spec.get("parameters") or []:
        if not isinstance(parameter.get("default"), str):
            raise BundleError(
                f"job {key!r} parameter {parameter.get('name')!r} needs a string default "
                f"(the Jobs API takes strings): quote it, found {parameter.get('default')!r}"
            )
    settings = JobSettings.from_dict(spec)
    lost = _differences(spec, settings.as_dict(), key)
    if lost:
        raise BundleError(
            f"job {key!r} in {source.relative_to(root)} has settings the Jobs API does not know "
            f"(misspelt or misplaced?): {', '.join(lost)}"
        )
    return Job(key, settings)


def is_local_path(path: Any) -> bool:
    """A relative path: a file of the bundle, not a workspace, volume or cloud location."""
    return isinstance(path, str) and not path.startswith("/") and ":" not in path


def _relative_to_root(root: Path, path: Path) -> str:
    """`path` relative to `root`, normalised lexically: it may be a glob like `dist/*.whl`."""
    return posixpath.normpath(posixpath.relpath(path.as_posix(), root.as_posix()))


def _differences(expected: Any, actual: Any, path: str) -> list[str]:
    """Paths of `expected` that the round trip through `JobSettings` dropped or changed."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [
            difference
            for key, value in expected.items()
            if not (key not in actual and value in (None, [], {}))
            for difference in _differences(value, actual.get(key), f"{path}.{key}")
        ]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            difference
            for index, (left, right) in enumerate(zip(expected, actual, strict=True))
            for difference in _differences(left, right, f"{path}[{index}]")
        ]
    return [] if expected == actual else [path]
