"""Robust members of the combination: the recent median level, the last value reverting to it, a daily profile.

Why (a combination that leaves naive when the evidence is there)
    GPU demand is step-shaped: it holds a level for hours or days, then jumps,
    and often falls back. Past a few hours the last value (naive) carries the
    noise of the moment it was read, while the median of the last days is a
    steadier guess of where the series will sit. MASE scores absolute errors,
    for which the conditional *median* is the optimal point forecast (Gneiting
    2011, "Making and evaluating point forecasts"), so these members use
    medians, never means. They are members of the combination
    (:data:`forecasting.combining.assemble.ROLLING_MODELS`), not tiers: the tiers stay the
    models the design card names (ETS hourly, LSTM daily, Prophet weekly).

Point forecasts at an origin with history ``y[..T]`` (5-minute grid, GPUs or replicas), lead ``h`` steps
    * ``level``: ``m = median(y[T - 3 days + 5 min .. T])``, flat (the median
      of the last :data:`LEVEL_DAYS` days);
    * ``revert``: ``y[T] + (1 - exp(-h / tau)) * (m1 - y[T])`` with ``m1`` the
      median of the last :data:`REVERT_DAYS` day and ``tau`` = :data:`REVERT_TAU`:
      the forecast of a first-order autoregression around a local level
      (Hyndman & Athanasopoulos, *FPP3* §9.3: an AR(1)'s forecasts decay
      geometrically from the last value to the mean; ``exp(-1 / tau)`` per step);
    * ``profile``: the median, over the last :data:`PROFILE_DAYS` days, of the
      value at the target's time of day: ``median_k y[T + h - 288 (ceil(h / 288) + k)]``,
      ``k = 0 .. 6`` (seasonal-naive with one day's lag is the case of one day;
      the median over a week keeps the daily cycle and drops one day's noise).

Quantiles: the point plus the empirical quantiles of the change over ``h``
steps in the history (:func:`forecasting.tiers.naive.naive_quantiles`'s
spread around the last value). The combination's bands are re-centred by the
calibration (:mod:`forecasting.combining.conformal`), so these matter only before it
has errors to work with.

Choices. Candidates (medians of the last 6 h, 1, 3 and 7 days; the 7-day
profile; the 2-week hour-of-week profile; last value plus the profile's
change; reversion to the 1- or 3-day median) were compared on the sample's
tuning windows (the week before each evaluation window), as members of the
combination, by the median MASE over the best of naive, seasonal-naive and
default Prophet at 24 h and 7 d; the 3-day level, the 1-day reversion and the
7-day profile did best together (the figures: docs/method.md, "Measured on the
sample: robust members"). The evaluation windows and the held-out traces were
never used to choose.
"""

from __future__ import annotations

import numpy as np

from forecasting.tiers.naive import HistoryRule, naive_quantiles
from forecasting.types import STEPS_PER_DAY

DAY_STEPS = STEPS_PER_DAY  #: 5-minute steps per day
LEVEL_DAYS = 3.0  #: ``level``: days of history its median is taken over
REVERT_DAYS = 1.0  #: ``revert``: days of history the level it reverts to is the median of
REVERT_TAU = 1.0  #: ``revert``: e-folding time of the pull toward that level, in days
PROFILE_DAYS = 7  #: ``profile``: past days whose values at the same time of day it takes the median of


def recent_median(y: np.ndarray, days: float) -> float:
    """Median of the non-missing values of the last ``days`` days of ``y`` (5-minute
    steps); NaN when there are none."""
    tail = y[-max(1, int(round(days * DAY_STEPS))):]
    tail = tail[np.isfinite(tail)]
    return float(np.median(tail)) if len(tail) else float("nan")


def reverting_point(last: float, level: float, horizon: int, tau_days: float) -> np.ndarray:
    """``(horizon,)`` points ``last + (1 - exp(-h / tau)) * (level - last)`` for ``h = 1..horizon``
    (steps of 5 minutes; ``tau_days`` in days; ``tau_days = 0`` gives ``level`` flat)."""
    h = np.arange(1, horizon + 1, dtype="float64")
    pull = 1.0 - np.exp(-h / (tau_days * DAY_STEPS)) if tau_days > 0 else np.ones(horizon)
    return last + pull * (level - last)


def robust_quantiles(y: np.ndarray, horizon: int, level_days: float, tau_days: float) -> np.ndarray:
    """``(horizon, 4)`` quantiles (0.5, 0.9, 0.95, 0.99) of a robust member (module docstring):
    the last value pulled toward the median of the last ``level_days`` days with e-folding
    time ``tau_days`` (0: the median, flat), plus naive's spread. The last value when the
    history holds no observation in that span; zeros when it holds none at all."""
    q = naive_quantiles(y, horizon)
    y = np.asarray(y, dtype="float64")
    obs = y[np.isfinite(y)]
    if not len(obs):
        return q
    m = recent_median(y, level_days)
    if not np.isfinite(m):
        return q
    point = reverting_point(float(obs[-1]), m, horizon, tau_days)
    return q - q[:, :1] + point[:, None]


def profile_point(y: np.ndarray, horizon: int, days: int = PROFILE_DAYS) -> np.ndarray:
    """``(horizon,)`` medians over the last ``days`` days of the value at each target's time of
    day (module docstring); a step with no such value in the history is NaN."""
    y = np.asarray(y, dtype="float64")
    h = np.arange(1, horizon + 1)
    first = np.ceil(h / DAY_STEPS).astype(int)
    idx = len(y) - 1 + h[:, None] - DAY_STEPS * (first[:, None] + np.arange(days)[None, :])
    vals = np.where(idx >= 0, y[np.clip(idx, 0, None)], np.nan)
    out = np.full(horizon, np.nan)
    ok = np.isfinite(vals).any(axis=1)
    out[ok] = np.nanmedian(vals[ok], axis=1)
    return out


def profile_quantiles(y: np.ndarray, horizon: int, days: int = PROFILE_DAYS) -> np.ndarray:
    """``(horizon, 4)`` quantiles of ``profile``: :func:`profile_point` (the last value where it
    is NaN) plus naive's spread; zeros when the history holds no observation."""
    q = naive_quantiles(y, horizon)
    if not np.isfinite(np.asarray(y, dtype="float64")).any():
        return q
    point = profile_point(y, horizon, days)
    point = np.where(np.isfinite(point), point, q[:, 0])
    return q - q[:, :1] + point[:, None]


class _Robust(HistoryRule):
    """History medians on the 5-minute grid, 7 days ahead; nothing to fit (:class:`HistoryRule`)."""

    step = "5min"
    horizon = 2016
    level_days: float = LEVEL_DAYS
    tau_days: float = 0.0

    def quantiles(self, y: np.ndarray) -> np.ndarray:
        """``(horizon, 4)`` quantiles from the history ``y`` up to the origin."""
        return robust_quantiles(y, self.horizon, self.level_days, self.tau_days)


class Level(_Robust):
    """The median of the last :data:`LEVEL_DAYS` days, flat (module docstring)."""

    level_days = LEVEL_DAYS
    tau_days = 0.0


class Revert(_Robust):
    """The last value reverting to the median of the last :data:`REVERT_DAYS` day with
    e-folding time :data:`REVERT_TAU` days (module docstring)."""

    level_days = REVERT_DAYS
    tau_days = REVERT_TAU


class Profile(_Robust):
    """The median over the last :data:`PROFILE_DAYS` days at each target's time of day (module docstring)."""

    def quantiles(self, y: np.ndarray) -> np.ndarray:
        return profile_quantiles(y, self.horizon)
