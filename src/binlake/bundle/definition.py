"""Load `bundle.yml` and its includes for one target, as the Databricks CLI would deploy it.

The files are in the Databricks Asset Bundle format, so the Databricks CLI deploys the same
bundle. binlake accepts every key the CLI documents (`keys`), merges the target over the
top-level settings the way the CLI does (mappings key by key, a job's tasks, job clusters and
parameters by their keys, `run_as` and `mode` replaced), adds the resources of the bundle's
resource loaders (`python.resources`: `binlake.bundle.alerts`), resolves every `${...}`, applies
the target's `mode`, `presets`, `run_as` and `permissions` (`modes`), runs the bundle's mutators
(`python.mutators`, as the CLI does: `binlake.bundle.compute`), and parses each resource with the
typed models of Databricks' `databricks-bundles` package (jobs, schemas, volumes, secret scopes,
alerts), each job also into the SDK's `JobSettings`, which must lose nothing. A key neither knows
is a typo, which `binlake bundle validate` reports before `databricks bundle deploy` sends it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
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
from databricks.sdk import WorkspaceClient
from databricks.sdk.service.jobs import JobAccessControlRequest, JobSettings

from binlake.bundle import keys, modes
from binlake.bundle.remote import Remote
from binlake.bundle.variables import Deferred, Interpolator, variable_values
from binlake.errors import BundleError
from binlake.runtime.workspace import Connection

BUNDLE_FILE = "bundle.yml"
#: Workspace folders under the root path, with the defaults the Databricks CLI gives them.
_WORKSPACE_PATHS = {
    "file_path": "files",
    "artifact_path": "artifacts",
    "resource_path": "resources",
    "state_path": "state",
}
#: Lists of a job that a target merges into element by element, matched on these keys.
_JOB_LISTS_BY_KEY = {
    "tasks": "task_key",
    "job_clusters": "job_cluster_key",
    "parameters": "name",
    "environments": "environment_key",
}
#: The resources besides jobs that binlake reads, with their typed models; the Databricks CLI
#: deploys them (the others it knows, too).
_TYPED_RESOURCES: dict[str, Any] = {
    "schemas": Schema,
    "volumes": Volume,
    "secret_scopes": SecretScope,
    "alerts": Alert,
}
#: Top-level mappings a target's same-named mapping merges into.
_TARGET_MERGED = ("bundle", "workspace", "artifacts", "resources", "sync", "permissions", "presets")


@dataclass(frozen=True)
class Job:
    """One job resource: its key in `resources.jobs`, its settings as the Jobs API takes them,
    its access control list (the bundle's and the job's `permissions`) and its `lifecycle`
    (`prevent_destroy`), which only the Databricks CLI acts on.

    Relative `whl` library paths are relative to the bundle root (the files write them relative
    to the resource file); a deploy replaces them with the uploaded wheel's workspace path.
    """

    key: str
    settings: JobSettings
    access_control: tuple[JobAccessControlRequest, ...] = ()
    lifecycle: Mapping[str, Any] = field(default_factory=dict)

    @property
    def parameter_defaults(self) -> dict[str, str]:
        return {p.name: p.default for p in self.settings.parameters or []}


@dataclass(frozen=True)
class Bundle:
    """One target of the bundle, resolved. The workspace paths resolve on first use: only a
    deploy (or a development target, whose paths must name the user) needs them."""

    name: str
    target: str
    mode: str | None
    root: Path
    connection: Connection
    jobs: Mapping[str, Job]
    references: Interpolator = field(repr=False)
    #: Per kind (`schemas`, `volumes`, `secret_scopes`, `alerts`), each resource as its typed
    #: model.
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def job(self, key: str) -> Job:
        if key not in self.jobs:
            raise BundleError(
                f"bundle {self.name!r} has no job {key!r}; its jobs are {', '.join(self.jobs)}"
            )
        return self.jobs[key]

    @cached_property
    def root_path(self) -> str:
        """The bundle's folder in the workspace (`${workspace.root_path}`)."""
        return str(self.references.resolve("${workspace.root_path}", "workspace.root_path"))

    @cached_property
    def artifact_path(self) -> str:
        """Folder of the uploaded wheels (`${workspace.artifact_path}`)."""
        return str(self.references.resolve("${workspace.artifact_path}", "workspace"))


