"""What the stages of a run hand to each other (:mod:`capplan.run.stages`, ordered by :mod:`capplan.run.pipeline`).

* :class:`PlanState` — one run: its inputs (source, config, seed, executor ...) and what each
  stage adds (prepared history, forecasts, scores, search outcomes, plans, report). Every stage
  is a function ``stage(state) -> None``.
* :class:`Ledger` — per series, what the run says about it: ``note`` (a stated fallback or
  assumption: the report's ``fallbacks``), ``warn`` (something a user should check: its
  ``warnings``), ``fail`` (the series is left out: the report's ``failed``) and ``reuse`` (what
  was taken from the store's cache: its ``reused``). Every stage writes here; the report reads
  it in one place (:func:`capplan.report.model.build_report`), in the order it was written, uncapped.
* :class:`Prepared` — regularised history and windows (:func:`capplan.run.stages.load.prepare`);
* :class:`TierResult` — one model's rolling and plan forecasts, with the messages its task
  produced (:func:`capplan.run.stages.forecast.tier_forecasts`);
* :class:`Forecasts` — every model's forecasts plus the combined ones (:mod:`capplan.run.stages.combine`).

The search stage's per-series result is :class:`optimizer.search.tuning.SearchOutcome`,
the report is :class:`capplan.report.model.Report`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.report.model import Report, RunInfo
from capplan.run.executor import Executor
from capplan.sources.history import LoadedHistory
from forecasting.backtest import Windows
from forecasting.regularise import RegulariseReport
from forecasting.types import SeriesMeta
from optimizer.plan.policy import SeriesPlan
from optimizer.search.tuning import SearchOutcome

Progress = Callable[[str, str], None]
"""Any callable taking ``(stage, message)``."""


def no_progress(stage: str, msg: str) -> None:
    """The default :data:`Progress`: says nothing."""


@dataclass
class SeriesEntry:
    """One series' lines of the :class:`Ledger`."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reused: dict = field(default_factory=dict)


class Ledger:
    """Per series: notes, warnings, failure and cache reuse, in the order the stages wrote them."""

    def __init__(self) -> None:
        self.series: dict[str, SeriesEntry] = {}
        self._failed: dict[str, dict] = {}

    def _at(self, sid: str) -> SeriesEntry:
        return self.series.setdefault(sid, SeriesEntry())

    def note(self, sid: str, msg: str) -> None:
        """A stated fallback or assumption about ``sid`` (the report's ``fallbacks``)."""
        self._at(sid).notes.append(msg)

    def warn(self, sid: str, msg: str) -> None:
        """Something about ``sid`` a user should check (the report's ``warnings``)."""
        self._at(sid).warnings.append(msg)

    def fail(self, sid: str, stage: str, error: str, where: str = "") -> None:
        """``sid`` raised in ``stage`` and is left out (the report's ``failed``)."""
        self._failed[sid] = {"stage": stage, "error": error, "where": where}

    def reuse(self, sid: str, what: str, value) -> None:
        """What ``sid`` took from the store's cache: ``what`` is ``rolling`` (model ->
        ``{"reused", "computed", ...}`` blocks) or ``search`` (``reused`` | ``tuning_reused`` | ``computed``)."""
        self._at(sid).reused[what] = value

    def notes(self, sid: str) -> list[str]:
        return list(self.series[sid].notes) if sid in self.series else []

    def warnings(self, sid: str) -> list[str]:
        return list(self.series[sid].warnings) if sid in self.series else []

    def reused(self, sid: str) -> dict:
        return dict(self.series[sid].reused) if sid in self.series else {}

    @property
    def failed(self) -> dict[str, dict]:
        """series_id -> ``{"stage", "error", "where"}``, in the order they failed."""
        return dict(self._failed)

    def failures(self) -> str:
        """The failures as one line, for an error message."""
        return "; ".join(f"{s}: {f['error']}" for s, f in self._failed.items())


