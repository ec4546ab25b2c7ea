"""Load `bundle.yml` and its includes for one target, as far as binlake's own checks and
`binlake bundle run-local` need them.

The files are in the Databricks Asset Bundle format and the Databricks CLI deploys them; the
CLI's JSON schema checks their keys and types (tests/unit/bundle/test_cli_schema.py). This loader
follows a subset of the CLI's target resolution, the one a job's tasks depend on:

- the target's `resources` merge over the top-level ones (mappings key by key; a job's tasks,
  job clusters, parameters and environments by their keys), and its `variables` give values;
- variables take `--var`, else `BUNDLE_VAR_<name>`, else the target's value, else the default;
- `${var.*}`, `${bundle.name}`, `${bundle.target}` and `${resources.<kind>.<key>.<field>}`
  resolve; `${workspace.current_user.*}` and a variable's `lookup`, which only a workspace
  answers, resolve to visible stand-ins (`STAND_INS`, `lookup(...)`);
- the bundle's resource loaders (`python.resources`) and mutators (`python.mutators`) run, the
  same functions the CLI runs at deploy.

Not followed, because they matter only on a workspace and the CLI applies them at deploy:
`mode` and `presets` (name prefixes, tags, paused triggers), `run_as`, `permissions`,
`workspace`, `artifacts`, `sync`. Each resource is parsed by its typed model of Databricks'
`databricks-bundles`, each job also into the SDK's `JobSettings`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from databricks.bundles.alerts import Alert
from databricks.bundles.core import Bundle as MutatorBundle
from databricks.bundles.core import ResourceMutator, Resources
from databricks.bundles.jobs import Job as BundleJob
from databricks.bundles.schemas import Schema
from databricks.bundles.secret_scopes import SecretScope
from databricks.bundles.volumes import Volume
from databricks.sdk.service.jobs import JobSettings

from binlake.bundle.variables import Interpolator, variable_values
from binlake.errors import BundleError

BUNDLE_FILE = "bundle.yml"
#: What `${workspace.current_user.*}` stands for here: the deploying user, whom only the
#: workspace knows; the Databricks CLI puts the real one at deploy.
STAND_INS = {
    "workspace.current_user.userName": "someone@example.com",
    "workspace.current_user.short_name": "someone",
}
#: Lists of a job that a target merges into element by element, matched on these keys.
_JOB_LISTS_BY_KEY = {
    "tasks": "task_key",
    "job_clusters": "job_cluster_key",
    "parameters": "name",
    "environments": "environment_key",
}
#: The resources besides jobs that binlake reads, with their typed models.
_TYPED_RESOURCES: dict[str, Any] = {
    "schemas": Schema,
    "volumes": Volume,
    "secret_scopes": SecretScope,
    "alerts": Alert,
}
#: Keys of a job resource that the bundle format adds to the Jobs API's settings.
_BUNDLE_ONLY_JOB_KEYS = ("permissions", "lifecycle")


@dataclass(frozen=True)
class Job:
    """One job resource: its key in `resources.jobs`, its settings as the Jobs API takes them
    and its `lifecycle` (`prevent_destroy`), which only the Databricks CLI acts on."""

    key: str
    settings: JobSettings
    lifecycle: Mapping[str, Any] = field(default_factory=dict)

    @property
    def parameter_defaults(self) -> dict[str, str]:
        return {p.name: p.default for p in self.settings.parameters or []}


@dataclass(frozen=True)
class Bundle:
    """One target of the bundle, resolved as the module docstring says."""

    name: str
    target: str
    #: The target's `mode` as written (`development`, `production` or None); the CLI applies it.
    mode: str | None
    jobs: Mapping[str, Job]
    #: Per kind (`schemas`, `volumes`, `secret_scopes`, `alerts`), each resource as its typed
    #: model.
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def job(self, key: str) -> Job:
        if key not in self.jobs:
            raise BundleError(
                f"bundle {self.name!r} has no job {key!r}; its jobs are {', '.join(self.jobs)}"
            )
        return self.jobs[key]


def load_bundle(
    root: str | Path = ".",
    target: str | None = None,
    variables: Mapping[str, str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Bundle:
    """The bundle in `root` for `target` (default: the target marked `default: true`).

    `variables` override variables like the Databricks CLI's `--var`, `environ` (default: this
    process's environment) supplies `BUNDLE_VAR_<name>` values. Asks no workspace.
    """
    root = Path(root).absolute()
    document = _merged_files(root)
    name = _mapping(document.get("bundle"), "bundle").get("name")
    if not isinstance(name, str) or not name:
        raise BundleError(f"{BUNDLE_FILE} must set bundle.name")
    target, target_doc = _target(document, target)
    values = variable_values(
        _mapping(document.get("variables"), "variables"),
        target,
        _mapping(target_doc.get("variables"), f"targets.{target}.variables"),
        variables or {},
        os.environ if environ is None else environ,
    )
    base = Interpolator(
        {"bundle.name": name, "bundle.target": target, **STAND_INS}
        | {f"var.{key}": value for key, value in values.items()}
    )
    python = _mapping(document.get("python"), "python")
    mutators = _mutators(python)
    settings = MutatorBundle(
        target=target, variables={key: base.resolve(f"${{var.{key}}}", key) for key in values}
    )
    resources = _merge(
        _mapping(document.get("resources"), "resources"),
        _mapping(target_doc.get("resources"), f"targets.{target}.resources"),
    )
    resources = _with_loaded(resources, _loaders(python), settings, root)
    references = base.extended(_resource_fields(resources))

    def mutate(resource: Any) -> Any:
        return _mutated(resource, mutators, settings)

    return Bundle(
        name=name,
        target=target,
        mode=target_doc.get("mode"),
        jobs=_jobs(resources, references, mutate),
        resources=_typed_resources(resources, references, mutate),
    )


def _jobs(
    resources: Mapping[str, Any], references: Interpolator, mutate: Callable[[Any], Any]
) -> dict[str, Job]:
    """Every job resource, resolved, parsed by the bundle's typed job model, passed through
    `mutate` (the bundle's job mutators) and parsed into the Jobs API's `JobSettings`."""
    jobs = {}
    for key, spec in _mapping(resources.get("jobs"), "resources.jobs").items():
        where = f"job {key!r}"
        spec = _mapping(references.resolve(_merge_job_lists(_mapping(spec, where)), where), where)
        _check_parameter_defaults(key, spec)
        lifecycle = _mapping(spec.get("lifecycle"), f"{where} lifecycle")
        typed = mutate(_typed(BundleJob, spec, where)).as_dict()
        settings = {k: v for k, v in typed.items() if k not in _BUNDLE_ONLY_JOB_KEYS}
        jobs[key] = Job(key, JobSettings.from_dict(settings), lifecycle)
    return jobs


def _typed(model: Any, spec: Mapping[str, Any], where: str) -> Any:
    """`spec` parsed by a `databricks-bundles` model: an unknown or misplaced key is an error."""
    try:
        return model.from_dict(dict(spec))
    except (ValueError, TypeError, KeyError) as exc:
        raise BundleError(f"{where}: {exc}") from None


def _mutators(python: Mapping[str, Any]) -> list[ResourceMutator[Any]]:
    """The mutators named in `python.mutators` (`module:function`), in order, of the resources
    binlake models (jobs, schemas, volumes, secret scopes, alerts); mutators of other resource
    types are the Databricks CLI's business."""
    mutators = []
    for index, name in enumerate(_sequence(python.get("mutators"), "python.mutators")):
        mutator = _python_function(f"python.mutators[{index}]", name)
        if not isinstance(mutator, ResourceMutator):
            raise BundleError(
                f"python.mutators[{index}] {name!r} is not a mutator (decorate it with "
                "@job_mutator, @schema_mutator, …)"
            )
        if mutator.resource_type in (BundleJob, *_TYPED_RESOURCES.values()):
            mutators.append(mutator)
    return mutators


#: A resource loader of `python.resources`: the bundle's target and variables → resources.
Loader = Callable[[MutatorBundle], Resources]


def _loaders(python: Mapping[str, Any]) -> dict[str, Loader]:
    """The resource loaders named in `python.resources` (`module:function`), in order, by where
    they are named."""
    return {
        f"python.resources[{index}] {name!r}": _python_function(f"python.resources[{index}]", name)
        for index, name in enumerate(_sequence(python.get("resources"), "python.resources"))
    }


def _python_function(where: str, name: Any) -> Any:
    """The object `module:attribute` names."""
    module, _, attribute = str(name).partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise BundleError(f"{where} {name!r} cannot be loaded: {exc}") from None


def _with_loaded(
    resources: Mapping[str, Any], loaders: Mapping[str, Loader], bundle: MutatorBundle, root: Path
) -> dict[str, Any]:
    """`resources` with the jobs and typed resources each loader returns added, as mappings with
    their `${...}` left for the caller to resolve. The loaders run in the bundle root, as the
    Databricks CLI runs them; a resource the files define too is an error."""
    merged = {kind: dict(_mapping(specs, f"resources.{kind}")) for kind, specs in resources.items()}
    for where, loader in loaders.items():
        loaded = _loaded(where, loader, bundle, root)
        for kind in ("jobs", *_TYPED_RESOURCES):
            for key, resource in getattr(loaded, kind).items():
                if key in merged.get(kind, {}):
                    raise BundleError(f"resources.{kind}.{key} is defined twice (again by {where})")
                merged.setdefault(kind, {})[key] = resource.as_dict()
    return merged


def _loaded(where: str, loader: Loader, bundle: MutatorBundle, root: Path) -> Resources:
    """What `loader` returns for `bundle`, called in `root`; its ValueError or error diagnostics
    as one `BundleError` naming `where`."""
    try:
        with contextlib.chdir(root):
            loaded = loader(bundle)
    except ValueError as exc:
        raise BundleError(f"{where}: {exc}") from None
    if not isinstance(loaded, Resources):
        raise BundleError(f"{where} returned {type(loaded).__name__}, not Resources")
    if loaded.diagnostics.has_error():
        raise BundleError(f"{where}: " + "; ".join(d.summary for d in loaded.diagnostics.items))
    return loaded


def _mutated(resource: Any, mutators: list[ResourceMutator[Any]], bundle: MutatorBundle) -> Any:
    """`resource` passed through the mutators of its type, in order, as the CLI applies them."""
    for mutator in mutators:
        if mutator.resource_type is not type(resource):
            continue
        try:
            resource = mutator.function(bundle, resource)
        except ValueError as exc:
            raise BundleError(f"mutator {mutator.function.__name__}: {exc}") from None
    return resource


def _resource_fields(resources: Mapping[str, Any]) -> dict[str, Any]:
    """`${resources.<kind>.<key>.<field>}` for every top-level field of the typed resources."""
    return {
        f"resources.{kind}.{key}.{name}": value
        for kind in _TYPED_RESOURCES
        for key, spec in _mapping(resources.get(kind), f"resources.{kind}").items()
        for name, value in _mapping(spec, f"resources.{kind}.{key}").items()
    }


def _typed_resources(
    resources: Mapping[str, Any], references: Interpolator, mutate: Callable[[Any], Any]
) -> dict[str, dict[str, Any]]:
    """Each schema, volume, secret scope and alert, resolved, parsed by its typed model and
    passed through `mutate` (the bundle's mutators of its type)."""
    typed: dict[str, dict[str, Any]] = {}
    for kind, model in _TYPED_RESOURCES.items():
        for key, spec in _mapping(resources.get(kind), f"resources.{kind}").items():
            where = f"resources.{kind}.{key}"
            resolved = _mapping(references.resolve(spec, where), where)
            typed.setdefault(kind, {})[key] = mutate(_typed(model, resolved, where))
    return typed


def _merged_files(root: Path) -> dict[str, Any]:
    """bundle.yml with every file of its `include` globs merged in, as one document; a resource
    defined in two files is an error."""
    document = _read_file(root / BUNDLE_FILE)
    include = _sequence(document.get("include"), "include")
    paths = [path for pattern in include for path in sorted(root.glob(str(pattern)))]
    for path in paths:
        included = _read_file(path)
        where = str(path.relative_to(root))
        for kind, specs in _mapping(included.get("resources"), f"{where}: resources").items():
            for key in _mapping(specs, f"{where}: resources.{kind}"):
                if key in _mapping(document.get("resources"), "resources").get(kind, {}):
                    raise BundleError(f"resources.{kind}.{key} is defined twice (again in {where})")
        document = _merge(document, included)
    return document


def _read_file(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise BundleError(
            f"{path} does not exist: run binlake bundle in the bundle's root"
        ) from None
    except yaml.YAMLError as exc:
        raise BundleError(f"{path} is not valid YAML: {exc}") from None
    return _mapping(document, str(path))


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
    return requested, _mapping(targets[requested], f"targets.{requested}")


def _merge(base: Any, override: Any) -> Any:
    """Mappings merge key by key, sequences concatenate, anything else is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base.get(key), value)
        return merged
    if isinstance(base, list) and isinstance(override, list):
        return base + override
    return base if override is None else override


def _merge_job_lists(job: dict[str, Any]) -> dict[str, Any]:
    """A job's tasks, job clusters, parameters and environments with the entries that share a
    key (a target's override of a top-level entry) merged into the first."""
    merged = dict(job)
    for name, key in _JOB_LISTS_BY_KEY.items():
        if not isinstance(job.get(name), list):
            continue
        by_key: dict[Any, Any] = {}
        for index, entry in enumerate(job[name]):
            slot = entry.get(key, index) if isinstance(entry, dict) else index
            by_key[slot] = _merge(by_key.get(slot), entry)
        merged[name] = list(by_key.values())
    return merged


def _check_parameter_defaults(key: str, spec: Mapping[str, Any]) -> None:
    for parameter in _sequence(spec.get("parameters"), f"job {key!r} parameters"):
        if not isinstance(parameter.get("default"), str):
            raise BundleError(
                f"job {key!r} parameter {parameter.get('name')!r} needs a string default "
                f"(the Jobs API takes strings): quote it, found {parameter.get('default')!r}"
            )


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BundleError(f"{where} must be a mapping, found {type(value).__name__}")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BundleError(f"{where} must be a list, found {type(value).__name__}")
    return value
