"""`binlake bundle validate|run-local`: the actions' arguments, and which module does each.

`run-local` runs a job's tasks on this machine: named so that nobody takes it for
`databricks bundle run`, which starts a deployed job on a workspace.
Parsing imports nothing heavy: the modules that use `databricks-bundles` load when an action runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from binlake.errors import BundleError

#: The target `run-local` takes unless told otherwise: this machine's source and lake.
LOCAL_TARGET = "local"


def add_bundle_command(commands: Any, verbosity: argparse.ArgumentParser) -> None:
    """Add `binlake bundle` and its actions to the CLI's `commands` (its subparsers);
    `verbosity` is the CLI's `-v` option."""
    parser = commands.add_parser(
        "bundle",
        help="validate the job bundle, or run a job here (run-local)",
        description="The Databricks job bundle (bundle.yml, resources/*.yml): validate it, or "
        "run a job's tasks on this machine. `databricks bundle deploy` (the Databricks CLI) "
        "deploys it.",
        parents=[verbosity],
    )
    common = argparse.ArgumentParser(add_help=False, parents=[verbosity])
    common.add_argument(
        "--var",
        action="append",
        metavar="NAME=VALUE",
        help="set a bundle variable (repeatable); beats BUNDLE_VAR_<NAME> and the target's value",
    )
    common.add_argument("--root", default=".", help="folder holding bundle.yml (default: .)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    validate = actions.add_parser(
        "validate",
        parents=[common],
        help="check binlake's side of the bundle for a target, offline",
        description="Check bundle.yml and resources/ for a target as binlake runs them: the "
        "variables, the bundle's mutators and loaders, each resource against its typed model, "
        "each task as a binlake command line with a valid configuration, and that a production "
        "target's data survives `bundle destroy`. Asks no workspace: `databricks bundle "
        "validate` checks the rest (modes, presets, run_as, permissions, lookups).",
    )
    _target_argument(validate, None)
    run_local = actions.add_parser(
        "run-local",
        parents=[common],
        help="run a job's tasks on this machine, in dependency order (not on a workspace)",
        description="Run a bundle job's tasks here, in-process, in dependency order; the first "
        "failing task stops the run and its exit code is binlake's. `databricks bundle run` "
        "runs a deployed job on the workspace instead.",
    )
    _target_argument(run_local, LOCAL_TARGET)
    _job_arguments(run_local)
    deploy = actions.add_parser(
        "deploy",
        parents=[common],
        help="not binlake's: `databricks bundle deploy` deploys the bundle",
        description="binlake deploys nothing: the Databricks CLI deploys the bundle with every "
        "resource and its deployment state (`databricks bundle deploy -t TARGET`).",
    )
    _target_argument(deploy, None)


def _target_argument(parser: argparse.ArgumentParser, default: str | None) -> None:
    """`--target`: by default the bundle's `default: true` target (`dev`, as a bare
    `databricks bundle deploy` takes it), but `run-local` takes `local`, the one target
    meant for this machine."""
    parser.add_argument(
        "--target",
        "-t",
        default=default,
        help=f"bundle target (default: {default or 'the `default: true` one'})",
    )


def _job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help="job key under resources.jobs, e.g. bronze_snapshot")
    parser.add_argument(
        "--param", action="append", metavar="NAME=VALUE", help="set a job parameter (repeatable)"
    )


def run_action(args: argparse.Namespace, execute: Callable[[Sequence[str]], int]) -> int:
    """Run the parsed action; failures are `BundleError`s (a failed task's carries its code).
    `execute` runs a task's command line (`binlake.jobs.cli.main`)."""
    from binlake.bundle.definition import load_bundle

    if args.action == "deploy":
        target = f" -t {args.target}" if args.target else ""
        raise BundleError(
            f"binlake does not deploy bundles: run `databricks bundle deploy{target}` (the "
            "Databricks CLI) in this folder; docs/bundle.md walks a first deployment"
        )
    bundle = load_bundle(args.root, args.target, _pairs(args.var, "--var"))
    if args.action == "validate":
        from binlake.bundle.validate import describe, validate

        for line in [*describe(bundle), *validate(bundle)]:
            print(line)
        print(f"bundle {bundle.name!r}, target {bundle.target!r}: valid")
    elif args.action == "run-local":
        from binlake.bundle.local import run_job

        run_job(bundle, args.job, _pairs(args.param, "--param"), execute=execute)
    return 0


def _pairs(pairs: Sequence[str] | None, option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BundleError(f"{option} expects NAME=VALUE, got {pair!r}")
        result[key] = value
    return result
