"""Bounded reconnects: a source that restarts, fails over or has a session killed is waited for.

A job that once reached the source treats a dropped or refused connection as a pause, not an
end: it reconnects with exponential backoff (at most `MAX_BACKOFF_S` apart, plus up to a second
of jitter) for up to `source.reconnect_timeout_s` without progress, then stops with the last
error. Only work that is safe to repeat is retried: metadata queries outside transactions, a
chunk read (a new read gets new watermarks), a binlog read (it resumes where it ended).
The first contact of the CLI's checks does not wait, so a wrong host answers at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    wait_exponential,
    wait_random,
)

from binlake.errors import SourceConnectionError

log = logging.getLogger(__name__)

#: Server shutdown in progress (1053), connection killed (1927, MariaDB), cannot connect
#: (2002, 2003), server gone away (2006), lost connection (2013), idle session disconnected
#: (4031, MySQL 8.0.24+), and PyMySQL's use of a connection it has already closed (0).
TRANSIENT_CODES = frozenset({0, 1053, 1927, 2002, 2003, 2006, 2013, 4031})
MAX_BACKOFF_S = 5.0


def is_transient(exc: BaseException | None) -> bool:
    """Whether `exc` (or the driver error it was raised from) is a dropped or refused connection,
    after which the same work succeeds on a new connection once the source is back."""
    seen = 0
    while exc is not None and seen < 4:
        if _driver_error(exc) and exc.args and exc.args[0] in TRANSIENT_CODES:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _driver_error(exc: BaseException) -> bool:
    """PyMySQL's and MySQLdb's connection-level errors (both follow DB-API's class names)."""
    return type(exc).__name__ in {"OperationalError", "InterfaceError"} and type(
        exc
    ).__module__.split(".")[0] in {"pymysql", "MySQLdb"}


def reconnecting(
    what: str, window_s: float, progressed_at: Callable[[], float] | None = None
) -> Retrying:
    """Attempts of `what` (for `with attempt:` blocks) that retry transient connection errors
    until `window_s` has passed since the last progress (`progressed_at`, a `time.monotonic()`
    value; by default the first attempt)."""
    started = time.monotonic()
    since = progressed_at or (lambda: started)

    def out_of_time(state: RetryCallState) -> bool:
        return time.monotonic() - since() >= window_s

    def report(state: RetryCallState) -> None:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "%s: lost the source (%s); reconnecting in %.1f s (attempt %d, giving up after "
            "%.0f s without progress)",
            what, _describe(error), delay, state.attempt_number, window_s,
        )  # fmt: skip

    def give_up(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        raise SourceConnectionError(
            f"{what}: lost the source and could not reconnect within "
            f"source.reconnect_timeout_s={window_s:g} s ({_describe(error)}); once it is back, "
            "run the same command again: it resumes where it stopped"
        ) from None

    return Retrying(
        retry=retry_if_exception(is_transient),
        stop=out_of_time,
        # Doubling from 0.2 s, plus up to 1 s of jitter so many readers do not reconnect in step.
        wait=wait_exponential(multiplier=0.2, max=MAX_BACKOFF_S) + wait_random(0, 1),
        before_sleep=report,
        retry_error_callback=give_up,
        reraise=True,
    )


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    detail = error.args[-1] if error.args else error
    return f"{type(error).__name__}: {detail}"
