"""Calibrate the combined quantiles per lead bucket: online adaptive split conformal.

Centre and offsets (per series, lead bucket and quantile level)
    Split-conformal offsets (Romano, Patterson & Candès 2019, "Conformalized Quantile Regression", one-sided form): the
    calibrated quantile of level ``q`` is ``centre + c_q`` with ``c_q`` the ``ceil((n + 1) q') / n`` empirical quantile
    of ``actual - centre`` over a calibration set. The centre is the combined ``p50`` (:data:`CENTRE`): the members' own
    upper quantiles were too wide at 24 h in backtests, while the errors of a good median, taken per lead bucket, give
    bands as tight as the median is good. ``p50`` itself is not moved.

Calibration set, no look-ahead (:func:`calibrate_online`)
    For an origin ``o``, the bucket's rows whose target was already observed
    at ``o`` within a trailing :data:`CAL_WINDOW` (sliding-window conformal in
    the spirit of Gibbs & Candès 2021). Because the set holds only rows of the
    same lead bucket it is not biased towards shorter leads.

Errors that arrive sooner (the 7-day band needs errors faster than one origin a day)
    Two ways are used. (1) More origins: every rolling origin
    on a 4-hour boundary forecasts 7 days ahead (:func:`forecasting.backtest.lead_cap`),
    six a day rather than one. (2) Short-lead errors scaled by lead time: the
    calibration set of every bucket but a band's first also holds the band's
    first bucket's errors realised in the trailing :data:`BORROW` (2 days),
    multiplied by ``sqrt(mid-lead / first bucket's mid-lead)`` (the growth of
    the change over the lead time for a random walk, :func:`lead_scale`).
    A 5-7-day error is known 5-7 days after its origin, a 1-2-day error after
    1-2 days, so a change of regime reaches the long buckets' offsets days
    sooner.

Adaptive level (Gibbs & Candès 2021, "Adaptive Conformal Inference Under
Distribution Shift")
    At each origin, with ``err`` the share of the bucket's newly realised rows
    above their calibrated quantile, the miscoverage level moves by
    ``ACI_GAMMA * ((1 - q) - err)``, so a bucket that has been under-covering
    asks for a higher empirical quantile of the errors. The plan forecast uses
    the last window's offsets at the levels reached (:func:`learn_calibration`).
    The miscoverage is kept at or above :data:`ACI_FLOOR` x nominal (0: the level
    stops at 1). A level above 1 asks for no wider band than 1 does (the
    largest error in the window) but, without the stop, a run of misses winds
    it up far past 1 and the band stays at the window's largest error for
    many origins after the misses end, which is why the level stops at 1.

    ``ACI_GAMMA`` and ``ACI_FLOOR`` were chosen on the sample's tuning windows
    only (never the evaluation windows), by the most series with coverage_p95 in
    [0.90, 0.98] over the three bands, then the lowest 24 h idle ratio at p95.
    The grid, the figures behind each choice above and the series that stay
    outside the range: docs/method.md, "Measured on the sample: calibration".

Limits
    The tuning windows cannot rank settings that differ only beyond 7 days of
    realised errors (rolling origins start at ``tune_start``), e.g. a 14-day
    against a 7-day window. Three kinds of series stay outside [0.90, 0.98]:
    over-coverers whose p50 already covers almost all rows (no band at or above
    the p50 covers less), over-coverers whose trailing window still holds the
    errors of a volatile fortnight, and under-coverers after a level shift inside
    the evaluation week (forecasts issued before the shift miss every target
    after it, whatever their offsets).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecasting.combining.buckets import BUCKETS, bucket_of
from forecasting.types import QCOLS, QUANTILES

CENTRE = "p50"  #: quantile column the offsets are added to (None: each level's own column)
MIN_ROWS = 24  #: fewer realised rows than this in a bucket: no offsets
CAL_WINDOW = pd.Timedelta("14D")  #: realised rows the conformal offsets come from
ACI_GAMMA = 0.05  #: step size of the adaptive level, per origin (tuning windows: module docstring)
#: the adaptive miscoverage never drops below this share of the nominal one (None: no floor)
ACI_FLOOR: float | None = 0.0
BORROW = pd.Timedelta("2D")  #: trailing span of scaled short-lead errors pooled into longer buckets (None: off)


def first_in_band(b: int) -> int:
    """Index of the first (shortest-lead) bucket of bucket ``b``'s band."""
    return next(i for i, x in enumerate(BUCKETS) if x[1] == BUCKETS[b][1])


