"""``benchmarks/RESULTS.md``, written by the runner: one section per benchmark, replaced on each run.

A section holds the benchmark's printed output with what is needed to judge it:
the commit (with ``+dirty`` when the work tree had changes), the UTC date, the
machine's load average (1, 5, 15 min) before and after the run, its CPU count,
the wall-clock seconds and the exact command. Sections sit between
``<!-- benchmark:NAME -->`` and ``<!-- /benchmark:NAME -->`` markers; text outside
the markers (the introduction, the earlier findings) is kept as it is. A new
benchmark's section is added before the ``## Earlier findings`` heading.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from capplan.store.atomic import write_text

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
EARLIER = "## Earlier findings"
HEADER = """# Benchmark results

Written by `python -m benchmarks NAME ...` (benchmarks/results.py): each section is the latest run
of one benchmark, with its commit, date, load average and command. Figures measured on a shared
machine move with its load; compare ratios measured in one run, not seconds across runs. What each
benchmark measures and the targets it checks: [README.md](README.md).

"""


@dataclass
class Run:
    """One benchmark run: ``name``, ``command`` (as typed), ``output`` (what it printed),
    ``seconds`` (wall clock), ``load_before``/``load_after`` (1, 5, 15-minute load averages)."""

    name: str
    command: str
    output: str
    seconds: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]


def commit(repo: Path) -> str:
    """The short commit hash of ``repo``'s HEAD, with ``+dirty`` when tracked files other than
    RESULTS.md itself differ from it; ``unknown`` outside a git work tree."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!benchmarks/RESULTS.md"], cwd=repo, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def section(run: Run, repo: Path, now: dt.datetime | None = None) -> str:
    """The Markdown section for ``run`` (module docstring), between its markers."""
    now = now or dt.datetime.now(dt.timezone.utc)
    load = " ".join(f"{x:.2f}" for x in run.load_before)
    after = " ".join(f"{x:.2f}" for x in run.load_after)
    return (f"<!-- benchmark:{run.name} -->\n## {run.name}\n\n"
            f"- command: `{run.command}`\n"
            f"- commit: {commit(repo)}; date: {now:%Y-%m-%d %H:%M} UTC; wall clock: {run.seconds:.0f} s\n"
            f"- load average (1, 5, 15 min): {load} before, {after} after; CPUs: {os.cpu_count()}\n\n"
            f"```text\n{run.output.rstrip()}\n```\n<!-- /benchmark:{run.name} -->\n")


def record(run: Run, path: Path = RESULTS, repo: Path | None = None) -> Path:
    """Put ``run``'s section into ``path`` (replacing that benchmark's previous section, else
    adding it before the earlier findings), written atomically; returns ``path``."""
    repo = repo or Path(__file__).resolve().parents[1]
    text = path.read_text() if path.exists() else HEADER
    new = section(run, repo)
    pattern = re.compile(rf"<!-- benchmark:{re.escape(run.name)} -->.*?<!-- /benchmark:{re.escape(run.name)} -->\n?",
                         re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: new, text, count=1)
    elif EARLIER in text:
        i = text.index(EARLIER)
        text = text[:i] + new + "\n" + text[i:]
    else:
        text = text.rstrip("\n") + "\n\n" + new
    return write_text(path, text)