def load_bundle(
    root: str | Path = ".",
    target: str | None = None,
    variables: Mapping[str, str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    connect: Callable[[Connection], WorkspaceClient] | None = None,
) -> Bundle:
    """The bundle in `root` for `target` (default: the target marked `default: true`).

    `variables` override variables like the Databricks CLI's `--var`, `environ` (default: this
    process's environment) supplies `BUNDLE_VAR_<name>` values. `connect` makes the client that
    answers what only the workspace knows (the current user, variable lookups), asked only if
    the target needs it; without it such a target is an error that names the setting.
    """
    root = Path(root).absolute()
    document = _merged_files(root)
    name = _mapping(document.get("bundle"), "bundle").get("name")
    if not isinstance(name, str) or not name:
        raise BundleError(f"{BUNDLE_FILE} must set bundle.name")
    target, target_doc = _target(document, target)
    config = _with_target(document, target, target_doc)
    mode = target_doc.get("mode")
    if mode is not None and mode not in modes.MODES:
        raise BundleError(f"targets.{target}.mode must be development or production, not {mode!r}")
    workspace = _mapping(config.get("workspace"), "workspace")
    keys.check_keys(workspace, keys.WORKSPACE, "workspace")
    connection = _connection(workspace)
    remote = Remote(connection, connect)
    values = variable_values(
        _mapping(document.get("variables"), "variables"),
        target,
        _mapping(target_doc.get("variables"), f"targets.{target}.variables"),
        variables or {},
        os.environ if environ is None else environ,
        remote.lookup,
    )
    presets = modes.target_presets(
        target, mode, _mapping(config.get("presets"), "presets"), remote.current_user
    )
    resources = _mapping(config.get("resources"), "resources")
    keys.check_keys(resources, keys.RESOURCES, "resources")
    schema_prefix = _schema_prefix(config, presets)
    base = Interpolator(_reference_table(name, target, workspace, values, remote))
    mutators = _mutators(config)
    loaders = _loaders(config)
    settings = MutatorBundle(
        target=target,
        variables={key: base.resolve(f"${{var.{key}}}", key) for key in values}
        if mutators or loaders
        else {},
    )
    resources = _with_loaded(resources, loaders, settings, root)
    references = base.extended(_resource_fields(resources, schema_prefix))
    if mode == "development":
        _check_development_paths(target, references, remote)
    mutate = functools.partial(_mutated, mutators=mutators, bundle=settings)
    jobs = _jobs(config, resources, references, presets, mutate)
    if mode == "production":
        explicit_root = "root_path" in _mapping(target_doc.get("workspace"), "workspace")
        modes.check_production(target, explicit_root, [j.settings.as_dict() for j in jobs.values()])
    _check_artifacts(references.resolve(config.get("artifacts"), "artifacts"))
    return Bundle(
        name=name,
        target=target,
        mode=mode,
        root=root,
        connection=connection,
        jobs=jobs,
        references=references,
        resources=_typed_resources(resources, references, schema_prefix, mutate),
    )


def _check_development_paths(target: str, references: Interpolator, remote: Remote) -> None:
    user = remote.current_user(f"mode: development of target {target!r}")
    paths = {
        key: str(references.resolve(f"${{workspace.{key}}}", "workspace"))
        for key in ("root_path", *_WORKSPACE_PATHS)
    }
    modes.check_development_paths(target, paths, user)


def _jobs(
    config: Mapping[str, Any],
    resources: Mapping[str, Any],
    references: Interpolator,
    presets: modes.Presets,
    mutate: Callable[[BundleJob], BundleJob],
) -> dict[str, Job]:
    """Every job resource, resolved, parsed by the bundle's typed job model and passed through
    `mutate` (the bundle's job mutators), with the bundle's `run_as` and `permissions` applied."""
    run_as = modes.run_as(references.resolve(config.get("run_as"), "run_as"), "run_as")
    permissions = _sequence(
        references.resolve(config.get("permissions"), "permissions"), "permissions"
    )
    jobs = {}
    for key, spec in _mapping(resources.get("jobs"), "resources.jobs").items():
        spec = _mapping(references.resolve(spec, f"job {key!r}"), f"job {key!r}")
        _check_parameter_defaults(key, spec)
        typed = mutate(_typed(BundleJob, spec, f"job {key!r}"))
        mutated = {**typed.as_dict(), **{k: v for k, v in spec.items() if k in _KEPT_AS_WRITTEN}}
        jobs[key] = _job(key, mutated, presets, run_as, permissions)
    return jobs


#: Job keys passed on as the files write them: the typed model would spell out their defaults.
_KEPT_AS_WRITTEN = ("permissions", "lifecycle")


def _typed(model: Any, spec: Mapping[str, Any], where: str) -> Any:
    """`spec` parsed by a `databricks-bundles` model: an unknown or misplaced key is an error."""
    try:
        return model.from_dict(dict(spec))
    except (ValueError, TypeError, KeyError) as exc:
        raise BundleError(f"{where}: {exc}") from None


def _mutators(config: Mapping[str, Any]) -> list[ResourceMutator[Any]]:
    """The mutators named in `python.mutators` (`module:function`), in order, of the resources
    binlake models (jobs, schemas, volumes, secret scopes, alerts); mutators of other resource
    types are the Databricks CLI's business."""
    mutators = []
    for index, name in enumerate(_python_names(config, "mutators")):
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


def _loaders(config: Mapping[str, Any]) -> dict[str, Loader]:
    """The resource loaders named in `python.resources` (`module:function`), in order, by where
    they are named."""
    return {
        f"python.resources[{index}] {name!r}": _python_function(f"python.resources[{index}]", name)
        for index, name in enumerate(_python_names(config, "resources"))
    }


def _python_names(config: Mapping[str, Any], key: str) -> list[Any]:
    """The `module:function` names listed under `python.<key>`."""
    python = _mapping(config.get("python"), "python")
    return _sequence(python.get(key), f"python.{key}")


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
    """`resources` with those each loader returns added, as mappings with their `${...}` left
    for the caller to resolve. The loaders run in the bundle root, as the Databricks CLI runs
    them; a resource the files define too is an error."""
    merged = {kind: dict(_mapping(specs, f"resources.{kind}")) for kind, specs in resources.items()}
    for where, loader in loaders.items():
        loaded = _loaded(where, loader, bundle, root)
        for kind in sorted(keys.RESOURCES):
            for key, resource in getattr(loaded, kind, {}).items():
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


def _schema_prefix(config: Mapping[str, Any], presets: modes.Presets) -> str:
    """What the Databricks CLI puts before each schema's name: the name prefix as a catalog name
    (`[dev jane] ` → `dev_jane_`), unless `experimental.skip_name_prefix_for_schema`."""
    experimental = _mapping(config.get("experimental"), "experimental")
    if experimental.get("skip_name_prefix_for_schema") or not presets.name_prefix:
        return ""
    prefix = presets.name_prefix.replace("[", "").strip(" ")
    suffix = "_" if prefix.endswith("]") else ""
    return "".join(c if c.isalnum() else "_" for c in prefix.removesuffix("]").lower()) + suffix


def _resource_fields(resources: Mapping[str, Any], schema_prefix: str) -> dict[str, Any]:
    """`${resources.<kind>.<key>.<field>}` for every top-level field of the typed resources, as
    deployed (a schema's name with its prefix)."""
    table: dict[str, Any] = {}
    for kind in _TYPED_RESOURCES:
        for key, spec in _mapping(resources.get(kind), f"resources.{kind}").items():
            for name, value in _mapping(spec, f"resources.{kind}.{key}").items():
                if kind == "schemas" and name == "name":
                    value = schema_prefix + str(value)
                table[f"resources.{kind}.{key}.{name}"] = value
    return table


def _typed_resources(
    resources: Mapping[str, Any],
    references: Interpolator,
    schema_prefix: str,
    mutate: Callable[[Any], Any],
) -> dict[str, dict[str, Any]]:
    """Each schema, volume and secret scope, resolved, parsed by its typed model and passed
    through `mutate` (the bundle's mutators of its type)."""
    typed: dict[str, dict[str, Any]] = {}
    for kind, model in _TYPED_RESOURCES.items():
        for key, spec in _mapping(resources.get(kind), f"resources.{kind}").items():
            where = f"resources.{kind}.{key}"
            resolved = _mapping(references.resolve(spec, where), where)
            if kind == "schemas":
                resolved = {**resolved, "name": schema_prefix + str(resolved.get("name", ""))}
            typed.setdefault(kind, {})[key] = mutate(_typed(model, resolved, where))
    return typed


def _merged_files(root: Path) -> dict[str, Any]:
    """bundle.yml with every file of its `include` globs merged in, as one document.

    A resource defined in two files is an error; relative `whl` paths are made relative to the
    bundle root first, since each file writes them relative to itself.
    """
    document = _read_file(root, root / BUNDLE_FILE)
    include = _sequence(document.get("include"), "include")
    paths = [path for pattern in include for path in sorted(root.glob(str(pattern)))]
    for path in paths:
        included = _read_file(root, path)
        if "include" in included:
            raise BundleError(f"{_relative(root, path)}: only {BUNDLE_FILE} can `include` files")
        _check_no_duplicate_resources(document, included, _relative(root, path))
        document = _merge(document, included)
    return document


def _read_file(root: Path, path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise BundleError(
            f"{path} does not exist: run binlake bundle in the bundle's root"
        ) from None
    except yaml.YAMLError as exc:
        raise BundleError(f"{path} is not valid YAML: {exc}") from None
    document = _mapping(document, str(path))
    where = _relative(root, path)
    keys.check_keys(document, keys.TOP_LEVEL, where)
    for key, spec in _mapping(document.get("targets"), f"{where}: targets").items():
        keys.check_keys(_mapping(spec, f"{where}: targets.{key}"), keys.TARGET, f"targets.{key}")
    for resources in _all_resources(document, where):
        for job in _mapping(resources.get("jobs"), f"{where}: resources.jobs").values():
            _rebase_wheels(root, path.parent, _mapping(job, f"{where}: job"))
    return document


def _all_resources(document: Mapping[str, Any], where: str) -> Iterable[dict[str, Any]]:
    """The file's top-level `resources` and those of each of its targets."""
    yield _mapping(document.get("resources"), f"{where}: resources")
    for name, target in _mapping(document.get("targets"), f"{where}: targets").items():
        yield _mapping(_mapping(target, name).get("resources"), f"{where}: targets.{name}")


def _rebase_wheels(root: Path, folder: Path, job: Mapping[str, Any]) -> None:
    """Local wheel paths of the job's task libraries and environment dependencies, made
    relative to the bundle root."""
    for task in _sequence(job.get("tasks"), "tasks"):
        for library in _sequence(_mapping(task, "task").get("libraries"), "libraries"):
            if isinstance(library, dict) and is_local_path(library.get("whl")):
                library["whl"] = _relative_posix(root, folder / library["whl"])
    for environment in _sequence(job.get("environments"), "environments"):
        spec = _mapping(_mapping(environment, "environment").get("spec"), "environment spec")
        dependencies = _sequence(spec.get("dependencies"), "dependencies")
        spec["dependencies"] = [
            _relative_posix(root, folder / path) if _is_local_wheel(path) else path
            for path in dependencies
        ]


def _is_local_wheel(path: Any) -> bool:
    """A dependency that names a wheel of the bundle (not a PyPI requirement like `x>=1`)."""
    return is_local_path(path) and str(path).endswith(".whl")


def _check_no_duplicate_resources(
    document: Mapping[str, Any], included: Mapping[str, Any], where: str
) -> None:
    mine = _mapping(document.get("resources"), "resources")
    for kind, specs in _mapping(included.get("resources"), f"{where}: resources").items():
        for key in _mapping(specs, f"{where}: resources.{kind}"):
            if key in _mapping(mine.get(kind), kind):
                raise BundleError(f"resources.{kind}.{key} is defined twice (again in {where})")


def _target(document: Mapping[str, Any], requested: str | None) -> tuple[str, dict[str, Any]]:
    targets = _mapping(document.get("targets") or document.get("environments"), "targets")
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


def _with_target(
    document: Mapping[str, Any], target: str, target_doc: Mapping[str, Any]
) -> dict[str, Any]:
    """The top-level settings with the target's merged over them, as the Databricks CLI does."""
    config = dict(document)
    for key in _TARGET_MERGED:
        if key in target_doc:
            config[key] = _merge(config.get(key), target_doc[key])
    if "run_as" in target_doc:
        config["run_as"] = target_doc["run_as"]
    jobs = _mapping(_mapping(config.get("resources"), "resources").get("jobs"), "resources.jobs")
    for key, spec in jobs.items():
        jobs[key] = _merge_job_lists(_mapping(spec, f"job {key!r}"))
    keys.check_keys(_mapping(config.get("bundle"), "bundle"), keys.BUNDLE, "bundle")
    return config


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


def _connection(workspace: Mapping[str, Any]) -> Connection:
    for key in ("host", "profile"):
        if "${" in str(workspace.get(key, "")):
            raise BundleError(
                f"workspace.{key} cannot use ${{...}}: the client is configured before any "
                "reference is resolved"
            )
    return Connection.of(workspace)


def _reference_table(
    name: str,
    target: str,
    workspace: Mapping[str, Any],
    values: Mapping[str, Any],
    remote: Remote,
) -> dict[str, Any]:
    """What `${...}` can name: the bundle, the variables, the workspace and its current user."""

    def user(attribute: str) -> Deferred:
        return Deferred(lambda reason: getattr(remote.current_user(reason), attribute))

    table: dict[str, Any] = {
        "bundle.name": name,
        "bundle.target": target,
        "bundle.environment": target,
        "workspace.current_user.userName": user("user_name"),
        "workspace.current_user.short_name": user("short_name"),
    }
    table.update({f"var.{key}": value for key, value in values.items()})
    paths = {"root_path": "~/.bundle/${bundle.name}/${bundle.target}"}
    paths.update(
        {key: f"${{workspace.root_path}}/{folder}" for key, folder in _WORKSPACE_PATHS.items()}
    )
    for key, value in {**paths, **workspace}.items():
        table[f"workspace.{key}"] = _home(value)
    return table


def _home(value: Any) -> Any:
    """`~/…` is the current user's home folder in the workspace, as for the Databricks CLI."""
    if isinstance(value, str) and (value == "~" or value.startswith("~/")):
        return "/Workspace/Users/${workspace.current_user.userName}" + value[1:]
    return value


def _job(
    key: str,
    spec: Any,
    presets: modes.Presets,
    bundle_run_as: dict[str, str] | None,
    bundle_permissions: list[Any],
) -> Job:
    """The job as deployed: presets applied, the bundle's `run_as` where the job sets none, the
    bundle-only keys (`permissions`, `lifecycle`) kept apart, the rest parsed into
    `JobSettings`."""
    spec = dict(_mapping(spec, f"job {key!r}"))
    job_permissions = _sequence(spec.pop("permissions", None), f"job {key!r} permissions")
    lifecycle = _mapping(spec.pop("lifecycle", None), f"job {key!r} lifecycle")
    spec = presets.apply(spec)
    run_as = modes.run_as(spec.get("run_as"), f"job {key!r} run_as") or bundle_run_as
    if run_as:
        spec["run_as"] = run_as
    spec = _pruned(spec)
    settings = JobSettings.from_dict(spec)
    lost = _differences(spec, settings.as_dict(), key)
    if lost:
        raise BundleError(
            f"job {key!r} has settings the Jobs API does not know (misspelt or misplaced?): "
            + ", ".join(lost)
        )
    acl = modes.access_control(bundle_permissions, job_permissions, key)
    return Job(key, settings, tuple(acl), lifecycle)


def _check_parameter_defaults(key: str, spec: Mapping[str, Any]) -> None:
    for parameter in _sequence(spec.get("parameters"), f"job {key!r} parameters"):
        if not isinstance(parameter.get("default"), str):
            raise BundleError(
                f"job {key!r} parameter {parameter.get('name')!r} needs a string default "
                f"(the Jobs API takes strings): quote it, found {parameter.get('default')!r}"
            )


def _check_artifacts(document: Any) -> None:
    """Each artifact's keys (the Databricks CLI builds them at deploy)."""
    for key, spec in _mapping(document, "artifacts").items():
        keys.check_keys(_mapping(spec, f"artifacts.{key}"), keys.ARTIFACT, f"artifacts.{key}")


def is_local_path(path: Any) -> bool:
    """A relative path: a file of the bundle, not a workspace, volume or cloud location."""
    return isinstance(path, str) and not path.startswith("/") and ":" not in path


def _relative(root: Path, path: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _relative_posix(root: Path, path: Path) -> str:
    """`path` relative to `root`, normalised lexically: it may be a glob like `dist/*.whl`."""
    return posixpath.normpath(posixpath.relpath(path.as_posix(), root.as_posix()))


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


def _pruned(value: Any) -> Any:
    """`value` without empty lists, mappings and nulls, which the Jobs API's model leaves out
    (an empty `on_failure` list means no notification)."""
    if isinstance(value, dict):
        items = {key: _pruned(item) for key, item in value.items()}
        return {key: item for key, item in items.items() if item not in (None, [], {})}
    if isinstance(value, list):
        return [_pruned(item) for item in value]
    return value


def _differences(expected: Any, actual: Any, path: str) -> list[str]:
    """Paths of `expected` that the round trip through `JobSettings` dropped or changed."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [
            difference
            for key, value in expected.items()
            for difference in _differences(value, actual.get(key), f"{path}.{key}")
        ]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            difference
            for index, (left, right) in enumerate(zip(expected, actual, strict=True))
            for difference in _differences(left, right, f"{path}[{index}]")
        ]
    return [] if expected == actual else [path]