def lead_scale(b: int, ref: int) -> float:
    """``sqrt(mid-lead of b / mid-lead of ref)``: how much wider errors at bucket ``b``'s
    leads are than at ``ref``'s for a random walk (the change over the lead time)."""
    mid = [(lo + hi) / 2 for _, _, lo, hi in BUCKETS]
    return float(np.sqrt(mid[b] / mid[ref]))


def _offsets(resid: np.ndarray, levels=QUANTILES) -> list[float]:
    """Conformal offsets, one per quantile level, from residuals ``(n, 4)`` = actual - base;
    0 for ``p50``. ``levels`` are the target levels (default the nominal quantiles)."""
    n = len(resid)
    return [0.0 if q0 <= 0.5 else float(np.quantile(resid[:, j], min(1.0, max(0.0, math.ceil((n + 1) * q) / n)),
                                                    method="higher"))
            for j, (q0, q) in enumerate(zip(QUANTILES, levels))]


def _base(f: pd.DataFrame, centre: str | None) -> np.ndarray:
    """``(n, 4)`` values the offsets are added to: the ``centre`` column repeated, or each level's own."""
    if centre is None:
        return f[list(QCOLS)].to_numpy(dtype="float64", copy=True)
    c = f[centre].to_numpy(dtype="float64")
    out = np.repeat(c[:, None], len(QCOLS), axis=1)
    out[:, 0] = f["p50"].to_numpy(dtype="float64")
    return out


def learn_calibration(combined: pd.DataFrame, actual: pd.Series, since: pd.Timestamp | None = None,
                      min_n: int = MIN_ROWS, levels: dict[str, list[float]] | None = None,
                      centre: str | None = CENTRE, borrow: pd.Timedelta | None = BORROW) -> dict[str, list[float]]:
    """Split-conformal offsets per lead bucket and quantile (module docstring) from the rows
    of ``combined`` whose target is after ``since`` and observed in ``actual``, plus (with
    ``borrow``) the band's first bucket's errors of the last ``borrow`` before the last
    observation, scaled by :func:`lead_scale`.

    ``levels``: per bucket label, the target level of each quantile (e.g. the
    adaptive levels :func:`calibrate_online` ended with); default the nominal
    quantiles. Returns ``{bucket_label: [c_p50, c_p90, c_p95, c_p99]}`` (same
    unit as the forecast, added to ``centre``); buckets with fewer than
    ``min_n`` observed rows are left out.
    """
    out = {}
    if combined.empty:
        return out
    bucket = bucket_of(combined["timestamp"] - combined["issued_at"])
    ts = pd.DatetimeIndex(combined["timestamp"])
    y = actual.reindex(ts).to_numpy(dtype="float64")
    mask = np.isfinite(y) & (np.asarray(ts > since) if since is not None else True)
    resid = y[:, None] - _base(combined, centre)
    seen = ts[np.isfinite(y)].max() if np.isfinite(y).any() else None
    for b, (label, _, _, _) in enumerate(BUCKETS):
        m = mask & (bucket == b)
        if m.sum() < min_n:
            continue
        cal_set = resid[m]
        ref = first_in_band(b)
        if borrow is not None and ref != b:
            r = np.isfinite(y) & (bucket == ref) & np.asarray(ts > seen - borrow)
            cal_set = np.concatenate([cal_set, resid[r] * lead_scale(b, ref)])
        out[label] = _offsets(cal_set, (levels or {}).get(label, QUANTILES))
    return out


def apply_calibration(combined: pd.DataFrame, offsets: dict[str, list[float]],
                      centre: str | None = CENTRE) -> pd.DataFrame:
    """Add each row's lead-bucket offsets to its ``centre`` (rows of buckets without
    offsets keep their quantiles); the caller sanitises (non-crossing, >= 0)."""
    if not offsets or combined.empty:
        return combined
    f = combined.copy()
    bucket = bucket_of(f["timestamp"] - f["issued_at"])
    vals = f[list(QCOLS)].to_numpy(dtype="float64", copy=True)
    base = _base(f, centre)
    for b, (label, _, _, _) in enumerate(BUCKETS):
        if label in offsets:
            m = bucket == b
            vals[m] = base[m] + np.asarray(offsets[label])
    f[list(QCOLS)] = vals
    return f


