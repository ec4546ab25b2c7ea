"""Run binlake's CLI and kill its process at a chosen point of its work.

    python tests/integration/crash.py MODULE:QUALNAME WHEN CALL -- binlake arguments...

The process ends with `os._exit(137)` (no cleanup, no `finally`, no flush: what SIGKILL or a lost
driver node does) when the function `QUALNAME` of `MODULE` is entered for the CALL-th time
(`WHEN` = `before`), has returned for the CALL-th time (`after`), or `S` seconds after its
CALL-th return, while the work that follows runs (`during:S`). It prints where it died first.

In-process, `crashed_at` raises `Crashed` at the same points instead (`before`, `after`): what a
crash leaves behind, without a second JVM's start-up (about 30 s a run). It fits where the
rerun's handling of a half-applied batch is under test; the kills of test_faults prove the
process's own death at the commit boundaries.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

KILLED = 137


class Crashed(RuntimeError):
    """Raised in-process where `crashed_at` was armed."""


def _die(where: str) -> None:
    print(f"crash: killed {where}", file=sys.stderr, flush=True)
    os._exit(KILLED)


def _raise(where: str) -> None:
    raise Crashed(f"crashed {where}")


def _owner(target: str) -> tuple[Any, str]:
    """The object holding `target`'s function ("MODULE:QUALNAME") and the function's name."""
    module_name, _, qualname = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = qualname.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def _armed(original: Any, when: str, call: int, die: Callable[[str], None]) -> Any:
    """`original`, calling `die` at its CALL-th entry or return (or S seconds after it)."""
    qualname = original.__qualname__
    calls = 0

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call and when == "before":
            die(f"before {qualname} (call {calls})")
        result = original(*args, **kwargs)
        if calls == call and when == "after":
            die(f"after {qualname} (call {calls})")
        if calls == call and when.startswith("during:"):
            delay = float(when.partition(":")[2])
            timer = threading.Timer(delay, die, (f"{delay} s after {qualname} (call {calls})",))
            timer.daemon = True
            timer.start()
        return result

    return wrapper


def arm(target: str, when: str, call: int) -> None:
    """Kill this process at `target`'s CALL-th call (`when`: before, after, during:S)."""
    owner, name = _owner(target)
    setattr(owner, name, _armed(getattr(owner, name), when, call, _die))


@contextmanager
def crashed_at(target: str, when: str, call: int, required: bool = True) -> Iterator[None]:
    """Inside the block, `target`'s CALL-th call raises `Crashed` (`when`: before, after); the
    block must end by that crash (unless not `required`: a random interleaving may not reach
    it), which is swallowed (Spark wraps it: it is known by name)."""
    assert when in ("before", "after"), f"in-process crashes happen before or after, not {when}"
    owner, name = _owner(target)
    original = getattr(owner, name)
    setattr(owner, name, _armed(original, when, call, _raise))
    try:
        yield
    except Exception as error:
        if not isinstance(error, Crashed) and Crashed.__name__ not in str(error):
            raise
    else:
        if required:
            raise AssertionError(f"no crash: {target} was not called {call} time(s)")
    finally:
        setattr(owner, name, original)


def main() -> None:
    target, when, call, separator, *argv = sys.argv[1:]
    assert separator == "--", __doc__
    arm(target, when, int(call))
    from binlake.jobs.cli import main as binlake

    raise SystemExit(binlake(argv))


if __name__ == "__main__":
    main()
