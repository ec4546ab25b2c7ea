"""Where a Ctrl-C lands decides what its handler may do: inside a py4j call, no other call may
go through the interrupted thread's gateway connection. Work worth finishing asks the first
Ctrl-C to stop it after what is in flight, and leaves the second to stop it at once."""

from __future__ import annotations

import os
import signal
import sys
import threading
import weakref
from types import FrameType, SimpleNamespace

import pytest

from binlake.runtime import interrupts
from binlake.runtime.interrupts import in_gateway_call, raise_if_interrupted, stop_requests
from binlake.stream.task import _await


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


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_a_first_ctrl_c_asks_the_work_to_stop_and_a_second_stops_it_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = signal.getsignal(signal.SIGINT)
    calls: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: calls.append(signum))
    try:
        with stop_requests("finishing the chunks being read") as stopping:
            assert not stopping.is_set()
            _ctrl_c()
            assert stopping.is_set() and calls == []  # the handler before is not called yet
            assert "finishing the chunks being read" in caplog.text
            with pytest.raises(KeyboardInterrupt):
                _ctrl_c()
            assert calls == [signal.SIGINT]  # the second: what the handler before does
        _ctrl_c()  # restored on leaving
        assert calls == [signal.SIGINT, signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before)


def test_outside_the_main_thread_nothing_is_installed() -> None:
    seen: list[bool] = []

    def elsewhere() -> None:
        with stop_requests("never shown") as stopping:
            seen.append(signal.getsignal(signal.SIGINT) is handler and not stopping.is_set())

    handler = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen == [True]


class _JavaObject:
    """Stands for a py4j JavaObject: Python lets it go, and a weakref callback runs."""


def test_an_interrupt_python_ignored_in_a_finalizer_stops_the_stream_s_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGTERM landed while py4j's weakref callback ran (it garbage-collects the Java side of
    every object Python drops): the quiet handler's KeyboardInterrupt was printed as "Exception
    ignored" and the continuous stream ran on. The handler's record of it is raised again by
    the stream's wait, once."""

    def handler_raising() -> None:  # what `quiet_interrupts`' handler does at its end
        interrupts._INTERRUPTED.set()
        raise KeyboardInterrupt

    ignored: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda raised: ignored.append(raised.exc_type))
    held = _JavaObject()
    finalizer = weakref.ref(held, lambda _ref: handler_raising())
    del held  # the callback runs; Python ignores what it raises
    assert finalizer() is None and ignored == [KeyboardInterrupt]
    query = SimpleNamespace(isActive=True)
    with pytest.raises(KeyboardInterrupt):
        _await(query, 5.0)  # type: ignore[arg-type]
    raise_if_interrupted()  # raised once: nothing left
    _await(query, 0.3)  # type: ignore[arg-type]