def _aci_step(miss: np.ndarray, gamma: float, nominal: np.ndarray, err: np.ndarray, floor: float | None
              ) -> np.ndarray:
    """One adaptive-level update (Gibbs & Candes 2021): ``miss + gamma * (nominal - err)``,
    kept at or above ``floor * nominal`` when ``floor`` is set."""
    miss = miss + gamma * (nominal - err)
    return miss if floor is None else np.maximum(miss, floor * nominal)


def calibrate_online(combined: pd.DataFrame, actual: pd.Series, window: pd.Timedelta = CAL_WINDOW,
                     min_n: int = MIN_ROWS, gamma: float = ACI_GAMMA,
                     levels_out: dict[str, list[float]] | None = None, centre: str | None = CENTRE,
                     borrow: pd.Timedelta | None = BORROW, floor: float | None = ACI_FLOOR) -> pd.DataFrame:
    """Rolling adaptive split-conformal calibration with no look-ahead (module docstring).

    For each origin ``o`` and lead bucket, the offsets come from the rows of
    that bucket whose target lies in ``(o - window, o]`` (their actuals were
    known when ``o`` was issued). Origins with fewer than ``min_n`` such rows
    keep their forecast uncalibrated. ``gamma = 0`` is plain sliding-window
    split conformal. With ``levels_out`` (a dict), each bucket's levels after
    every realised row are stored there (``{bucket_label: [level per
    quantile]}``) for :func:`learn_calibration` to carry into the plan
    forecast. ``borrow``: pool the band's first bucket's errors of this trailing
    span, scaled by :func:`lead_scale`, into every longer bucket's calibration
    set (None: each bucket's own errors only). Returns a new frame (forecast
    columns); the caller sanitises it.
    """
    if combined.empty:
        return combined
    f = combined.reset_index(drop=True)
    base = _base(f, centre)
    out = f[list(QCOLS)].to_numpy(dtype="float64", copy=True)
    y = actual.reindex(pd.DatetimeIndex(f["timestamp"])).to_numpy(dtype="float64")
    bucket = bucket_of(f["timestamp"] - f["issued_at"])
    t8 = pd.DatetimeIndex(f["timestamp"]).as_unit("ns").asi8  # nanoseconds, like Timedelta.value
    i8 = pd.DatetimeIndex(f["issued_at"]).as_unit("ns").asi8
    resid_all = y[:, None] - base
    nominal = 1.0 - np.asarray(QUANTILES)
    def realised(b):
        r = np.flatnonzero((bucket == b) & np.isfinite(y))
        return r[np.argsort(t8[r], kind="stable")]

    for b in range(len(BUCKETS)):
        rows = np.flatnonzero(bucket == b)
        obs = realised(b)
        if len(obs) < min_n:
            continue
        ts, resid = t8[obs], resid_all[obs]
        ref = first_in_band(b) if borrow is not None else b
        if ref != b:
            r_obs = realised(ref)
            r_ts, r_resid = t8[r_obs], resid_all[r_obs] * lead_scale(b, ref)
        miss = nominal.copy()  # adaptive miscoverage per level
        done = 0
        for o in np.unique(i8[rows]):
            hi = np.searchsorted(ts, o, side="right")
            lo = np.searchsorted(ts, o - window.value, side="right")
            if gamma and hi > done:
                new = obs[done:hi]  # realised since the last origin; their calibrated values are final
                miss = _aci_step(miss, gamma, nominal, (y[new, None] > out[new]).mean(axis=0), floor)
                done = hi
            if hi - lo < min_n:
                continue
            target = rows[i8[rows] == o]
            cal_set = resid[lo:hi]
            if ref != b:
                r_hi = np.searchsorted(r_ts, o, side="right")
                r_lo = np.searchsorted(r_ts, o - borrow.value, side="right")
                cal_set = np.concatenate([cal_set, r_resid[r_lo:r_hi]])
            out[target] = base[target] + np.asarray(_offsets(cal_set, 1.0 - miss))
        if levels_out is not None:
            if gamma and done < len(obs):
                rest = obs[done:]
                miss = _aci_step(miss, gamma, nominal, (y[rest, None] > out[rest]).mean(axis=0), floor)
            levels_out[BUCKETS[b][0]] = [float(v) for v in 1.0 - miss]
    res = f.copy()
    res[list(QCOLS)] = out
    return res
