"""The plan ``capplan serve`` serves: the store's ``LATEST`` run, re-read when it changes.

Publishing protocol (:mod:`capplan.store.runs`): a run's folder appears whole (written under a
temporary name, then renamed; on an object store, every file before ``LATEST``), and
``runs/LATEST`` moves only after it. So a reader that starts from ``LATEST`` sees complete runs
only. :class:`PlanSource` adds two guards:

* the run must load: ``report.json`` validates as a :class:`capplan.report.model.Report` whose
  ``run.run_id`` is the id ``LATEST`` names, and ``forecasts.parquet`` reads; otherwise the
  previous plan stays (``last_error`` says why, ``reload_failures`` counts);
* ``LATEST`` is read at most every ``poll_s`` seconds (default 5), on demand.

Paths go through fsspec, so the store may be a folder or an ``s3://``/``gs://``/``file://`` URL
(:mod:`capplan.store.remote`).
"""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import dataclass, field

import pandas as pd
from pydantic import ValidationError

from capplan.errors import InputError
from capplan.report.model import Report
from capplan.store.remote import open_root


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
        self.poll_s = poll_s
        self.plan: LoadedPlan | None = None
        self.last_error: str | None = None
        self.reload_failures = 0
        self._checked = 0.0
        self._failed_id: str | None = None
        self._lock = threading.Lock()

    def _latest_id(self) -> str | None:
        p = f"{self.root}/runs/LATEST"
        try:
            with self.fs.open(p, "rb") as f:
                rid = f.read(512).decode().strip()
        except FileNotFoundError:
            return None
        return rid or None

    def _load(self, rid: str) -> LoadedPlan:
        d = f"{self.root}/runs/{rid}"
        with self.fs.open(f"{d}/report.json", "rb") as f:
            data = json.loads(f.read())
        report = Report.model_validate(data)
        if report.run.run_id != rid:
            raise ValueError(f"report.json names run {report.run.run_id!r}, LATEST names {rid!r}")
        with self.fs.open(f"{d}/forecasts.parquet", "rb") as f:
            fc = pd.read_parquet(io.BytesIO(f.read()))
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
            except OSError as exc:
                self._fail(None, f"cannot read LATEST: {exc}")
                return self.plan
            if rid is None or (self.plan is not None and rid == self.plan.run_id) or rid == self._failed_id:
                return self.plan
            try:
                self.plan = self._load(rid)
                self.last_error, self._failed_id = None, None
            except (OSError, ValueError, ValidationError, InputError, KeyError) as exc:
                # ValueError covers broken JSON and pyarrow's ArrowInvalid
                self._fail(rid, f"run {rid}: {type(exc).__name__}: {str(exc)[:300]}")
            return self.plan

    def _fail(self, rid: str | None, msg: str) -> None:
        self.reload_failures += 1
        self.last_error = msg
        self._failed_id = rid


__all__ = ["PlanSource", "LoadedPlan"]
