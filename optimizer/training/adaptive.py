"""Adaptive calibrated top-up: the error quantile that keeps the hour's intervals covered at the target.

The calibrated top-ups of :mod:`optimizer.training.calibrated` add to the fresh p50 hour maximum a fixed
quantile (80, 90 or 95 %) of the forecast's recent errors against the *hour's maximum*. Coverage
counts *intervals* (5-minute steps), and how many of an hour's intervals lie below its maximum
depends on the pool: a flat pool's steps sit near the hour's maximum, a bursty pool's well below.
So no fixed error quantile gives the same interval coverage on every pool, and choosing one of
them on a tuning week is a guess.

The adaptive level (``topup_quantile="a95"``) chooses the error quantile ``beta`` online, by
adaptive conformal inference (Gibbs & Candès, *Adaptive Conformal Inference Under Distribution
Shift*, NeurIPS 2021): after each hour is observed, ``beta`` moves by ``GAMMA x (target - the
hour's interval coverage)``, so it rises after hours with misses and falls after hours covered
with room to spare, and the long-run share of covered intervals tends to ``target`` (0.95, the
coverage target) whatever the errors' distribution:

* hour ``h``'s level = ``fresh p50 max + the beta_h quantile of err[h - WINDOW .. h - 2]``
  (linearly interpolated between order statistics, :data:`QUANTILE_METHOD`; the errors of
  :mod:`optimizer.training.calibrated`), clipped at 0;
* ``beta_{h+1} = clip(beta_h + GAMMA x (target - coverage of hour h - 1), 0, 1)``, the coverage of
  the newest hour that ended at least one hour before ``h + 1`` began (an hour's demand is known
  one hour after it ends, as for the errors); hour coverage = the share of its known steps covered
  by ``max(ceil(level), floor)``, where ``floor`` is the capacity held below the top-up, smoothed
  (:func:`smooth_coverage`: a step above the floor is covered when ``ceil(level) >= demand``, an
  indicator that jumps at ``level = demand - 1``; it counts instead a ramp :data:`RAMP` = 1 GPU wide
  centred on that jump). The
  replay input (:func:`optimizer.engine.inputs.replay_input`) passes the calibrated daily layer
  (:mod:`optimizer.training.calibrated_day`), so ``a95`` keeps 95 % of intervals covered by the calibrated
  rule of :mod:`optimizer.rivals.incumbent` (the day at the calibrated level plus this top-up). Beside
  another daily rule the top-up is the same, and covers what that rule's day layer leaves to it
  only as far as the two layers agree;
* **cheap cover** (:func:`insured`): in an hour where the fixed ``c95`` level (the 95 % quantile of the
  same errors, :mod:`optimizer.training.calibrated`) lies above the adaptive level by at most
  :data:`INSURANCE_SHARE` of the hour's p50 maximum, the hour takes ``c95`` instead. ``beta`` keeps
  learning from the adaptive level's own coverage, so the raise changes no later hour's ``beta``;
* ``beta`` starts at :data:`BETA0` at the first hour of the errors' window (7 days before the
  replay window), so it has adapted over a week before the first decision scored.

:data:`GAMMA` = 0.05 per hour: a week (168 hours) of coverage 0.05 below the target moves ``beta``
by 0.42, so the level follows a change of regime within days; Gibbs & Candès's bound on the
long-run coverage error, ``(max(beta_1, 1 - beta_1) + GAMMA) / (GAMMA x T)``, is then below 0.03
after four weeks of hours. Hours that fall back (fewer than a day of errors) use p90, as the fixed
levels, and do not update ``beta``.

**Why a smooth update.** With the indicator and the order statistic (``method="higher"``), ``beta``'s path jumps: a p50
that moves by a tenth of a GPU flips one hour's whole-GPU coverage, ``beta`` moves by ``GAMMA / 12``, the level moves to
another order statistic of the errors (several GPUs apart in their tail), and the paths never meet again: forecasts
refitted with another seed, nearly equal, could move a pool's top-up margin by GPUs a day. With the ramp and the
interpolated quantile the level is continuous in the forecast, and ACI's feedback (more coverage, lower ``beta``) damps
a difference instead of keeping it (the figures: docs/method.md, "Measured on the sample: the adaptive top-up"). The
ramp is centred, so over hours whose levels fall anywhere within a GPU it counts what the indicator counts on average,
and the long-run coverage stays at the target (``tests/optimizer/training/test_adaptive.py``).

**Why cheap cover.** ACI holds the long-run share, not each week's: over calm hours ``beta`` falls, and
the week after can miss (as on a large flat pool, ``benchmarks.earth_pool``). Where the errors are narrow
next to the level, as on a large flat pool, the fixed ``c95`` level costs a few GPUs in thousands and holds the
week; where they are wide, as on a small bursty pool, the same raise
costs a large share of the bill and the adaptive level stands. :data:`INSURANCE_SHARE` = 1 % of the
level bounds the premium at about 1 % of the top-up hours' cost. Under the default objective
(:mod:`optimizer.search.objective`: 0.5 x a window of mean demand on demand per point of coverage below
target) that premium is worth about 0.02 points of coverage, so it pays for itself if it averts any
real miss.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TARGETS = {"a95": 0.95}  # level name -> target share of covered intervals
GAMMA = 0.05
BETA0 = 0.8
INSURANCE = "c95"  # the fixed calibrated level an hour may take instead when it is cheap (module docstring)
INSURANCE_SHARE = 0.01  # ... at most this share of the hour's p50 maximum above the adaptive level
RAMP = 1.0  #: width (GPUs) of the smoothed coverage's ramp (smooth_coverage)
QUANTILE_METHOD = "linear"  #: numpy.quantile's method for the error quantile: continuous in beta


def hour_values(actual: pd.Series, hour_starts: pd.DatetimeIndex) -> list[np.ndarray]:
    """Per hour of ``hour_starts`` (consecutive, 1 h apart), the known demand of its steps (GPUs; float
    array, possibly empty). ``actual``: demand indexed by timestamp."""
    n = len(hour_starts)
    if n == 0:
        return []
    m = (actual.index >= hour_starts[0]) & (actual.index < hour_starts[-1] + pd.Timedelta("1h"))
    v = actual.to_numpy(dtype=float)[m]
    k = np.asarray((actual.index[m] - hour_starts[0]) // pd.Timedelta("1h"), dtype=int)
    ok = np.isfinite(v)
    order = np.argsort(k[ok], kind="stable")
    kk, vv = k[ok][order], v[ok][order]
    cuts = np.searchsorted(kk, np.arange(n + 1))
    return [vv[cuts[i]:cuts[i + 1]] for i in range(n)]


def hour_peaks(actual: pd.Series, first_hour: pd.Timestamp, n_hours: int) -> np.ndarray:
    """Per hour ``first_hour + k``, ``k < n_hours``: the ceiling of the demand's maximum over its known steps
    (GPUs; float array, NaN with no known demand), from :func:`hour_values`. ``actual``: demand indexed by
    UTC timestamp."""
    vals = hour_values(actual, pd.date_range(first_hour, periods=n_hours, freq="1h"))
    return np.array([np.ceil(v.max() - 1e-9) if len(v) else np.nan for v in vals], dtype=float)


def smooth_coverage(level: float, values: np.ndarray, floor: float = 0.0) -> float:
    """The share of an hour's steps ``values`` (GPUs, whole) that the top-up ``level`` (GPUs) covers,
    smoothed (module docstring): a step at or below ``floor`` counts 1; else ``clip(level - (v - 1) +
    RAMP / 2, 0, 1)`` with :data:`RAMP` = 1 GPU, i.e. the indicator ``ceil(level) >= v`` (which jumps at
    ``level = v - 1``) replaced by a ramp one GPU wide centred on that jump."""
    v = np.asarray(values, dtype=float)
    credit = np.clip(level - (v - 1.0) + RAMP / 2.0, 0.0, 1.0)
    return float(np.where(v <= floor + 1e-9, 1.0, credit).mean())


def adaptive_levels(p50: np.ndarray, p90: np.ndarray, err: np.ndarray, values: list[np.ndarray], n_window: int,
                    min_errors: int, target: float, gamma: float = GAMMA, beta0: float = BETA0,
                    floor: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per hour (module docstring): ``(level, margin over p50 (NaN: fell back to p90), beta used)``, GPUs
    and quantile levels. ``p50``/``p90``: the fresh hour maxima; ``err``: ``ceil(hour max) - p50``;
    ``values``: each hour's known demand (:func:`hour_values`); ``n_window``: hours of errors pooled;
    ``min_errors``: fewer past errors than this fall back to p90; ``floor``: per hour, the capacity (GPUs)
    held below the top-up (the day's layer), counted in the hour's coverage (NaN or None: 0)."""
    n = len(p50)
    level, margin, used = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    beta = beta0
    for h in range(n):
        k = h - 2  # the newest hour whose demand is known when hour h is decided
        if k >= 0 and np.isfinite(margin[k]) and np.isfinite(p50[k]) and len(values[k]):
            cov = smooth_coverage(level[k], values[k], 0.0 if floor is None or not np.isfinite(floor[k]) else floor[k])
            beta = min(1.0, max(0.0, beta + gamma * (target - cov)))
        past = err[max(0, h - n_window):max(0, h - 1)]
        past = past[np.isfinite(past)]
        if len(past) < min_errors:
            level[h] = p90[h]
            continue
        used[h] = beta
        margin[h] = float(np.quantile(past, beta, method=QUANTILE_METHOD))
        level[h] = max(0.0, p50[h] + margin[h])
    return level, margin, used


def insured(level: np.ndarray, margin: np.ndarray, high: np.ndarray, high_margin: np.ndarray, p50: np.ndarray,
            share: float = INSURANCE_SHARE) -> tuple[np.ndarray, np.ndarray, int]:
    """Cheap cover (module docstring): per hour, ``high`` (the :data:`INSURANCE` level, GPUs) where it lies
    above the adaptive ``level`` by at most ``share x p50`` (the hour's fresh p50 maximum, GPUs), else
    ``level``. Returns ``(level, margin over p50, hours raised)``; ``margin``/``high_margin``: the two
    levels' margins (NaN: fell back to p90; a fallback hour is never raised)."""
    up = high - level
    ok = np.isfinite(up) & np.isfinite(p50) & np.isfinite(margin) & (up > 0) & (up <= share * np.maximum(p50, 0.0))
    return np.where(ok, high, level), np.where(ok, high_margin, margin), int(ok.sum())


__all__ = ["BETA0", "GAMMA", "INSURANCE", "INSURANCE_SHARE", "QUANTILE_METHOD", "RAMP", "TARGETS", "adaptive_levels",
           "hour_peaks", "hour_values", "insured", "smooth_coverage"]
