"""Run ids and which runs become the fleet's plan (the store's ``runs/LATEST``).

* **Unique ids.** ``<UTC start, seconds>Z-s<seed>-<8 hex digits>``: the
  timestamp keeps ids sortable by start time, the random suffix keeps two runs
  started in the same second with the same seed apart (before, one silently
  replaced the other).
* **Publishing.** ``LATEST`` names the fleet's current plan, which the
  dashboard opens on. A run moves it only when it plans the whole source
  (no ``--series``) into the default ``--out`` (``capplan-out``), or when asked
  with ``--publish``; ``--no-publish`` keeps any run out. Every run is still
  saved under ``runs/<id>/`` and can be picked in the dashboard.
* **Which is the truth after a kill.** The store is written first: the run
  folder (swapped in whole), then ``LATEST`` (one atomic file), then the
  ``--out`` copy (swapped in whole). ``LATEST`` is therefore never behind
  ``--out``; a run killed before its copy leaves ``--out`` at the previous
  run, and ``report.json``'s ``run.run_id`` says which run a folder holds.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path

DEFAULT_OUT = Path("capplan-out")


def new_run_id(started: dt.datetime, seed: int) -> str:
    """A unique run id, e.g. ``20261130T201512Z-s0-3f9a1c02``."""
    return f"{started.astimezone(dt.timezone.utc):%Y%m%dT%H%M%SZ}-s{seed}-{secrets.token_hex(4)}"


def should_publish(series: list[str] | None, out: str | os.PathLike, publish: bool | None) -> bool:
    """Whether a run moves ``LATEST``: ``publish`` when given, else only a whole-source
    run (no ``series``) into the default ``--out``."""
    if publish is not None:
        return bool(publish)
    return not series and Path(out) == DEFAULT_OUT
