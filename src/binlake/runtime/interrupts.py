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
from types import FrameType

from pyspark.sql import SparkSession

from binlake.runtime.spark import is_connect


def quiet_interrupts(spark: SparkSession) -> None:
    """From now on, a SIGINT silences every log line and thread traceback, then cancels
    `spark`'s jobs (PySpark's handler) and raises `KeyboardInterrupt` in the main thread.

    Only a classic session started in the main thread has PySpark's handler to chain: elsewhere
    (a Spark Connect client, a thread) Python's default interrupt stands."""
    if is_connect(spark) or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(signum: int, frame: FrameType | None) -> None:
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


def in_gateway_call(frame: FrameType | None) -> bool:
    """Whether `frame` (where a signal interrupted the main thread) is inside a py4j call."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("py4j."):
            return True
        frame = frame.f_back
    return False
