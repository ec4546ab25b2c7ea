"""The log on a terminal: the snapshot's tallies move one bar, other lines print above it, the
bar stops before the command's last line; output that is not a terminal keeps plain lines."""

from __future__ import annotations

import io
import logging
import re
from typing import Any

import pytest
from rich.console import Console

from binlake.jobs import cli
from binlake.jobs.terminal_log import TerminalLog, drawing
from binlake.model.tally import Tally

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _terminal() -> tuple[TerminalLog, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    handler = TerminalLog(console)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    return handler, out


def _record(message: str, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("binlake.test", logging.INFO, __file__, 1, message, (), None)
    record.__dict__.update(extra)
    return record


def _text(out: io.StringIO) -> str:
    return ANSI.sub("", out.getvalue())


def test_lines_without_a_tally_print_as_the_plain_log_does() -> None:
    handler, out = _terminal()
    handler.emit(_record("snapshot: 2 tables, 30 chunks, 0 already finished"))
    assert _text(out).strip() == "INFO snapshot: 2 tables, 30 chunks, 0 already finished"


def test_tallies_draw_one_bar_that_ends_at_the_total() -> None:
    handler, out = _terminal()
    for done in (0, 12, 30):
        tally = Tally("chunks", done, 30, f"{done * 100:,} rows read")
        handler.emit(_record(f"snapshot: chunks {done}/30 done", tally=tally))
    text = _text(out)
    assert "snapshot" in text and "30/30" in text and "3,000 rows read" in text
    assert "snapshot: chunks 12/30 done" not in text  # drawn, not printed as a line
    assert handler._bar is None  # the total reached: the bar stopped, left on screen


def test_a_line_during_the_bar_is_printed_and_the_bar_goes_on() -> None:
    handler, out = _terminal()
    handler.emit(_record("tally", tally=Tally("chunks", 3, 9, "reading 3 chunks of db.t")))
    handler.emit(_record("a DDL was met", levelname="WARNING"))
    handler.emit(_record("tally", tally=Tally("chunks", 9, 9, "done")))
    text = _text(out)
    assert "a DDL was met" in text and "9/9" in text


def test_the_bar_stops_before_the_last_line_however_the_work_ends() -> None:
    handler, _ = _terminal()
    with pytest.raises(KeyboardInterrupt), drawing(handler):
        handler.emit(_record("tally", tally=Tally("chunks", 1, 9, "")))
        assert handler._bar is not None
        raise KeyboardInterrupt
    assert handler._bar is None


@pytest.mark.parametrize(
    ("tty", "term", "drawn"),
    [(True, "xterm-256color", True), (True, "dumb", False), (False, "xterm", False)],
)
def test_only_a_terminal_gets_the_bar(
    monkeypatch: pytest.MonkeyPatch, tty: bool, term: str, drawn: bool
) -> None:
    stderr = io.StringIO()
    stderr.isatty = lambda: tty  # type: ignore[method-assign]
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setenv("TERM", term)
    root = logging.getLogger()
    kept = root.handlers[:]
    try:
        root.handlers = []
        args = cli.build_parser().parse_args(["status", "--config", "x.yml"])
        handler = cli._log_to_stderr(args)
        assert isinstance(handler, TerminalLog) == drawn
    finally:
        root.handlers = kept
