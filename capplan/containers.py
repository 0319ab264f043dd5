"""The data the pipeline stages hand to each other.

* :class:`Prepared` — regularised history and windows (:func:`capplan.pipeline.regularise_stage`);
* :class:`TierResult` — one model's rolling and plan forecasts (:func:`capplan.pipeline.tier_forecasts`);
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
    ``notes``: series_id -> stated fallbacks/changes.
    """

    h5: pd.DataFrame
    h1: pd.DataFrame
    meta: dict[str, SeriesMeta]
    windows: dict[str, Windows]
    report: RegulariseReport | None
    notes: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class TierResult:
    """One model's rolling forecasts and its 7-day plan forecast (forecast frames, 5-minute grid).

    ``fallbacks`` / ``warnings``: series_id -> messages."""

    name: str
    rolling: pd.DataFrame
    final: pd.DataFrame | None
    fallbacks: dict[str, list[str]]
    warnings: dict[str, list[str]]
    models: dict = field(default_factory=dict)


@dataclass
class Forecasts:
    """``rolling[model]``: rolling-origin forecasts (5-minute grid) over tuning and
    evaluation windows, ``rolling["combined"]`` included; ``final``: the 7-day
    combined plan forecast per series; ``final_tiers``: each tier's own plan forecast;
    ``combination``: per series, how the combination was made; ``models``: per tier,
    registry models reused / fitted."""

    rolling: dict[str, pd.DataFrame]
    final: pd.DataFrame
    final_tiers: dict[str, pd.DataFrame]
    fallbacks: dict[str, list[str]]
    warnings: dict[str, list[str]]
    combination: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)
