"""Terminal output: the consoles and the stage progress (on stderr, so ``--format json`` keeps
stdout clean).

* :data:`out` — stdout. On a terminal it uses the terminal's width; piped (CI logs,
  ``| less``) it uses ``$COLUMNS`` if set, else 160 columns. Tables fit that width by
  dropping or wrapping columns, never digits (:mod:`capplan.cli.table`).
* :class:`StageProgress` — on a terminal a rich progress bar per stage, with the
  stage's count (``3/15``), elapsed time and ETA; when stderr is not a terminal (CI,
  Airflow logs, a file) one plain line per message: ``[  12.3s] search: 3/15 train/vc6YE``.
"""

from __future__ import annotations

import os
import re
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

PIPED_WIDTH = 160
err = Console(stderr=True)


def stdout_console() -> Console:
    """The stdout console (width rules in the module docstring)."""
    c = Console()
    if c.is_terminal or os.environ.get("COLUMNS"):
        return c
    return Console(width=PIPED_WIDTH)


out = stdout_console()
COUNT = re.compile(r"^\[(\d+)/(\d+)\]\s*")


class StageProgress:
    """Progress callback ``progress(stage, message)`` for the pipeline's stages.

    A message that starts with ``[i/n]`` (e.g. the search's ``[3/15] train/vc6YE``) sets
    the stage's count: done ``i`` of ``n``, from which the bar and the ETA follow. Use it
    as a context manager (or call :meth:`close`) so the bar is finished before the
    result is printed. ``enabled=False`` prints nothing; ``live`` forces (True) or
    forbids (False) the bar, by default it is used when stderr is a terminal.
    """

    def __init__(self, enabled: bool = True, live: bool | None = None, console: Console | None = None):
        self.enabled = enabled
        self.console = console or err
        self.live = self.console.is_terminal if live is None else live
        self.t0 = time.perf_counter()
        self.stage_t0: dict[str, float] = {}
        self._bar: Progress | None = None
        self._tasks: dict[str, int] = {}
        self._current: str | None = None

    def __enter__(self) -> "StageProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __call__(self, stage: str, message: str) -> None:
        if not self.enabled:
            return
        m = COUNT.match(message)
        done, total = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        text = message[m.end():] if m else message
        self.stage_t0.setdefault(stage, time.perf_counter())
        if self.live:
            self._update_bar(stage, text, done, total)
        else:
            self.console.print(self.line(stage, text, done, total), highlight=False, markup=False, soft_wrap=True)

    def line(self, stage: str, text: str, done: int | None = None, total: int | None = None) -> str:
        """The plain line for a message (stderr not a terminal)."""
        now = time.perf_counter()
        count = ""
        if done is not None and total:
            spent = now - self.stage_t0.get(stage, now)
            eta = spent / done * (total - done) if done else float("nan")
            count = f"{done}/{total} " + (f"(eta {eta:.0f} s) " if done < total and eta == eta else "")
        return f"[{now - self.t0:7.1f}s] {stage}: {count}{text}"

    def _update_bar(self, stage: str, text: str, done: int | None, total: int | None) -> None:
        if self._bar is None:
            self._bar = Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[stage]:<10}"), BarColumn(bar_width=24),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 TextColumn("{task.description}", markup=False), console=self.console, transient=False)
            self._bar.start()
        if self._current is not None and self._current != stage:
            prev = self._tasks[self._current]
            t = self._bar.tasks[prev]
            self._bar.update(prev, total=t.total or 1, completed=t.total or 1)
        if stage not in self._tasks:
            self._tasks[stage] = self._bar.add_task(text, total=None, stage=stage)
        self._current = stage
        kw = {"description": text}
        if total:
            kw.update(total=total, completed=done)
        self._bar.update(self._tasks[stage], **kw)

    def close(self) -> None:
        """Finish the bar (every stage complete) and release the terminal."""
        if self._bar is not None:
            for tid in self._tasks.values():
                t = self._bar.tasks[tid]
                self._bar.update(tid, total=t.total or 1, completed=t.total or 1)
            self._bar.stop()
            self._bar = None
