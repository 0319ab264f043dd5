"""Calibrated daily level of a training pool: the day's p50 hour maxima plus the forecast's own recent errors.

The daily spot (and daily on-demand) layer of a training pool (:mod:`optimizer.engine.replay`) can be
sized from a forecast quantile times a ``headroom``. A headroom is a ratio of the level: 20 % of
10 GPUs is 2 GPUs, 20 % of 3,300 is 660, whatever the forecast's error at either scale. The
calibrated rule (``TrainingParams.daily_rule="calibrated"``) has no headroom: it sizes the day
from the distribution the forecast's own realised errors give, in GPUs.

For the day starting at ``D`` (days counted from the replay window's first step, as every daily
lookup of the replay):

* ``p50_h``, ``h = 0 .. 23``: the maxima of the p50 column over the day's hours, from the latest
  combined forecast issued before ``D`` (:func:`optimizer.engine.replay_core.latest_before`);
* the errors: for every hour ``j`` of the :data:`WINDOW` (7 days) before ``D`` that ended at
  least one hour before ``D`` (as :mod:`optimizer.training.calibrated`: an hour's maximum is known one hour
  after it ends), ``e_j = ceil(max demand of hour j) - p50_j``, with ``p50_j`` from the forecast
  that sized hour ``j``'s own day;
* the level = the highest value at least ``share`` of the pooled set ``{p50_h + e_j}`` (all
  pairs) reach (:func:`optimizer.training.newsvendor.exceeded_level`), with ``share`` the spot critical ratio
  of the price book (:func:`optimizer.training.newsvendor.critical_ratios`). This is the newsvendor level of
  :mod:`optimizer.training.newsvendor` with the day's hour maxima distributed as the forecast plus its
  realised errors: the sample average approximation of the newsvendor quantile (Levi, Roundy &
  Shmoys, *Provably near-optimal sampling-based policies for stochastic inventory control
  models*, Math. Oper. Res. 32(4), 2007) over a rolling calibration set (split conformal
  prediction, e.g. Angelopoulos & Bates, *A Gentle Introduction to Conformal Prediction*, 2021,
  section 5.3).

**Day types.** Training demand follows the working week: people submit jobs on weekdays, and a weekend can run far below
the week or not. A forecast fitted on a few weeks learns that pattern only in part, so its errors have another centre on
weekdays than at weekends, and a window that pools them sizes every day from the mixture: the weekend too high, the
weekdays too low (docs/method.md, "Measured on the sample: the calibrated daily level"). The spread differs too: errors
in GPUs grow with the level, and a weekend that runs well below the week misses by less. So with the pool's ``timezone``
(:func:`weekend_days`: a day is a weekend day when its midpoint falls on a Saturday or Sunday there) a day is calibrated
on the errors of its own type only (:func:`day_type_errors`), Mondrian conformal prediction with the day type as the
category (Vovk, Gammerman & Shafer, *Algorithmic Learning in a Random World*, 2005, section 4.5). A week holds two
weekend days, about 47 errors: too few for a far tail, enough for the quantile the level takes, which sits near the
centre (the spot critical ratio is the share of pairs that reach it). Moving the weekday errors onto the weekend's
median instead would keep the weekdays' wider spread in the weekend's set. A type with fewer than :data:`MIN_ERRORS`
errors in the window leaves the set as it is (stated by the caller), and so does a window whose demand is intermittent
(:func:`optimizer.training.intermittent.is_intermittent`: most of its steps idle). There most errors are those of idle
hours, and a type's errors say where one week's bursts fell, not how the week runs: a day-type split would size the next
days for bursts that may not come back. A pool whose demand does not depend on the day type calibrates each day on a
smaller sample of the same distribution, and its level moves within that noise
(``tests/optimizer/training/test_calibrated_day.py``).

A level of ``c x D`` is ``c x`` the level of ``D`` when the forecast scales with the demand: the
rule holds at any pool size.

**Fallback (stated by the caller, :func:`optimizer.engine.inputs.replay_input`):** a day with fewer than
:data:`optimizer.training.calibrated.MIN_ERRORS` (a day of them as they can be known) past errors uses the p90
newsvendor level of the same forecast (:data:`optimizer.training.calibrated.FALLBACK`); a day with no forecast
is NaN, which the replay fills as it fills every daily lookup. The plan's next day (:func:`plan_level`)
uses the errors of the :data:`WINDOW` before the evaluation window's end, those of that day's type,
carried in ``TrainingParams.day_errors_gpus``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from optimizer.engine.replay_core import latest_before
from optimizer.training.adaptive import hour_peaks
from optimizer.training.calibrated import FALLBACK, MIN_ERRORS, NAMES, WINDOW
from optimizer.training.intermittent import is_intermittent
from optimizer.training.newsvendor import exceeded_level

HOUR = pd.Timedelta("1h")


def pooled_level(p50_hours: np.ndarray, errors: np.ndarray, share: float) -> float:
    """The calibrated level (GPUs, module docstring) of one day: the highest value at least ``share``
    of ``{p50_hours[h] + errors[j]}`` (every pair; NaN skipped) reach, clipped at 0; NaN when either
    array has no finite value."""
    p = np.asarray(p50_hours, float)
    e = np.asarray(errors, float)
    p, e = p[np.isfinite(p)], e[np.isfinite(e)]
    if len(p) == 0 or len(e) == 0:
        return float("nan")
    return max(exceeded_level((p[:, None] + e[None, :]).ravel(), share), 0.0)


def day_hour_maxima(forecasts: pd.DataFrame, day_starts: pd.DatetimeIndex, q: str = "p50") -> np.ndarray:
    """``(len(day_starts), 24)`` float array: per day, the maxima of column ``q`` over its hours in
    the latest forecast issued before the day began (NaN where that forecast holds no row of the hour,
    or there is none)."""
    out = np.full((len(day_starts), 24), np.nan)
    if forecasts.empty or len(day_starts) == 0:
        return out
    issued, k_of = latest_before(forecasts, day_starts)
    by_issue = dict(tuple(forecasts.groupby("issued_at")))
    for i, ds in enumerate(day_starts):
        if k_of[i] < 0:
            continue
        g = by_issue[issued[k_of[i]]]
        g = g[(g["timestamp"] >= ds) & (g["timestamp"] < ds + pd.Timedelta("1D"))]
        if len(g):
            h = ((g["timestamp"] - ds) // HOUR).to_numpy()
            np.fmax.at(out[i], h, g[q].to_numpy(dtype=float))
    return out


def weekend_days(day_starts: pd.DatetimeIndex, timezone: str) -> np.ndarray:
    """Per day (24 hours from each of ``day_starts``, tz-aware): whether its midpoint falls on a Saturday or a
    Sunday in ``timezone`` (an IANA name, the pool's ``SeriesMeta.timezone``). Bool array."""
    mid = (pd.DatetimeIndex(day_starts) + pd.Timedelta("12h")).tz_convert(timezone)
    return np.asarray(mid.dayofweek >= 5)


def day_type_errors(errors: np.ndarray, weekend: np.ndarray, target: bool) -> tuple[np.ndarray, bool]:
    """The errors (GPUs) a day of type ``target`` (True: weekend) is calibrated on, module docstring: those of
    its own type only. ``weekend``: per error, its day's type. Returns ``(errors, typed)``; all the errors
    and False when either type has fewer than :data:`MIN_ERRORS` finite errors."""
    e = np.asarray(errors, float)
    g = np.asarray(weekend, bool)
    same, other = e[g == target], e[g != target]
    if np.isfinite(same).sum() < MIN_ERRORS or np.isfinite(other).sum() < MIN_ERRORS:
        return e, False
    return same, True


class DayLevels(NamedTuple):
    """What :func:`calibrated_day_level` returns: ``level`` per step (GPUs; NaN: no forecast for the day),
    ``fell_back`` (days of the window sized at the p90 newsvendor level, fewer than :data:`MIN_ERRORS` past
    errors), ``next_errors`` (GPUs: the errors a day starting at the hour after the window's last step's would
    pool, of its day type, what the plan's next day is sized with, :func:`plan_level`) and
    ``untyped`` (days of the window calibrated on every error of the week, not their type's: one type had less
    than a day of errors, the week before was intermittent, or no ``timezone`` was given)."""

    level: np.ndarray
    fell_back: int
    next_errors: np.ndarray
    untyped: int


def calibrated_day_level(forecasts: pd.DataFrame, actual: pd.Series, times: pd.DatetimeIndex,
                         start: pd.Timestamp, end: pd.Timestamp, share: float,
                         timezone: str | None = None) -> DayLevels:
    """The calibrated daily level (GPUs, module docstring) per step of ``times`` (the window
    ``[start, end]``; days counted from ``start``), as a :class:`DayLevels`.

    ``forecasts``: the series' combined rolling forecasts (forecast frame); ``actual``: its demand
    indexed by timestamp (the history before ``start`` included); ``share``: the spot critical ratio;
    ``timezone``: the pool's (IANA name), which says which days are weekend days for the day-type split
    (:func:`day_type_errors`); None pools every error of the week.
    """
    n_back = int(WINDOW / pd.Timedelta("1D"))
    day_starts = pd.date_range(start - WINDOW, end, freq="1D")
    p50 = day_hour_maxima(forecasts, day_starts)
    p90 = day_hour_maxima(forecasts, day_starts, FALLBACK)
    err = (hour_peaks(actual, day_starts[0], 24 * len(day_starts)).reshape(-1, 24) - p50).ravel()
    weekend = weekend_days(day_starts, timezone) if timezone else None
    hour_type = np.repeat(weekend, 24) if weekend is not None else None

    def pooled(lo: int, hi: int, day_start: pd.Timestamp, is_weekend) -> tuple[np.ndarray, bool]:
        past = err[max(0, lo):max(0, hi)]
        if weekend is None or is_intermittent(actual[(actual.index >= day_start - WINDOW)
                                                     & (actual.index < day_start - HOUR)].to_numpy()):
            return past, False
        return day_type_errors(past, hour_type[max(0, lo):max(0, hi)], bool(is_weekend))

    n_win = int(WINDOW / HOUR)
    levels = np.full(len(day_starts), np.nan)
    fell_back = untyped = 0
    for i in range(n_back, len(day_starts)):
        # the hours that ended at least one hour before the day
        past, typed = pooled(24 * i - n_win, 24 * i - 1, day_starts[i], weekend is not None and weekend[i])
        if np.isfinite(past).sum() >= MIN_ERRORS:
            levels[i] = pooled_level(p50[i], past, share)
            untyped += not typed
        elif np.isfinite(p90[i]).any():
            levels[i] = max(exceeded_level(p90[i], share), 0.0)
            fell_back += 1
    idx = day_starts.searchsorted(times, side="right") - 1
    nxt = int((pd.Timestamp(end) - day_starts[0]) // HOUR) + 1  # the hour after the window's last step's
    nxt_start = day_starts[0] + nxt * HOUR  # the plan's next day begins at that hour
    nxt_weekend = weekend is not None and weekend_days(pd.DatetimeIndex([nxt_start]), timezone)[0]
    nxt_errors = pooled(nxt - n_win, nxt - 1, nxt_start, nxt_weekend)[0]
    return DayLevels(levels[idx], fell_back, nxt_errors, untyped)


def plan_level(p50_hours: np.ndarray, p90_hours: np.ndarray, errors: list[float] | None, share: float) -> float:
    """The plan's next-day calibrated level (GPUs): :func:`pooled_level` of the plan forecast's p50 hour
    maxima and ``errors`` (``TrainingParams.day_errors_gpus``), or, with fewer than :data:`MIN_ERRORS`
    finite errors, the p90 newsvendor level, as the replay falls back."""
    e = np.asarray(errors if errors is not None else [], float)
    if np.isfinite(e).sum() >= MIN_ERRORS:
        level = pooled_level(p50_hours, e, share)
        return 0.0 if np.isnan(level) else level
    return max(exceeded_level(np.asarray(p90_hours, float), share), 0.0)


def next_day_errors(inp) -> list[float] | None:
    """The errors (GPUs, rounded to 0.01, finite only) a :class:`optimizer.engine.replay_core.ReplayInput`'s
    next day after its window would pool (``inp.day_errors``), for ``TrainingParams.day_errors_gpus``;
    None when the input has none."""
    if inp.day_errors is None:
        return None
    e = np.asarray(inp.day_errors, float)
    return [round(float(x), 2) for x in e[np.isfinite(e)]]


def with_plan_terms(params, inp):
    """``params`` (a :class:`optimizer.plan.policy.TrainingParams`, or inference params, returned as they are)
    with what the plan's next period needs from the end of ``inp``'s window (a ReplayInput): a calibrated
    top-up (``c80``/``c90``/``c95``/``a95``) the margin of the last replayed hour (``topup_margin_gpus``, None
    where it fell back to p90), a calibrated daily rule the errors :func:`next_day_errors` pools."""
    d = params.model_dump()
    if d.get("topup_quantile") in NAMES:
        m = inp.topup_margin.get(d["topup_quantile"])
        last = float(m[-1]) if m is not None and len(m) and np.isfinite(m[-1]) else None
        params = params.model_copy(update={"topup_margin_gpus": last})
    if d.get("daily_rule") == "calibrated":
        params = params.model_copy(update={"day_errors_gpus": next_day_errors(inp)})
    return params


__all__ = ["FALLBACK", "MIN_ERRORS", "WINDOW", "DayLevels", "calibrated_day_level", "day_hour_maxima",
           "day_type_errors", "weekend_days", "next_day_errors", "plan_level", "with_plan_terms",
           "pooled_level"]