@dataclass
class Prepared:
    """Regularised history and windows.

    ``h5``/``h1``: history frames on the 5-minute and hourly grids;
    ``windows``: series_id -> :class:`forecasting.backtest.Windows`;
    ``native``: inference series sampled finer than 5 minutes -> that series on its own grid
    (the replay's input, so the autoscaler sees the bursts the 5-minute max hides).
    """

    h5: pd.DataFrame
    h1: pd.DataFrame
    meta: dict[str, SeriesMeta]
    windows: dict[str, Windows]
    report: RegulariseReport | None
    native: dict[str, pd.DataFrame] = field(default_factory=dict)
    fleet: "Prepared | None" = None
    """Every usable series of the source when this run plans a selection of them (``--series``),
    else None. The global models train and predict on :meth:`global_view`, so a selection's
    forecasts are the ones a run of the whole source gives: a series' plan does not depend on
    which other series share the run."""

    def global_view(self) -> "Prepared":
        """The series the global models train on: the source's (:attr:`fleet`), or these series."""
        return self if self.fleet is None else self.fleet

    def select(self, series_ids) -> "Prepared":
        """The same data for ``series_ids`` only (regularise report shared)."""
        keep = set(series_ids)
        return Prepared(self.h5[self.h5["series_id"].isin(keep)].reset_index(drop=True),
                        self.h1[self.h1["series_id"].isin(keep)].reset_index(drop=True),
                        {s: m for s, m in self.meta.items() if s in keep},
                        {s: w for s, w in self.windows.items() if s in keep}, self.report,
                        {s: n for s, n in self.native.items() if s in keep})

    def drop(self, series_ids) -> "Prepared":
        """Without ``series_ids`` (failed ones), here and in :attr:`fleet`."""
        gone = set(series_ids)
        out = self.select([s for s in self.windows if s not in gone])
        if self.fleet is not None:
            out.fleet = self.fleet.select([s for s in self.fleet.windows if s not in gone])
        return out


@dataclass
class TierResult:
    """One model's rolling forecasts and its 7-day plan forecast (forecast frames, 5-minute grid).

    ``fallbacks`` / ``warnings``: series_id -> messages of its task (the forecast stage
    writes them to the :class:`Ledger`); ``reused``: series_id -> ``{"reused": blocks,
    "computed": blocks}`` of its rolling-origin refit blocks (:mod:`capplan.run.cache`; empty
    without a cache)."""

    name: str
    rolling: pd.DataFrame
    final: pd.DataFrame | None
    fallbacks: dict[str, list[str]]
    warnings: dict[str, list[str]]
    models: dict = field(default_factory=dict)
    reused: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Forecasts:
    """``rolling[model]``: rolling-origin forecasts (5-minute grid) over tuning and
    evaluation windows, ``rolling["combined"]`` included; ``final``: the 7-day
    combined plan forecast per series; ``final_tiers``: each tier's own plan forecast;
    ``combination``: per series, how the combination was made; ``models``: per tier,
    registry models reused / fitted; ``scores``: per series, model -> band -> backtest
    figures, computed where the series was combined (:func:`capplan.run.stages.combine.combine_one`;
    the score stage scores the rest)."""

    rolling: dict[str, pd.DataFrame]
    final: pd.DataFrame
    final_tiers: dict[str, pd.DataFrame]
    combination: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)
    scores: dict[str, dict] | None = None


@dataclass
class PlanState:
    """One run, as the stages see it.

    Inputs: ``cfg``; ``source`` (a ``--source`` spec) and ``series`` (None: all); ``seed``;
    ``timezone`` (of naive timestamps in files); ``progress``; ``executor`` (None: the one
    ``cfg.plan`` names, made and closed by :func:`capplan.run.pipeline.run`); ``cache_root`` (a
    store root whose cache supplies unchanged work, :mod:`capplan.run.cache`); ``extra_models``
    (scored, never combined, e.g. ``prophet``); ``stored`` (models forecast elsewhere, the
    Airflow forecast jobs: called with the state after loading, gives ``{model: TierResult}``);
    ``record_scores`` (the score stage records backtest scores in the model registry);
    ``out`` (the export folder), ``run`` (the report's run section) and ``missing``
    (series left out before the run, with the reason).

    Outputs, in stage order: ``loaded``, ``prep``, ``results`` (per model), ``fc``,
    ``scores``, ``outcomes``, ``plans``, ``report``; ``ledger`` throughout; ``run_notes``: notes
    about the whole run (a peer left out); ``timings``:
    seconds per stage.
    """

    cfg: CapplanConfig
    source: str = "sample"
    series: list[str] | None = None
    seed: int = 0
    timezone: str = "UTC"
    progress: Progress = no_progress
    executor: Executor | None = None
    cache_root: str | None = None
    extra_models: tuple[str, ...] = ()
    stored: Callable[["PlanState"], dict[str, TierResult]] | None = None
    record_scores: bool = True
    out: Path | None = None
    run: RunInfo | None = None
    missing: dict[str, str] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)
    loaded: LoadedHistory | None = None
    prep: Prepared | None = None
    results: dict[str, TierResult] = field(default_factory=dict)
    fc: Forecasts | None = None
    scores: dict[str, dict] = field(default_factory=dict)
    outcomes: dict[str, SearchOutcome] = field(default_factory=dict)
    plans: list[SeriesPlan] = field(default_factory=list)
    report: Report | None = None
    run_notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)
