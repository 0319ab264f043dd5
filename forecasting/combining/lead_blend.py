"""Blend the combined forecast across lead-bucket boundaries, so its path steps only where its members do.

Why
    The combination (:mod:`forecasting.combining.weights`) and the calibration
    (:mod:`forecasting.combining.conformal`) learn their weights and offsets per lead
    bucket. Where two buckets meet, the path can jump by the difference between
    two weightings of the same members (one series' p50 went from about 205 to
    245 GPUs at one day ahead and back at five days), and a user reads each jump
    as a prediction. No member predicted it: it is where the evidence was cut,
    not something the evidence says.

Rule (:func:`blend_boundaries`), per origin and boundary ``L`` (a bucket's upper lead)
    * the combined p50's step across the boundary, ``C50(L+1) - C50(L)``, is kept
      only as far as it lies within the members' own p50 steps there
      (``[min_m, max_m] (f_m(L+1) - f_m(L))``, over the members with a forecast at
      both leads): what the members move is kept, what only the change of weights
      moves is not. So ``|step| <= max_m |f_m(L+1) - f_m(L)|``;
    * the excess ``J_q = Cq(L+1) - Cq(L) - step`` of every level ``q`` (the same
      kept step for all levels, so the band's width does not step either) is
      removed at ``L+1`` and handed back linearly up to the middle of the next
      bucket, where the next bucket's own weights and offsets hold in full. This
      is the value-space form of interpolating the weights between neighbouring
      buckets' centres over lead time (kernel smoothing over the lead, as in
      forecast reconciliation across horizons); the ramp ends before the next
      boundary, so the boundaries do not interact.

Applied to the rolling forecasts (so the backtest scores what the plan exports)
and to the plan forecast, after the calibration and before the bounds
(:mod:`forecasting.bounds` then restores the quantile order and the cap).
Imports nothing of ``capplan``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.combining.buckets import BUCKETS
from forecasting.types import QCOLS, STEP

#: the plan's longest lead, in 5-minute steps
MAX_STEPS = int(pd.Timedelta("7D") / STEP)


def boundaries() -> list[tuple[int, int]]:
    """``(L, E)`` per inner bucket boundary, in 5-minute lead steps: ``L`` the upper lead
    of a bucket, ``E`` the middle of the next one (the last step of the ramp)."""
    out = []
    for (_, _, _, hi), (_, _, lo2, hi2) in zip(BUCKETS[:-1], BUCKETS[1:]):
        if hi != lo2:  # buckets are contiguous; a gap would not be a boundary
            continue
        L = int(hi / STEP)
        E = int(((lo2 + hi2) / 2) / STEP)
        out.append((L, max(E, L + 1)))
    return out


def lead_matrix(frame: pd.DataFrame, origins: pd.DatetimeIndex, cols: list[str]) -> np.ndarray:
    """``(origins, MAX_STEPS + 1, len(cols))`` values of ``cols`` of a forecast frame by origin (index
    into ``origins``) and lead step (5 minutes, 0..MAX_STEPS); NaN where the frame has none."""
    out = np.full((len(origins), MAX_STEPS + 1, len(cols)), np.nan)
    if frame.empty:
        return out
    oi = origins.get_indexer(pd.DatetimeIndex(frame["issued_at"]))
    k = ((pd.DatetimeIndex(frame["timestamp"]) - pd.DatetimeIndex(frame["issued_at"])) / STEP).to_numpy()
    ok = (oi >= 0) & np.isfinite(k) & (k >= 0) & (k <= MAX_STEPS) & (k == np.round(k))
    out[oi[ok], k[ok].astype(int)] = frame.loc[ok, cols].to_numpy(dtype="float64")
    return out


def blend_boundaries(combined: pd.DataFrame, members: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The combined forecast of ONE series with every bucket boundary's excess step
    spread over the next half bucket (module docstring).

    Parameters
    ----------
    combined: forecast frame (``series_id, tier, issued_at, timestamp, p50, p90, p95,
        p99``; GPUs or replicas) on the 5-minute grid, any number of origins.
    members: model -> that series' forecast frame of the same origins (other origins
        are ignored); only ``p50`` is read.

    Returns a copy of ``combined`` with the quantiles changed at the leads after each
    boundary (row order and other columns kept). Quantile order is not restored here:
    the caller's bounds (:func:`forecasting.types.sanitise_quantiles`) do that.
    A boundary where the combined forecast or no member has both leads is left as it is.
    """
    if combined.empty:
        return combined
    origins = pd.DatetimeIndex(combined["issued_at"]).unique()
    cols = list(QCOLS)
    C = lead_matrix(combined, origins, cols)
    steps = [np.diff(lead_matrix(f, origins, ["p50"])[:, :, 0], axis=1) for f in members.values() if not f.empty]
    if not steps:
        return combined
    M = np.stack(steps)  # (members, origins, MAX_STEPS): member p50 step from lead k to k + 1
    for L, E in boundaries():
        if E > MAX_STEPS:
            continue
        d = M[:, :, L]
        has = np.isfinite(d).any(axis=0)
        with np.errstate(invalid="ignore"):
            lo, hi = np.nanmin(np.where(has, d, 0.0), axis=0), np.nanmax(np.where(has, d, 0.0), axis=0)
        raw = C[:, L + 1, 0] - C[:, L, 0]
        ok = has & np.isfinite(raw)
        if not ok.any():
            continue
        kept = np.clip(raw, lo, hi)
        excess = C[:, L + 1, :] - C[:, L, :] - kept[:, None]  # (origins, levels)
        ramp = (E - np.arange(L + 1, E + 1) + 1) / (E - L)  # 1 at L + 1 ... 1 / (E - L) at E
        shift = excess[:, None, :] * ramp[None, :, None]
        seg = C[:, L + 1:E + 1, :]
        C[:, L + 1:E + 1, :] = np.where(ok[:, None, None] & np.isfinite(shift), seg - shift, seg)
    out = combined.copy()
    oi = origins.get_indexer(pd.DatetimeIndex(out["issued_at"]))
    k = ((pd.DatetimeIndex(out["timestamp"]) - pd.DatetimeIndex(out["issued_at"])) / STEP).to_numpy()
    ok = np.isfinite(k) & (k >= 0) & (k <= MAX_STEPS) & (k == np.round(k))
    vals = out[cols].to_numpy(dtype="float64", copy=True)
    new = C[oi[ok], k[ok].astype(int)]
    vals[ok] = np.where(np.isfinite(new), new, vals[ok])
    out[cols] = vals
    return out
