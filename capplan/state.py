"""The data the pipeline stages hand to each other.

* :class:`Prepared` — regularised history and windows (:func:`capplan.pipeline.regularise_stage`);
* :class:`TierResult` — one model's rolling and plan forecasts (:func:`capplan.tasks.tier_forecasts`);
* :class:`Forecasts` — every model's forecasts plus the combined ones (:func:`capplan.pipeline.forecast_stage`).

The search stage's per-series result is :class:`optimizer.tuning.SearchOutcome`,
the report is :class:`capplan.report.Report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from forecasting.backtest import Windows
from forecasting.regularise import RegulariseReport
from forecasting.types import SeriesMeta

Progress = Callable[[str, str], None]
"""Any callable taking ``(stage, message)``."""


def no_progress(stage: str, msg: str) -> None:
    """The default :data:`Progress`: says nothing."""


@dataclass
class Prepared:
    """Regularised history and windows.

    ``h5``/``h1``: history frames on the 5-minute and hourly grids;
    ``windows``: series_id -> :class:`forecasting.backtest.Windows`;
    ``notes``: series_id -> stated fallbacks/changes; ``native``: inference
    series sampled finer than 5 minutes -> that series on its own grid (the
    replay's input, so the autoscaler sees the bursts the 5-minute max hides).
    """

    h5: pd.DataFrame
    h1: pd.DataFrame
    meta: dict[str, SeriesMeta]
    windows: dict[str, Windows]
    report: RegulariseReport | None
    notes: dict[str, list[str]] = field(default_factory=dict)
    native: dict[str, pd.DataFrame] = field(default_factory=dict)
    failed: dict[str, dict] = field(default_factory=dict)
    """series_id -> ``{"stage", "error", "where"}`` of series dropped after an error of their own."""
    fleet: "Prepared | None" = None
    """Every usable series of the source when this run plans a selection of them (``--series``),
    else None. The global models train and predict on :meth:`global_view`, so a selection's
    forecasts are the ones a run of the whole source gives (DESIGN.md: the daily LSTM is global;
    issue 12: a series' plan must not depend on which other series share the run)."""

    def global_view(self) -> "Prepared":
        """The series the global models (:data:`capplan.tasks.GLOBAL_MODELS`) train on: the
        source's (:attr:`fleet`) less the series that failed, or these series."""
        if self.fleet is None:
            return self
        return self.fleet.select([s for s in self.fleet.windows if s not in self.failed])

    def select(self, series_ids) -> "Prepared":
        """The same data for ``series_ids`` only (regularise report and failures shared)."""
        keep = set(series_ids)
        return Prepared(self.h5[self.h5["series_id"].isin(keep)].reset_index(drop=True),
                        self.h1[self.h1["series_id"].isin(keep)].reset_index(drop=True),
                        {s: m for s, m in self.meta.items() if s in keep},
                        {s: w for s, w in self.windows.items() if s in keep}, self.report,
                        {s: n for s, n in self.notes.items() if s in keep},
                        {s: n for s, n in self.native.items() if s in keep}, self.failed)

    def drop(self, stage: str, failures: dict) -> "Prepared":
        """Without the series in ``failures`` (series_id -> :class:`capplan.executor.Failed`),
        which are recorded in :attr:`failed` with the stage they failed in."""
        for sid, f in failures.items():
            self.failed[sid] = {"stage": stage, "error": f.error, "where": f.where}
        out = self.select([s for s in self.windows if s not in failures])
        out.fleet = self.fleet
        return out


@dataclass
class TierResult:
    """One model's rolling forecasts and its 7-day plan forecast (forecast frames, 5-minute grid).

    ``fallbacks`` / ``warnings``: series_id -> messages; ``reused``: series_id ->
    ``{"reused": blocks, "computed": blocks}`` of its rolling-origin refit blocks
    (:mod:`capplan.cache`; empty without a cache)."""

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
    registry models reused / fitted; ``reused``: per series, what was taken from the
    store's cache (:mod:`capplan.cache`): ``{"rolling": {model: {"reused": blocks,
    "computed": blocks}}}``, and ``"search": "reused" | "tuning_reused" | "computed"`` once the search
    stage has run; ``scores``: per series, model -> band -> backtest figures, computed
    where the series was combined (:func:`capplan.tasks.combine_one`; None: not yet,
    :func:`capplan.pipeline.backtest_stage` scores them)."""

    rolling: dict[str, pd.DataFrame]
    final: pd.DataFrame
    final_tiers: dict[str, pd.DataFrame]
    fallbacks: dict[str, list[str]]
    warnings: dict[str, list[str]]
    combination: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)
    reused: dict[str, dict] = field(default_factory=dict)
    scores: dict[str, dict] | None = None
