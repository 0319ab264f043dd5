"""Forecast accuracy metrics (docs/method.md, "Vocabulary").

* MASE — Hyndman & Koehler (2006), "Another look at measures of forecast
  accuracy": MAE of the forecast divided by the in-sample MAE of the
  seasonal-naive forecast (season = one day), computed on the training part
  only. < 1 beats seasonal-naive.
* sMAPE — symmetric MAPE in percent, ``200 * |y - f| / (|y| + |f|)``, with 0/0
  counted as 0.
* pinball loss — Koenker & Bassett (1978), mean over the quantiles 0.5, 0.9,
  0.95, 0.99, in the series' unit.
* coverage_p95 — share of actuals at or below the ``p95`` forecast (should be
  close to 0.95).
"""

from __future__ import annotations

import numpy as np

from forecasting.types import QUANTILES


def seasonal_scale(y: np.ndarray, season: int) -> float:
    """In-sample MAE of seasonal-naive on ``y`` (NaN pairs ignored). Falls back
    to lag 1, then to 1.0, so that MASE stays finite on short or flat series."""
    y = np.asarray(y, dtype="float64")
    for lag in (season, 1):
        if len(y) > lag:
            d = np.abs(y[lag:] - y[:-lag])
            d = d[np.isfinite(d)]
            if len(d) and d.mean() > 0:
                return float(d.mean())
    return 1.0


def mase(actual: np.ndarray, p50: np.ndarray, scale: float) -> float:
    """Mean absolute scaled error (see module docstring)."""
    e = np.abs(np.asarray(actual) - np.asarray(p50))
    e = e[np.isfinite(e)]
    return float(e.mean() / scale) if len(e) else float("nan")


def smape(actual: np.ndarray, p50: np.ndarray) -> float:
    """Symmetric MAPE in percent (0/0 counts as 0)."""
    a, f = np.asarray(actual, dtype="float64"), np.asarray(p50, dtype="float64")
    den = np.abs(a) + np.abs(f)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(den > 0, 200.0 * np.abs(a - f) / den, 0.0)
    r = r[np.isfinite(r)]
    return float(r.mean()) if len(r) else float("nan")


def pinball_loss(actual, forecast, q) -> np.ndarray:
    """Element-wise pinball (quantile) loss of ``forecast`` at level ``q``
    (Koenker & Bassett 1978): ``max(q * e, (q - 1) * e)`` with ``e = actual -
    forecast``; arrays broadcast (e.g. ``(n, 1)`` actuals against ``(n, 4)``
    quantiles with ``q`` of shape ``(1, 4)``). Same unit as the inputs."""
    e = np.asarray(actual, dtype="float64") - np.asarray(forecast, dtype="float64")
    return np.maximum(q * e, (q - 1.0) * e)


def pinball(actual: np.ndarray, quantiles: np.ndarray) -> float:
    """Mean pinball loss; ``quantiles`` is ``(n, 4)`` for 0.5/0.9/0.95/0.99."""
    loss = pinball_loss(np.asarray(actual, dtype="float64")[:, None], quantiles, np.asarray(QUANTILES)[None, :])
    loss = loss[np.isfinite(loss).all(axis=1)]
    return float(loss.mean()) if len(loss) else float("nan")


def coverage(actual: np.ndarray, upper: np.ndarray) -> float:
    """Share of actuals at or below ``upper`` (NaN actuals ignored)."""
    a, u = np.asarray(actual, dtype="float64"), np.asarray(upper, dtype="float64")
    ok = np.isfinite(a) & np.isfinite(u)
    return float((a[ok] <= u[ok]).mean()) if ok.any() else float("nan")


def idle_ratio(actual: np.ndarray, provisioned: np.ndarray) -> float:
    """Idle ratio of provisioning ``provisioned`` against ``actual`` demand (same unit):
    ``sum(max(provisioned - actual, 0)) / sum(provisioned)`` over rows where both
    are known (docs/method.md, "Vocabulary"; 0 when nothing is provisioned)."""
    a, p = np.asarray(actual, dtype="float64"), np.asarray(provisioned, dtype="float64")
    ok = np.isfinite(a) & np.isfinite(p)
    tot = p[ok].sum()
    return float(np.maximum(p[ok] - a[ok], 0).sum() / tot) if tot > 0 else 0.0
