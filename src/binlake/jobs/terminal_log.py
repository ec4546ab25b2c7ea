"""The log on a terminal: a live progress bar for long work, every other line printed above it.

A command run by hand on a terminal draws the snapshot's progress (the lines that carry a
`Tally`) as one bar, redrawn in place, with the chunks done of the total, the rows, the rates
and the time left beside it; every other log line is printed above the bar as it comes, so
nothing is lost and the scrollback reads as the plain log does. Output that is not a terminal
(a pipe, a file, a job's driver log, CI) gets the plain lines (`cli._log_to_stderr`): a bar
redrawn in a file is noise.

Drawing is rich's (`rich.progress`), which renders above a live display whatever is printed
through its console. The bar is stopped, left as it stands, before the command's last line
(`stop_drawing`) and when a tally reaches its total.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from binlake.model.tally import Tally


class TerminalLog(logging.Handler):
    """Log records on a terminal (`console`): those with a `tally` move a progress bar, the
    others are printed as formatted lines above it."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(stderr=True)
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tally = getattr(record, "tally", None)
            if isinstance(tally, Tally):
                self._draw(tally)
            else:
                line = self.format(record)
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        except Exception:
            self.handleError(record)

    def _draw(self, tally: Tally) -> None:
        if self._bar is None:
            self._bar = Progress(
                TextColumn("snapshot"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(f"{tally.unit}  {{task.fields[detail]}}"),
                console=self.console,
            )
            self._task = self._bar.add_task("", total=tally.total, detail="")
            self._bar.start()
        assert self._task is not None
        self._bar.update(self._task, completed=tally.done, total=tally.total, detail=tally.detail)
        if tally.done >= tally.total:
            self.stop_drawing()

    def stop_drawing(self) -> None:
        """Stop redrawing the bar, leaving it on screen as it stands; the next tally starts a
        new one (a table snapshotted again after a DDL)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def close(self) -> None:
        self.stop_drawing()
        super().close()


@contextmanager
def drawing(handler: logging.Handler) -> Iterator[None]:
    """The command's work: on the way out, however it ends, a bar `handler` draws is stopped,
    so the command's last line (its result, its error) prints below it."""
    try:
        yield
    finally:
        if isinstance(handler, TerminalLog):
            handler.stop_drawing()
