"""The plan ``capplan serve`` serves: the store's ``LATEST`` run, re-read when it changes.

Publishing protocol (:mod:`capplan.store.runs`): a run's folder appears whole (written under a
temporary name, then renamed; on an object store, every file before ``LATEST``), and
``runs/LATEST`` moves only after it. So a reader that starts from ``LATEST`` sees complete runs
only. :class:`PlanSource` adds two guards:

* the run must load: ``report.json`` validates as a :class:`capplan.report.model.Report` whose
  ``run.run_id`` is the id ``LATEST`` names, and ``forecasts.parquet`` reads; otherwise the
  previous plan stays (``last_error`` says why, ``reload_failures`` counts);
* ``LATEST`` is read at most every ``poll_s`` seconds (default 5), on demand; a run that failed to
  load is tried again after a backoff (``poll_s`` doubling per failure, capped at
  :data:`RETRY_MAX_S`), so a transient read error does not pin the previous plan;
* the store is never left: ``LATEST`` must name one run folder (:func:`check_run_id`: one path
  segment, no ``..``, no hidden name), and ``LATEST``, ``report.json`` and ``forecasts.parquet``
  are read only when they are regular files of bounded size inside the store (a local store's
  symlinks may not lead out of it) (a FIFO or a device would block or
  never end); error texts name paths relative to the store, never the server's own folders.

Paths go through fsspec, so the store may be a folder or an ``s3://``/``gs://``/``file://`` URL
(:mod:`capplan.store.remote`).
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field

import pandas as pd
from pydantic import ValidationError

from capplan.errors import InputError
from capplan.report.model import Report
from capplan.store.remote import open_root

RETRY_MAX_S = 300.0
"""Longest wait before a run that failed to load is read again (seconds)."""
_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+=-]{0,199}")
_MAX_REPORT = 256 * 2**20  # bytes of report.json / forecasts.parquet read at most


def check_run_id(rid: str) -> str:
    """``rid`` when it names one run folder inside ``runs/``: 1-200 characters of letters, digits and
    ``._:+=-``, starting with a letter or digit, no ``..`` (so never a path out of the store or a
    hidden temporary). Raises ValueError naming the refused id (shown with ``repr``, at most 80 characters)."""
    if not _RUN_ID_RE.fullmatch(rid) or ".." in rid:
        raise ValueError(f"LATEST names {rid[:80]!r}, not a run id (one folder name under runs/)")
    return rid


@dataclass
class LoadedPlan:
    """A complete run: its id, the typed report, the plan forecasts (``tier == 'combined'``,
    columns of :data:`forecasting.types.FORECAST_COLUMNS`, quantiles in GPUs or replicas at 100 %
    utilisation) and when it was loaded (epoch seconds)."""

    run_id: str
    report: Report
    forecasts: pd.DataFrame
    loaded_at: float = field(default_factory=time.time)


class PlanSource:
    """The latest good plan of the store at ``root`` (a path or fsspec URL)."""

    def __init__(self, root: str, poll_s: float = 5.0):
        self.fs, self.root = open_root(root)
        local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))
        self._local = os.path.realpath(self.root) if local else None  # symlinks may not lead out of it
        self.poll_s = poll_s
        self.plan: LoadedPlan | None = None
        self.last_error: str | None = None
        self.reload_failures = 0
        self._checked = 0.0
        self._failed_id: str | None = None
        self._failed_tries = 0
        self._retry_at = 0.0
        self._lock = threading.Lock()

    def _read(self, rel: str, limit: int) -> bytes:
        """The bytes of ``<root>/<rel>`` when it is a regular file of at most ``limit`` bytes.
        Raises FileNotFoundError when absent, ValueError when not a regular file or too large."""
        p = f"{self.root}/{rel}"
        info = self.fs.info(p)  # FileNotFoundError when absent
        if self._local is not None and not os.path.realpath(p).startswith(self._local + os.sep):
            raise ValueError(f"{rel} resolves outside the store (a symlink)")
        if info.get("type") != "file":
            raise ValueError(f"{rel} is not a regular file ({info.get('type')})")
        if (info.get("size") or 0) > limit:
            raise ValueError(f"{rel} is larger than {limit} bytes")
        with self.fs.open(p, "rb") as f:
            return f.read(limit + 1)

    def _latest_id(self) -> str | None:
        try:
            rid = self._read("runs/LATEST", 512).decode("utf-8", "replace").strip()
        except FileNotFoundError:
            return None
        return check_run_id(rid) if rid else None

    def _load(self, rid: str) -> LoadedPlan:
        d = f"runs/{check_run_id(rid)}"
        data = json.loads(self._read(f"{d}/report.json", _MAX_REPORT))
        report = Report.model_validate(data)
        if report.run.run_id != rid:
            raise ValueError(f"report.json names run {report.run.run_id!r}, LATEST names {rid!r}")
        fc = pd.read_parquet(io.BytesIO(self._read(f"{d}/forecasts.parquet", _MAX_REPORT)))
        fc = fc[fc["tier"] == "combined"].sort_values(["series_id", "timestamp"]).reset_index(drop=True)
        return LoadedPlan(rid, report, fc)

    def current(self, force: bool = False) -> LoadedPlan | None:
        """The plan to serve: re-reads ``LATEST`` when ``poll_s`` has passed (or ``force``), loads
        a new run it names, and keeps the previous plan when that run does not load."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._checked < self.poll_s:
                return self.plan
            self._checked = now
            try:
                rid = self._latest_id()
            except (OSError, ValueError) as exc:
                self._fail(None, f"cannot read LATEST: {self._why(exc)}")
                return self.plan
            if rid is None or (self.plan is not None and rid == self.plan.run_id):
                return self.plan
            if rid == self._failed_id and now < self._retry_at:
                return self.plan  # failed a moment ago: tried again after the backoff
            try:
                self.plan = self._load(rid)
                self.last_error, self._failed_id, self._failed_tries = None, None, 0
            except (OSError, ValueError, ValidationError, InputError, KeyError) as exc:
                # ValueError covers broken JSON and pyarrow's ArrowInvalid
                self._fail(rid, f"run {rid}: {self._why(exc)}")
            return self.plan

    def _why(self, exc: BaseException) -> str:
        """``exc`` as ``Type: text`` (300 characters at most) with the store root's own path left out."""
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"{type(exc).__name__}: {text.replace(self.root + '/', '').replace(self.root, 'the store')[:300]}"

    def _fail(self, rid: str | None, msg: str) -> None:
        self.reload_failures += 1
        self.last_error = msg
        self._failed_tries = self._failed_tries + 1 if rid == self._failed_id else 1
        self._failed_id = rid
        self._retry_at = time.monotonic() + min(RETRY_MAX_S, self.poll_s * 2 ** (self._failed_tries - 1))


__all__ = ["PlanSource", "LoadedPlan", "check_run_id", "RETRY_MAX_S"]
