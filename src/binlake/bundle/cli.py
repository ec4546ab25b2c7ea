"""`binlake bundle validate|run|deploy`: argument parsing only; the work is in the modules."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from binlake.bundle.definition import Bundle, load_bundle
from binlake.bundle.deploy import deploy, workspace_client
from binlake.bundle.errors import BundleError
from binlake.bundle.local import run_job
from binlake.bundle.validate import validate


def main(args: Sequence[str]) -> int:
    options = build_parser().parse_args(args)
    bundle = load_bundle(options.root, options.target, _pairs(options.var, "--var"))
    if options.action == "validate":
        for line in validate(bundle):
            print(line)
        print(f"bundle {bundle.name!r}, target {bundle.target!r}: valid")
    elif options.action == "run":
        run_job(bundle, options.job, _pairs(options.param, "--param"))
    elif options.action == "deploy":
        _deploy(bundle)
    return 0


def _deploy(bundle: Bundle) -> None:
    validate(bundle)
    for deployed in deploy(bundle, workspace_client(bundle)):
        action = "created" if deployed.created else "updated"
        print(f"{action} job {deployed.job_id}: {deployed.key}")


def _pairs(pairs: Sequence[str] | None, option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BundleError(f"{option} expects NAME=VALUE, got {pair!r}")
        result[key] = value
    return result


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--target", "-t", help="bundle target (default: the `default: true` one)")
    common.add_argument(
        "--var", action="append", metavar="NAME=VALUE", help="set a bundle variable (repeatable)"
    )
    common.add_argument("--root", default=".", help="folder holding bundle.yml (default: .)")
    parser = argparse.ArgumentParser(
        prog="binlake bundle", description="Validate, run or deploy the job bundle."
    )
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("validate", parents=[common], help="check the bundle offline for a target")
    run = actions.add_parser(
        "run", parents=[common], help="run a job's tasks on this machine, in dependency order"
    )
    run.add_argument("job", help="job key under resources.jobs, e.g. bronze_snapshot")
    run.add_argument(
        "--param", action="append", metavar="NAME=VALUE", help="set a job parameter (repeatable)"
    )
    actions.add_parser(
        "deploy", parents=[common], help="build and upload the wheel, create or update the jobs"
    )
    return parser
