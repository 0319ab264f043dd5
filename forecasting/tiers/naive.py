"""Benchmarks and fallbacks: naive (last value) and seasonal-naive (season = 1 day).

Point forecasts follow Hyndman & Athanasopoulos, *FPP3* §5.2. Quantiles are
empirical: the point forecast plus the quantiles of the in-sample ``h``-step
errors of the same method (bootstrapped residuals, FPP3 §5.5), computed on
the history before the origin only. With fewer than 10 such errors the spread
falls back to the one-step error's standard deviation scaled by ``sqrt(h)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.tiers.base import Forecaster, series_values
from forecasting.types import QUANTILES, STEPS_PER_DAY, SeriesMeta

_Z = np.array([0.0, 1.2816, 1.6449, 2.3263])  # standard normal quantiles of QUANTILES


def naive_quantiles(y: np.ndarray, horizon: int, season: int | None = None) -> np.ndarray:
    """Quantile forecasts of the (seasonal-)naive method.

    Parameters
    ----------
    y: history values (NaN allowed; the last non-missing value is used).
    horizon: number of steps.
    season: season length in steps, or ``None`` for plain naive.

    Returns
    -------
    ``(horizon, 4)`` array for the quantiles 0.5, 0.9, 0.95, 0.99.
    """
    y = pd.Series(y, dtype="float64").ffill().to_numpy()
    y = y[~np.isnan(y)]
    if len(y) == 0:
        return np.zeros((horizon, len(QUANTILES)))
    h = np.arange(1, horizon + 1)
    if season and len(y) >= season:
        # repeat the last full season: y[T + h - season * ceil(h / season)]
        idx = len(y) - 1 + h - season * np.ceil(h / season).astype(int)
        point = y[idx]
        lag = season
    else:
        point = np.full(horizon, y[-1])
        lag = 1
    errs = y[lag:] - y[:-lag] if len(y) > lag else np.array([])
    sd = float(np.std(errs)) if len(errs) > 1 else 0.1 * max(abs(y[-1]), 1.0)
    seasonal = bool(season and len(y) >= season)
    # error lag of each step: seasonal-naive at step h is h rounded up to whole seasons
    lags = season * np.ceil(h / season).astype(int) if seasonal else h
    # quantiles of the k-step errors at a few distinct lags, interpolated in between
    uniq = np.unique(lags)
    probe = uniq if len(uniq) <= 24 else np.unique(np.geomspace(uniq[0], uniq[-1], 24).round().astype(int))
    offs = np.empty((len(probe), len(QUANTILES)))
    for i, k in enumerate(probe):
        e = y[k:] - y[:-k] if len(y) > k + 10 else np.array([])
        if len(e) >= 10:
            offs[i] = np.quantile(e, QUANTILES)
        else:
            offs[i] = _Z * sd * np.sqrt(k)
        offs[i, 0] = 0.0  # the median is the point forecast itself
    out = np.empty((horizon, len(QUANTILES)))
    for j in range(len(QUANTILES)):
        out[:, j] = point + np.interp(lags, probe, offs[:, j])
    return out


class HistoryRule(Forecaster):
    """A rule on the history before each origin, with nothing to fit: :meth:`quantiles` maps
    the history ``y`` up to the origin to ``(horizon, 4)`` quantiles (naive's by default;
    :mod:`forecasting.tiers.robust` overrides it)."""

    season_steps: int | None = None
    # the fit is a no-op and each origin's forecast depends only on the history before it, so daily
    # refit blocks change no figure; they let a rerun reuse every unchanged day (capplan.run.cache)
    refit_every = "1D"

    def quantiles(self, y: np.ndarray) -> np.ndarray:
        """``(horizon, 4)`` quantiles (0.5, 0.9, 0.95, 0.99) from the history ``y`` up to the origin."""
        return naive_quantiles(y, self.horizon, self.season_steps)

    def fit(self, history: pd.DataFrame, meta: dict[str, SeriesMeta]) -> "Forecaster":
        return self

    def predict(self, history, origins=None):
        frames = []
        for sid, ors in self._origins(history, origins).items():
            s = series_values(history, sid)
            for o in ors:
                y = s[s.index <= o].to_numpy()
                frames.append(self._frame(sid, o, self.quantiles(y)))
        return self._concat(frames)


class Naive(HistoryRule):
    """Last value, on the 5-minute grid, 7 days ahead."""

    step = "5min"
    horizon = 2016


class SeasonalNaive(HistoryRule):
    """The value one day earlier, on the 5-minute grid, 7 days ahead."""

    step = "5min"
    horizon = 2016
    season_steps = STEPS_PER_DAY
