"""`${...}` references of a bundle, resolved the way the Databricks CLI resolves them at deploy,
and the values of the bundle's variables.

References name entries of one table (`bundle.name`, `bundle.target`, `workspace.root_path`,
`workspace.current_user.userName`, `var.<name>`, …) whose values may reference each other. An
entry that needs the workspace (the current user, a variable `lookup`) is `Deferred`: asked for
only when a reference is resolved. `{{...}}` is left alone: those are the Jobs service's dynamic
value references (`{{job.parameters.x}}`, `{{secrets/scope/key}}`), resolved when a job runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from binlake.bundle.keys import LOOKUP, VARIABLE, check_keys, did_you_mean
from binlake.errors import BundleError

#: `BUNDLE_VAR_<name>` sets variable `<name>`, as with the Databricks CLI.
ENV_PREFIX = "BUNDLE_VAR_"


@dataclass(frozen=True)
class Deferred:
    """A table entry computed on first use, e.g. one the workspace must answer; `compute` gets
    the reference that needed it, for its error message."""

    compute: Callable[[str], Any]


_REFERENCE = re.compile(r"\$\{([^{}\s]+)\}")


class Interpolator:
    """Resolves references against `table`; each entry is resolved once, cycles are errors."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self._table = dict(table)
        self._resolved: dict[str, Any] = {}

    def extended(self, table: Mapping[str, Any]) -> Interpolator:
        """An interpolator of this table with `table`'s entries added, keeping what this one has
        resolved already (a lookup is asked once)."""
        extended = Interpolator({**self._table, **table})
        extended._resolved = dict(self._resolved)
        return extended

    def resolve(self, value: Any, where: str) -> Any:
        """`value` with every reference replaced, recursively through mappings and lists.

        A string that is exactly one reference takes the referenced value with its type
        (`num_workers: ${var.num_workers}` stays an int); a reference inside a longer string is
        formatted into it.
        """
        return self._resolve(value, where, ())

    def _resolve(self, value: Any, where: str, chain: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            return {key: self._resolve(item, where, chain) for key, item in value.items()}
        if isinstance(value, list):
            return [self._resolve(item, where, chain) for item in value]
        if not isinstance(value, str):
            return value
        whole = _REFERENCE.fullmatch(value)
        if whole:
            return self._lookup(whole.group(1), where, chain)
        return _REFERENCE.sub(lambda m: _text(self._lookup(m.group(1), where, chain)), value)

    def _lookup(self, name: str, where: str, chain: tuple[str, ...]) -> Any:
        if name in self._resolved:
            return self._resolved[name]
        if name in chain:
            cycle = " → ".join(f"${{{n}}}" for n in (*chain[chain.index(name) :], name))
            raise BundleError(f"references form a cycle: {cycle}")
        if name not in self._table:
            raise BundleError(
                f"{where} references ${{{name}}}, which {_unknown(name, self._table)}"
            )
        entry = self._table[name]
        if isinstance(entry, Deferred):
            entry = entry.compute(f"${{{name}}} in {where}")
        value = self._resolve(entry, f"${{{name}}}", (*chain, name))
        self._resolved[name] = value
        return value


def _text(value: Any) -> str:
    """How a value reads inside a longer string: YAML's spelling for booleans and null."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _unknown(name: str, table: Mapping[str, Any]) -> str:
    if name.startswith("var."):
        return "is not declared under `variables` in bundle.yml"
    section = name.split(".")[0] + "."
    known = sorted(n for n in table if n.startswith(section))
    if known:
        return f"binlake cannot resolve{did_you_mean(name, known)}"
    roots = sorted({n.split(".")[0] + ".*" for n in table})
    return f"binlake cannot resolve (it resolves {', '.join(roots)})"


#: Looks up the id of a workspace object: (kind, name, variable) → id.
Lookup = Callable[[str, str, str], str]


def variable_values(
    declared: Mapping[str, Any],
    target: str,
    target_values: Mapping[str, Any],
    overrides: Mapping[str, str],
    environ: Mapping[str, str],
    lookup: Lookup,
) -> dict[str, Any]:
    """Each declared variable's value, by the Databricks CLI's precedence: `--var`, then the
    environment's `BUNDLE_VAR_<name>`, then the target's value or lookup, then the variable's
    default or lookup. A lookup is `Deferred`: only a variable in use asks the workspace."""
    where = f"targets.{target}.variables"
    _only_declared(declared, where, target_values)
    _only_declared(declared, "--var", overrides)
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        spec = _variable_spec(name, spec)
        given = overrides.get(name, environ.get(ENV_PREFIX + name))
        if given is not None and spec.get("type") == "complex":
            raise BundleError(
                f"variable {name!r} is complex: set it in the bundle files, not with --var or "
                f"{ENV_PREFIX}{name}"
            )
        if given is not None:
            values[name] = given
        elif name in target_values:
            values[name] = _value(name, _target_spec(target_values[name]), where, lookup)
        elif "default" in spec or "lookup" in spec:
            values[name] = _value(name, spec, f"variables.{name}", lookup)
        else:
            raise BundleError(
                f"variable {name!r} has no value for target {target!r}: give it a default, set "
                f"it under {where}, in the environment as {ENV_PREFIX}{name} or with --var "
                f"{name}=VALUE"
            )
    return values


def _only_declared(declared: Mapping[str, Any], source: str, names: Mapping[str, Any]) -> None:
    for name in names:
        if name not in declared:
            raise BundleError(
                f"{source} sets {name!r}, not declared under `variables`"
                + did_you_mean(name, declared)
            )


def _variable_spec(name: str, spec: Any) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise BundleError(f"variables.{name} must be a mapping (description, default, …)")
    check_keys(spec, VARIABLE, f"variables.{name}")
    if spec.get("type", "complex") != "complex":
        raise BundleError(f"variables.{name}.type must be `complex`, found {spec['type']!r}")
    return spec


def _target_spec(value: Any) -> dict[str, Any]:
    """A target's variable setting: `{default: …}` or `{lookup: …}`, or the value itself."""
    if isinstance(value, dict) and value and set(value) <= {"default", "lookup"}:
        return value
    return {"default": value}


def _value(name: str, spec: Mapping[str, Any], where: str, lookup: Lookup) -> Any:
    if "lookup" not in spec:
        return spec["default"]
    found = spec["lookup"]
    if not isinstance(found, dict) or len(found) != 1:
        raise BundleError(
            f"{where}: the lookup of {name!r} must name one object, e.g. "
            "`lookup: {cluster_policy: My policy}`"
        )
    ((kind, object_name),) = found.items()
    check_keys(found, LOOKUP, f"{where}: the lookup of {name!r}")
    return Deferred(lambda reason: lookup(kind, str(object_name), name))
