"""Upper bound on what any convex combination of the models could score (diagnostic only).

For evidence, never for the product: per series and lead bucket, the convex
weights over the models' ``p50`` that minimise the mean absolute error ON the
evaluation window itself (hindsight, so they look ahead by construction), and
the MASE per lead band those weights give. If even this misses a target on the
median over series, no combination of these models (with one weight vector per
lead bucket, as :mod:`forecasting.combining.weights` uses) reaches it.

Least absolute deviations over the simplex is a linear programme (Charnes,
Cooper & Ferguson 1955): minimise ``sum t`` subject to ``-t <= y - X w <= t``,
``w >= 0``, ``sum w = 1``, solved with SciPy's HiGHS. Buckets with more than
:data:`MAX_ROWS` rows are fitted on an even subsample of them (the weights are
then very slightly short of the optimum, which makes the bound conservative:
a real optimum can only be as low or lower) and scored on every row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.combining.buckets import BANDS, band_of, bucket_of

MAX_ROWS = 4000  #: rows per lead bucket the linear programme is fitted on
STEP = pd.Timedelta("5min")


def lad_simplex(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Convex weights ``(m,)`` minimising ``mean |y - X w|`` (``X``: ``(n, m)``, ``y``: ``(n,)``).

    Raises RuntimeError when the solver fails (it should not: the problem is always feasible)."""
    from scipy import sparse
    from scipy.optimize import linprog

    n, m = X.shape
    eye = sparse.identity(n, format="csr")
    xs = sparse.csr_matrix(X)
    a_ub = sparse.vstack([sparse.hstack([xs, -eye]), sparse.hstack([-xs, -eye])])
    sol = linprog(np.r_[np.zeros(m), np.ones(n)], A_ub=a_ub, b_ub=np.r_[y, -y],
                  A_eq=np.r_[np.ones(m), np.zeros(n)][None, :], b_eq=[1.0],
                  bounds=[(0, None)] * (m + n), method="highs")
    if not sol.success:
        raise RuntimeError(f"hindsight LP failed: {sol.message}")
    w = np.clip(sol.x[:m], 0, None)
    return w / w.sum()


def hindsight_mase(frames: dict[str, pd.DataFrame], actual: pd.Series, scale: float,
                   window: tuple[pd.Timestamp, pd.Timestamp]) -> dict[str, float]:
    """MASE per lead band (``1h``, ``24h``, ``7d``) of the hindsight-optimal convex
    combination (module docstring) of ``frames`` (model -> forecast frame of ONE
    series) on the rows every model forecasts, issued at or after ``window[0] - 5 min``
    with targets inside ``window`` and an observed ``actual``. ``scale``: the MASE
    denominator (:func:`forecasting.metrics.seasonal_scale`)."""
    out = {}
    for name in BANDS:
        got = _band_rows(frames, actual, window, name)
        if got is None:
            continue
        X, y, bucket = got
        pred = np.full(len(y), np.nan)
        for b in np.unique(bucket[bucket >= 0]):
            rows = np.flatnonzero(bucket == b)
            fit = rows[:: max(1, len(rows) // MAX_ROWS)]
            pred[rows] = X[rows] @ lad_simplex(X[fit], y[fit])
        out[name] = float(np.abs(y - pred).mean() / scale)
    return out


def _band_rows(frames, actual, window, band):
    """``(X (rows, models), y, lead bucket)`` of the rows of ``band`` every model with rows there forecasts."""
    parts = []
    for model, f in frames.items():
        f = f[(f["timestamp"] >= window[0]) & (f["timestamp"] <= window[1]) & (f["issued_at"] >= window[0] - STEP)]
        f = f[band_of(f["timestamp"] - f["issued_at"]) == band]
        if len(f):
            s = f.set_index(["issued_at", "timestamp"])["p50"].rename(model)
            parts.append(s[~s.index.duplicated()])
    if not parts:
        return None
    wide = pd.concat(parts, axis=1, join="inner").dropna()
    iss = pd.DatetimeIndex(wide.index.get_level_values(0))
    ts = pd.DatetimeIndex(wide.index.get_level_values(1))
    y = actual.reindex(ts).to_numpy(dtype="float64")
    ok = np.isfinite(y)
    if not ok.any():
        return None
    return wide.to_numpy(dtype="float64")[ok], y[ok], bucket_of((ts - iss)[ok])
