"""Run binlake's CLI and kill its process at a chosen point of its work.

    python tests/integration/crash.py MODULE:QUALNAME WHEN CALL -- binlake arguments...

The process ends with `os._exit(137)` (no cleanup, no `finally`, no flush: what SIGKILL or a lost
driver node does) when the function `QUALNAME` of `MODULE` is entered for the CALL-th time
(`WHEN` = `before`), has returned for the CALL-th time (`after`), or `S` seconds after its
CALL-th return, while the work that follows runs (`during:S`). It prints where it died first.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
from typing import Any

KILLED = 137


def _die(where: str) -> None:
    print(f"crash: killed {where}", file=sys.stderr, flush=True)
    os._exit(KILLED)


def arm(target: str, when: str, call: int) -> None:
    module_name, _, qualname = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = qualname.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    original = getattr(owner, name)
    calls = 0

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call and when == "before":
            _die(f"before {qualname} (call {calls})")
        result = original(*args, **kwargs)
        if calls == call and when == "after":
            _die(f"after {qualname} (call {calls})")
        if calls == call and when.startswith("during:"):
            delay = float(when.partition(":")[2])
            timer = threading.Timer(delay, _die, (f"{delay} s after {qualname} (call {calls})",))
            timer.daemon = True
            timer.start()
        return result

    setattr(owner, name, wrapper)


def main() -> None:
    target, when, call, separator, *argv = sys.argv[1:]
    assert separator == "--", __doc__
    arm(target, when, int(call))
    from binlake.cli import main as binlake

    raise SystemExit(binlake(argv))


if __name__ == "__main__":
    main()
