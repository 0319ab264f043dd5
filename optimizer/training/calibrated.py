"""Calibrated hourly top-up: the fresh p50 forecast plus a margin learnt from its own recent misses.

The hourly on-demand top-up of a training pool (:mod:`optimizer.engine.replay`) can
size itself from a fixed forecast quantile (``p90`` ...) times a headroom. Those
quantiles are only as well calibrated as the forecast, and a headroom tuned on
one week carries that week's error to the next. The calibrated choice instead
adds to the fresh p50 hour maximum (:func:`optimizer.training.fresh_hour.refreshed_hour_max`)
the empirical ``level`` quantile of that forecast's recent errors:

* error of hour ``j`` = ``ceil(max demand of hour j) - fresh p50 max of hour j`` (GPUs);
* for the hour starting at ``h``, the errors of the hours ``j`` that ended at
  least one hour before ``h`` (hour ``h - 1`` is not fully observed when ``h``
  is decided, :mod:`optimizer.training.fresh_hour`), over the trailing :data:`WINDOW`
  (7 days; split conformal prediction with a rolling calibration set, e.g.
  Angelopoulos & Bates, *A Gentle Introduction to Conformal Prediction*, 2021,
  section 5.3);
* the top-up level = ``fresh p50 max + that quantile`` (``method="higher"``: an
  observed error, never an interpolation), clipped at 0.

**Fallback (stated by the caller):** with fewer than :data:`MIN_ERRORS` past errors the hour
uses the fresh p90 maximum instead. :data:`MIN_ERRORS` = 23 is one day of errors as they can be
known: a day of forecasts yields 23 by the end of that day, since its last hour's maximum is known
only an hour after it ends (with 24 the day after a series' first day of forecasts always fell back,
for the daily level of :mod:`optimizer.training.calibrated_day` too).

Levels are named ``c80``, ``c90``, ``c95`` (:data:`LEVELS`), and ``a95`` is the adaptive
level of :mod:`optimizer.training.adaptive` (the quantile chosen online to cover 95 % of intervals, raised to ``c95`` in
hours where that costs at most 1 % of the level); the replay reads
them from ``ReplayInput.hour_max`` like the forecast quantiles. The plan's
next-hour top-up adds the margin of the last hour replayed
(``TrainingParams.topup_margin_gpus``, from ``ReplayInput.topup_margin``) to
the plan's p50.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.training.adaptive import INSURANCE, TARGETS, adaptive_levels, hour_peaks, hour_values, insured
from optimizer.training.fresh_hour import refreshed_hour_max

LEVELS = {"c80": 0.80, "c90": 0.90, "c95": 0.95}
# every calibrated top-up: the fixed levels and the adaptive one (optimizer.training.adaptive)
NAMES = (*LEVELS, *TARGETS)
WINDOW = pd.Timedelta("7D")
MIN_ERRORS = 23  # one day of errors as they can be known (module docstring)
FALLBACK = "p90"


def hour_errors(forecasts: pd.DataFrame, actual: pd.Series, hour_starts: pd.DatetimeIndex
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per hour of ``hour_starts`` (consecutive, 1 h apart): the fresh p50 and p90
    maxima (GPUs, NaN without a forecast) and the error ``ceil(max demand) - p50``
    (NaN where either is unknown). ``actual``: demand indexed by timestamp."""
    n = len(hour_starts)
    end = hour_starts[-1] + pd.Timedelta("1h") if n else None
    steps = actual.index[(actual.index >= hour_starts[0]) & (actual.index < end)] if n else actual.index[:0]
    fresh = refreshed_hour_max(forecasts, steps, hour_starts, actual)  # on the data's own grid
    k = hour_starts.searchsorted(steps, side="right") - 1
    p50, p90 = np.full(n, np.nan), np.full(n, np.nan)
    p50[k[::-1]], p90[k[::-1]] = fresh["p50"][::-1], fresh[FALLBACK][::-1]  # each hour's first step
    peak = hour_peaks(actual, hour_starts[0], n) if n else np.full(0, np.nan)
    return p50, p90, peak - p50


def calibrated_levels(p50: np.ndarray, p90: np.ndarray, err: np.ndarray, n_window: int
                      ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per hour, each level of :data:`LEVELS` (module docstring): ``p50 + the
    level's quantile of err[h - n_window .. h - 2]``, or ``p90`` with fewer than
    :data:`MIN_ERRORS` errors. Returns ``(levels, margins)``: the margins (GPUs)
    added to p50, NaN for the hours that fell back to p90."""
    n = len(p50)
    out = {name: np.full(n, np.nan) for name in LEVELS}
    margin = {name: np.full(n, np.nan) for name in LEVELS}
    for h in range(n):
        past = err[max(0, h - n_window):max(0, h - 1)]
        past = past[np.isfinite(past)]
        for name, a in LEVELS.items():
            if len(past) < MIN_ERRORS:
                out[name][h] = p90[h]
            else:
                margin[name][h] = float(np.quantile(past, a, method="higher"))
                out[name][h] = max(0.0, p50[h] + margin[name][h])
    return out, margin


def calibrated_hour_max(forecasts: pd.DataFrame, actual: pd.Series, times: pd.DatetimeIndex,
                        start: pd.Timestamp, end: pd.Timestamp, floor=None
                        ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """The calibrated top-up levels per time step of ``times`` (a window ``[start,
    end]``), with hours counted from ``start`` as the replay does; errors come from
    the :data:`WINDOW` before each hour, before ``start`` included. Returns
    ``(level name -> float array aligned with times, level name -> margin per step
    (NaN: fell back), hours of the window with a forecast that fell back to p90)``. ``floor(hours)``:
    the capacity (GPUs, per hour of ``hours``) held below the top-up, which the adaptive levels count
    as covering (:func:`optimizer.training.adaptive.adaptive_levels`); None: none."""
    n_window = int(WINDOW / pd.Timedelta("1h"))
    hours = pd.date_range(start - WINDOW, end, freq="1h")
    p50, p90, err = hour_errors(forecasts, actual, hours)
    lv, mg = calibrated_levels(p50, p90, err, n_window)
    values = hour_values(actual, hours)
    for name, target in TARGETS.items():  # the adaptive levels (optimizer.training.adaptive), with cheap cover
        lv[name], mg[name], _ = adaptive_levels(p50, p90, err, values, n_window, MIN_ERRORS, target,
                                                floor=None if floor is None else floor(hours))
        lv[name], mg[name], _ = insured(lv[name], mg[name], lv[INSURANCE], mg[INSURANCE], p50)
    idx = hours.searchsorted(times, side="right") - 1
    first = next(iter(LEVELS))
    fell_back = int((np.isnan(mg[first][n_window:]) & np.isfinite(p90[n_window:])).sum())
    return {k: v[idx] for k, v in lv.items()}, {k: v[idx] for k, v in mg.items()}, fell_back
