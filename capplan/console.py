"""Terminal output helpers: progress to stderr (so ``--format json`` keeps stdout clean)."""

from __future__ import annotations

import time

from rich.console import Console

err = Console(stderr=True)
# piped output (CI logs, `| less`) gets a wide table instead of 80 truncated columns
out = Console() if Console().is_terminal else Console(width=160)


class StageProgress:
    """Prints ``[  12.3s] stage: message`` lines to stderr; quiet when ``enabled`` is False."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def __call__(self, stage: str, message: str) -> None:
        if self.enabled:
            err.print(f"[dim][{time.perf_counter() - self.t0:7.1f}s][/dim] [bold]{stage}[/bold]: {message}",
                      highlight=False)
