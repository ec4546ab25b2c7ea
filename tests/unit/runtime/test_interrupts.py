"""Where a Ctrl-C lands decides what its handler may do: inside a py4j call, no other call may
go through the interrupted thread's gateway connection."""

from __future__ import annotations

import sys
from types import FrameType

from binlake.runtime.interrupts import in_gateway_call


def _frame_inside(module: str) -> FrameType:
    """The frame of a function of module `module`, as a signal would find it."""
    namespace: dict[str, object] = {"__name__": module, "sys": sys}
    exec("def current():\n    return sys._getframe()", namespace)
    return namespace["current"]()  # type: ignore[operator,no-any-return]


def test_a_frame_inside_py4j_is_a_gateway_call() -> None:
    assert in_gateway_call(_frame_inside("py4j.clientserver"))


def test_frames_outside_py4j_are_not() -> None:
    assert not in_gateway_call(_frame_inside("binlake.stream.task"))
    assert not in_gateway_call(_frame_inside("py4jish"))  # a module merely named alike
    assert not in_gateway_call(sys._getframe())
    assert not in_gateway_call(None)
