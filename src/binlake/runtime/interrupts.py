"""Ctrl-C, the usual way to stop a command run by hand, as a quiet stop.

PySpark's own SIGINT handler cancels every Spark job and raises `KeyboardInterrupt`; the
cancelled jobs then fill the terminal with Spark's errors (each writer aborting its job) and
py4j's tracebacks. This handler first silences Python's logging, the JVM's log and the
tracebacks of the threads the cancellation ends, then does what PySpark's does, so the command
ends with the one line `jobs.cli` prints.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from pyspark.sql import SparkSession

from binlake.runtime.spark import is_connect

log = logging.getLogger(__name__)

#: Set by the quiet handler as it raises `KeyboardInterrupt`. Python ignores an exception raised
#: in a finalizer or a weakref callback ("Exception ignored in …"), and py4j runs one for every
#: Java object Python lets go: an interrupt landing there would be lost, and a stream asked to
#: stop by SIGTERM would run on. The main thread's polling waits raise it again
#: (`raise_if_interrupted`).
_INTERRUPTED = threading.Event()


def quiet_interrupts(spark: SparkSession) -> None:
    """From now on, a SIGINT silences every log line and thread traceback, then cancels
    `spark`'s jobs (PySpark's handler) and raises `KeyboardInterrupt` in the main thread.

    Only a classic session started in the main thread has PySpark's handler to chain: elsewhere
    (a Spark Connect client, a thread) Python's default interrupt stands."""
    if is_connect(spark) or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        _INTERRUPTED.set()
        logging.disable(logging.CRITICAL)
        threading.excepthook = lambda _: None
        if in_gateway_call(frame):
            # The main thread's gateway connection is mid-call: a call now would interleave
            # with it. The code the interrupt unwinds stops its own work (`stream.task`).
            raise KeyboardInterrupt
        with contextlib.suppress(Exception):  # the JVM may be going away itself
            spark.sparkContext.setLogLevel("OFF")
        if callable(previous):
            previous(signum, frame)  # PySpark's: cancels every job, raises KeyboardInterrupt
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)


@contextlib.contextmanager
def stop_requests(notice: str) -> Iterator[threading.Event]:
    """While open, a first SIGINT only sets the event it yields and logs `notice`: the work in
    flight finishes and commits, and nothing new starts. A second SIGINT does what the handler
    before it does (`quiet_interrupts`: every Spark job cancelled at once, `KeyboardInterrupt`).

    For work whose in-flight part is worth keeping (a snapshot's chunks being read commit
    together, and a rerun reads only the rest). Signal handlers belong to the main thread:
    elsewhere the event is never set and SIGINT acts as before."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return
    previous = signal.getsignal(signal.SIGINT)

    def requested(signum: int, frame: FrameType | None) -> None:
        if not stopping.is_set():
            stopping.set()
            log.warning(notice)
            return
        signal.signal(signal.SIGINT, previous)
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, requested)
    try:
        yield stopping
    finally:
        signal.signal(signal.SIGINT, previous)


def raise_if_interrupted() -> None:
    """Raise again, once, a `KeyboardInterrupt` the quiet handler raised (`quiet_interrupts`):
    the main thread's polling waits call it, so an interrupt Python ignored where it landed
    (a finalizer) still stops the command within one poll."""
    if _INTERRUPTED.is_set():
        _INTERRUPTED.clear()
        raise KeyboardInterrupt


def in_gateway_call(frame: FrameType | None) -> bool:
    """Whether `frame` (where a signal interrupted the main thread) is inside a py4j call."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("py4j."):
            return True
        frame = frame.f_back
    return False
