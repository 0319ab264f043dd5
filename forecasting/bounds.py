"""Forecast bounds: the cap every forecast is clipped to, from the demand seen.

A forecast is capped at :data:`UPPER_FACTOR` times the largest demand the
history holds (at least 1; 0 while the history is all zero, where nothing
supports any demand). Plan forecasts use the whole history
(:func:`upper_by_series`); rolling forecasts use, per row, only the history
known at the row's ``issued_at`` (:func:`sanitise_rolling`), so no bound leaks
the future into a backtest. Imports nothing of ``capplan``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.types import sanitise_quantiles

UPPER_FACTOR = 3.0  # forecasts are capped at 3x the history's max (a sane multiple of its range)


def bound(max_seen):
    """Forecast cap from the largest demand seen: ``UPPER_FACTOR`` x it, at least 1;
    0 for an all-zero history (nothing in it supports any demand). Scalar or array."""
    m = np.asarray(max_seen, dtype="float64")
    return np.where(m > 0, np.maximum(m * UPPER_FACTOR, 1.0), 0.0)


def upper_by_series(h5: pd.DataFrame) -> dict[str, float]:
    """Per series, :func:`bound` of its whole history (a history frame; for plan forecasts)."""
    mx = h5.groupby("series_id")["value"].max().fillna(0.0)
    return {sid: float(bound(v)) for sid, v in mx.items()}


def sanitise_rolling(f: pd.DataFrame, h5: pd.DataFrame) -> pd.DataFrame:
    """:func:`sanitise` for rolling forecasts (a forecast frame), with each row's bound
    from the history ``h5`` known at its origin (``UPPER_FACTOR`` x the max up to
    ``issued_at``; 0 while that history is all zero)."""
    if f.empty:
        return f
    parts = []
    for sid, g in f.groupby("series_id", sort=False):
        h = h5[h5["series_id"] == sid]
        run = pd.Series(h["value"].fillna(0.0).cummax().to_numpy(), index=pd.DatetimeIndex(h["timestamp"]))
        known = run.reindex(pd.DatetimeIndex(g["issued_at"]), method="ffill").fillna(0.0).to_numpy()
        parts.append(sanitise_quantiles(g, bound(known)))
    return pd.concat(parts, ignore_index=True)


def sanitise(f: pd.DataFrame, upper: dict[str, float]) -> pd.DataFrame:
    """:func:`forecasting.types.sanitise_quantiles` per series of a forecast frame,
    capped at ``upper[series_id]`` (1.0 for a series it does not name)."""
    if f.empty:
        return f
    parts = [sanitise_quantiles(g, upper.get(sid, 1.0)) for sid, g in f.groupby("series_id", sort=False)]
    return pd.concat(parts, ignore_index=True)
