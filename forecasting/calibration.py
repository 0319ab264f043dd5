"""Calibrate the combined quantiles per lead bucket: online adaptive split conformal.

Centre and offsets (per series, lead bucket and quantile level)
    Split-conformal offsets (Romano, Patterson & Candès 2019, "Conformalized
    Quantile Regression", one-sided form): the calibrated quantile of level
    ``q`` is ``centre + c_q`` with ``c_q`` the ``ceil((n + 1) q') / n``
    empirical quantile of ``actual - centre`` over a calibration set. The
    centre is the combined ``p50`` (:data:`CENTRE`): the members' own upper
    quantiles were too wide at 24 h in the sample's backtests (idle ratio at
    p95 0.49 against 0.32-0.35 for the naive-conformal rule, issue 13), while
    the errors of a good median, taken per lead bucket, give bands as tight as
    the median is good. ``p50`` itself is not moved.

Calibration set, no look-ahead (:func:`calibrate_online`)
    For an origin ``o``, the bucket's rows whose target was already observed
    at ``o`` within a trailing :data:`CAL_WINDOW` (sliding-window conformal in
    the spirit of Gibbs & Candès 2021). Because the set holds only rows of the
    same lead bucket it is not biased towards shorter leads. The 7-day band
    gets its errors from six origins a day
    (:func:`forecasting.backtest.lead_cap`), not one: a week then holds enough
    realised 5-7-day errors to calibrate on, without rescaling short-lead
    errors by lead time.

Adaptive level (Gibbs & Candès 2021, "Adaptive Conformal Inference Under
Distribution Shift")
    At each origin, with ``err`` the share of the bucket's newly realised rows
    above their calibrated quantile, the miscoverage level moves by
    ``ACI_GAMMA * ((1 - q) - err)``, so a bucket that has been under-covering
    asks for a higher empirical quantile of the errors. The plan forecast uses
    the last window's offsets at the levels reached (:func:`learn_calibration`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecasting.buckets import BUCKETS, bucket_of
from forecasting.types import QCOLS, QUANTILES

CENTRE = "p50"  #: quantile column the offsets are added to (None: each level's own column)
MIN_ROWS = 24  #: fewer realised rows than this in a bucket: no offsets
CAL_WINDOW = pd.Timedelta("14D")  #: realised rows the conformal offsets come from
ACI_GAMMA = 0.02  #: step size of the adaptive level, per origin


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
                      centre: str | None = CENTRE) -> dict[str, list[float]]:
    """Split-conformal offsets per lead bucket and quantile (module docstring) from the rows
    of ``combined`` whose target is after ``since`` and observed in ``actual``.

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
    for b, (label, _, _, _) in enumerate(BUCKETS):
        m = mask & (bucket == b)
        if m.sum() >= min_n:
            out[label] = _offsets(resid[m], (levels or {}).get(label, QUANTILES))
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


def calibrate_online(combined: pd.DataFrame, actual: pd.Series, window: pd.Timedelta = CAL_WINDOW,
                     min_n: int = MIN_ROWS, gamma: float = ACI_GAMMA,
                     levels_out: dict[str, list[float]] | None = None, centre: str | None = CENTRE) -> pd.DataFrame:
    """Rolling adaptive split-conformal calibration with no look-ahead (module docstring).

    For each origin ``o`` and lead bucket, the offsets come from the rows of
    that bucket whose target lies in ``(o - window, o]`` (their actuals were
    known when ``o`` was issued). Origins with fewer than ``min_n`` such rows
    keep their forecast uncalibrated. ``gamma = 0`` is plain sliding-window
    split conformal. With ``levels_out`` (a dict), each bucket's levels after
    every realised row are stored there (``{bucket_label: [level per
    quantile]}``) for :func:`learn_calibration` to carry into the plan
    forecast. Returns a new frame (forecast columns); the caller sanitises it.
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
    for b in range(len(BUCKETS)):
        rows = np.flatnonzero(bucket == b)
        obs = rows[np.isfinite(y[rows])]
        if len(obs) < min_n:
            continue
        obs = obs[np.argsort(t8[obs], kind="stable")]
        ts, resid = t8[obs], resid_all[obs]
        miss = nominal.copy()  # adaptive miscoverage per level
        done = 0
        for o in np.unique(i8[rows]):
            hi = np.searchsorted(ts, o, side="right")
            lo = np.searchsorted(ts, o - window.value, side="right")
            if gamma and hi > done:
                new = obs[done:hi]  # realised since the last origin; their calibrated values are final
                miss = miss + gamma * (nominal - (y[new, None] > out[new]).mean(axis=0))
                done = hi
            if hi - lo < min_n:
                continue
            target = rows[i8[rows] == o]
            out[target] = base[target] + np.asarray(_offsets(resid[lo:hi], 1.0 - miss))
        if levels_out is not None:
            if gamma and done < len(obs):
                rest = obs[done:]
                miss = miss + gamma * (nominal - (y[rest, None] > out[rest]).mean(axis=0))
            levels_out[BUCKETS[b][0]] = [float(v) for v in 1.0 - miss]
    res = f.copy()
    res[list(QCOLS)] = out
    return res
