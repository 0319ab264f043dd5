"""Model-free levels of a training pool, from empirical quantiles of its own recent demand.

A forecast's day-ahead level carries the forecast's bias from week to week (a week it
under-forecasts is often followed by one it over-forecasts), and a margin tuned on one week
carries that week's bias into the next. The levels here use no forecast: each is an
empirical quantile, in GPUs, of the demand observed before the decision, so they follow a
level shift within :data:`WINDOW` and hold at any pool size (a quantile of ``c x D`` is
``c x`` the quantile of ``D``; no ratio of the level is added).

* **Daily level** (:func:`empirical_day_level`; ``TrainingParams.daily_rule="empirical"``):
  for the day starting at step ``i0``, the hourly maxima of the :data:`WINDOW` before it
  (whole hours ending at ``i0``), and the highest level at least ``share`` of them reach
  (:func:`optimizer.training.newsvendor.exceeded_level`). With ``share`` the spot critical ratio of the
  price book (:func:`optimizer.training.newsvendor.critical_ratios`) this is the newsvendor level of
  :mod:`optimizer.training.newsvendor` with the last :data:`WINDOW` of hours as the demand distribution
  (the sample average approximation of the newsvendor quantile, e.g. Levi, Roundy &
  Shmoys, *Provably near-optimal sampling-based policies for stochastic inventory control
  models*, Math. Oper. Res. 32(4), 2007).
* **Hourly level** (:func:`conformal_hour_level`; ``TrainingParams.topup_quantile="n95"``):
  for the hour whose last observed step before it is ``j``, ``last observed value +`` the
  :data:`LEVEL` quantile of the rises ``demand[s + k] - demand[s]``, ``k = 1 ..`` one hour
  of steps, pooled over the steps ``s`` whose hour ahead is fully observed by ``j``
  (``s + hour <= j``) in the trailing :data:`WINDOW`. Coverage counts intervals, so the
  rise to each interval of the hour is one conformity score: under exchangeability the
  level covers about :data:`LEVEL` of the hour's intervals (split conformal prediction
  with a rolling calibration set, e.g. Angelopoulos & Bates, *A Gentle Introduction to
  Conformal Prediction*, 2021, section 5.3). The naive conformal peer of
  :mod:`optimizer.rivals.peers` scores the rise to the hour's *maximum* instead, which covers
  whole hours and buys more.

Both see only demand observed before the decision (no look-ahead); with no such demand
the level is 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.engine.replay_core import ReplayInput
from optimizer.training.newsvendor import critical_ratios, exceeded_level

LEVEL = 0.95  # the rise quantile of the hourly level: the default coverage target (share of intervals)
WINDOW = pd.Timedelta("7D")  # the trailing window of both levels (a week: every weekday once)


def trailing_max(values: np.ndarray, n: int) -> np.ndarray:
    """Max of ``values[j-n+1 .. j]`` per ``j`` (NaN ignored; NaN where all are NaN)."""
    return pd.Series(values).rolling(n, min_periods=1).max().to_numpy()


def conformal_offset(values: np.ndarray, lead: int, window: int, level: float = LEVEL) -> np.ndarray:
    """Per ``j``: the ``level`` quantile of ``max(values[s+1 .. s+lead]) - values[s]``
    over the changes fully observed by ``j`` (``s + lead <= j``) in the trailing
    ``window`` of them; 0 before the first one. NaN values are skipped."""
    s = pd.Series(values)
    ahead = s[::-1].rolling(lead, min_periods=1).max()[::-1].shift(-1)  # max over s+1 .. s+lead
    change = (ahead - s).shift(lead)  # indexed by the step at which it is fully observed
    q = change.rolling(window, min_periods=1).quantile(level)
    return q.fillna(0.0).to_numpy()


def _steps(span: pd.Timedelta, step_s: int) -> int:
    return max(1, int(span / pd.Timedelta(seconds=step_s)))


def day_level_at(values: np.ndarray, i0: int, step_s: int, share: float, window: pd.Timedelta = WINDOW) -> float:
    """The daily level (GPUs, module docstring) of a day starting at index ``i0`` of ``values``
    (demand in GPUs on a regular ``step_s`` grid, NaN = unknown): from ``values[:i0]`` only."""
    n_hour = _steps(pd.Timedelta("1h"), step_s)
    past = np.asarray(values[max(0, i0 - _steps(window, step_s)):i0], float)
    past = past[len(past) % n_hour:]  # whole hours ending at the day's start
    if len(past) == 0:
        return 0.0
    with np.errstate(all="ignore"):
        maxima = np.nanmax(np.where(np.isfinite(past), past, -np.inf).reshape(-1, n_hour), axis=1)
    return max(exceeded_level(maxima[np.isfinite(maxima)], share), 0.0)


def empirical_day_level(values: np.ndarray, off: int, n_steps: int, step_s: int, share: float,
                        window: pd.Timedelta = WINDOW) -> np.ndarray:
    """Per step of a window of ``n_steps`` starting at ``values[off]`` (days counted from its
    first step, as the replay's daily lookups), the daily level of its day (:func:`day_level_at`;
    GPUs, float array of length ``n_steps``)."""
    n_day = _steps(pd.Timedelta("1D"), step_s)
    out = np.zeros(n_steps)
    for d0 in range(0, n_steps, n_day):
        out[d0:d0 + n_day] = day_level_at(values, off + d0, step_s, share, window)
    return out


def rise_offset(values: np.ndarray, decisions: np.ndarray, lead: int, window: int, level: float = LEVEL
                ) -> np.ndarray:
    """Per decision index ``j`` of ``decisions``: the ``level`` quantile (``method="higher"``: an
    observed rise) of ``values[s + k] - last known value up to s`` for ``k = 1 .. lead``, pooled over
    the ``s`` with ``s + lead <= j`` among the trailing ``window`` steps; 0 with none (NaN skipped)."""
    v = np.asarray(values, float)
    n = len(v)
    last = pd.Series(v).ffill().to_numpy()
    rises = np.full((n, lead), np.nan)
    for k in range(1, min(lead, n - 1) + 1):  # a series shorter than the lead has no rise that far
        rises[:n - k, k - 1] = v[k:] - last[:n - k]
    out = {}
    for j in np.unique(decisions):
        x = rises[max(0, j - lead + 1 - window):max(0, j - lead + 1)].ravel()
        x = x[np.isfinite(x)]
        out[j] = float(np.quantile(x, level, method="higher")) if len(x) else 0.0
    return np.array([out[j] for j in decisions], dtype=float)


def conformal_level(values: np.ndarray, step_s: int, decisions: np.ndarray, window: pd.Timedelta = WINDOW
                    ) -> np.ndarray:
    """Per decision index ``j`` (``decisions``, into ``values``: demand, GPUs), the hourly level decided
    after observing ``values[j]``: the last known value up to ``j`` plus :func:`rise_offset` over one
    hour (module docstring; GPUs; 0 before anything is observed)."""
    n_hour = _steps(pd.Timedelta("1h"), step_s)
    last = pd.Series(values, dtype=float).ffill().fillna(0.0).to_numpy()
    return last[decisions] + rise_offset(values, decisions, n_hour, _steps(window, step_s))


def conformal_hour_level(values: np.ndarray, off: int, times: pd.DatetimeIndex, step_s: int,
                         window: pd.Timedelta = WINDOW) -> np.ndarray:
    """Per step of ``times`` (the window starting at ``values[off]``; hours counted from its
    first step, as the replay's hourly lookups), the hourly level of its hour
    (:func:`conformal_level` at the last step before the hour; GPUs, 0 with nothing before)."""
    if len(times) == 0 or len(values) == 0:
        return np.zeros(len(times))
    h = np.asarray((times - times[0]) // pd.Timedelta("1h"), dtype=int)
    j = off + np.searchsorted(h, h) - 1
    ok = j >= 0
    out = np.zeros(len(times))
    if ok.any():
        out[ok] = conformal_level(values, step_s, j[ok], window)
    return out


def with_empirical_levels(inp: ReplayInput, daily_rule: str, topup: str, interruption_rate: float,
                          recovery_s: int) -> None:
    """Fill ``inp.day_empirical`` (when ``daily_rule`` is ``empirical``) and ``inp.hour_max["n95"]``
    (when ``topup`` is ``n95``) from its history before the window and its demand, once per input
    (a replay input serves one price book and one set of interruption terms). The daily share is the
    spot critical ratio of ``inp.price`` with these interruption terms
    (:func:`optimizer.training.newsvendor.critical_ratios`)."""
    before = inp.history_before if inp.history_before is not None else np.array([])
    values = np.concatenate([np.asarray(before, float), np.asarray(inp.demand, float)])
    if daily_rule == "empirical" and inp.day_empirical is None:
        share = critical_ratios(inp.price, interruption_rate, recovery_s)["spot"]
        inp.day_empirical = empirical_day_level(values, len(before), len(inp.times), inp.step_s, share)
    if topup == "n95" and "n95" not in inp.hour_max:
        inp.hour_max["n95"] = conformal_hour_level(values, len(before), inp.times, inp.step_s)


__all__ = ["LEVEL", "WINDOW", "conformal_hour_level", "conformal_level", "conformal_offset", "day_level_at",
           "empirical_day_level", "rise_offset", "trailing_max", "with_empirical_levels"]
