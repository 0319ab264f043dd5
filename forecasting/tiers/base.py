"""The one interface every forecaster implements, and the tier registry.

A forecaster is fitted on a history frame (columns ``series_id, timestamp,
value`` on its own grid: 5 min for ``hourly``, 1 h for ``daily`` and
``weekly``) and then predicts quantiles at one or more *origins*. At an origin
``o`` it may use history up to and including ``o`` as context (e.g. ETS state,
LSTM input window) but never the values after it, and its parameters were
fitted only on data before the fit origin. This is what makes rolling-origin
evaluation honest (Hyndman & Athanasopoulos, *Forecasting: Principles and
Practice*, 3rd ed., §5.10 "Time series cross-validation").

Plug-ins register with :func:`register` and are built by name with
:func:`make`, the way krr chooses strategies by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, ClassVar

import numpy as np
import pandas as pd

from forecasting.types import FORECAST_COLUMNS, QCOLS, SeriesMeta, empty_forecast

_REGISTRY: dict[str, Callable[..., "Forecaster"]] = {}


def register(name: str):
    """Class decorator: make a forecaster available as ``make(name)``."""

    def deco(cls):
        _REGISTRY[name] = cls
        cls.name = name
        return cls

    return deco


def make(name: str, **kwargs) -> "Forecaster":
    """Build a registered forecaster by name.

    Raises
    ------
    KeyError: unknown name (the message lists the known ones).
    """
    try:
        return _REGISTRY[name](**kwargs)
    except KeyError:
        raise KeyError(f"unknown forecaster {name!r}; known: {sorted(_REGISTRY)}") from None


def available() -> list[str]:
    """Names of all registered forecasters."""
    return sorted(_REGISTRY)


class Forecaster(ABC):
    """Base class: ``fit(history, meta)`` then ``predict(history, origins)``.

    Class attributes
    ----------------
    name: registry name (``hourly``, ``daily``, ``weekly``, ``naive`` ...).
    step: the grid it works on (``5min`` or ``1h``).
    horizon: number of steps it forecasts.
    min_history: least number of non-missing steps of history per series
        before the fit origin; shorter series get a stated fallback.
    refit_every: refit cadence used by rolling-origin backtests
        (``None``: fit once, at the first origin).
    """

    name: ClassVar[str] = "base"
    step: ClassVar[str] = "5min"
    horizon: ClassVar[int] = 12
    min_history: ClassVar[int] = 1
    refit_every: ClassVar[str | None] = None

    def __init__(self, seed: int = 0, **options):
        self.seed = seed
        self.options = options
        #: series_id -> sentence saying which simpler model was used and why
        self.fallbacks: dict[str, str] = {}
        #: library warnings and notes captured during fit, per series (statsmodels style: data, not noise)
        self.warnings: dict[str, list[str]] = {}
        self.fitted_range: tuple[pd.Timestamp, pd.Timestamp] | None = None

    @abstractmethod
    def fit(self, history: pd.DataFrame, meta: dict[str, SeriesMeta]) -> "Forecaster":
        """Fit on ``history`` (all of it is before the fit origin). Returns self."""

    @abstractmethod
    def predict(self, history: pd.DataFrame, origins: dict[str, list[pd.Timestamp]] | None = None) -> pd.DataFrame:
        """Forecast ``horizon`` steps after each origin.

        Parameters
        ----------
        history: the same grid as ``fit``; rows after an origin are ignored
            for that origin.
        origins: per series, the issue times (grid timestamps). ``None``
            means one origin per series at its last timestamp.

        Returns
        -------
        A forecast frame (:data:`forecasting.types.FORECAST_COLUMNS`).
        """

    # helpers for subclasses -------------------------------------------------
    def _origins(self, history: pd.DataFrame, origins) -> dict[str, list[pd.Timestamp]]:
        if origins is not None:
            return origins
        last = history.dropna(subset=["value"]).groupby("series_id")["timestamp"].max()
        full_last = history.groupby("series_id")["timestamp"].max()
        return {sid: [full_last.get(sid, last.get(sid))] for sid in full_last.index}

    def _frame(self, sid: str, issued_at: pd.Timestamp, q: np.ndarray) -> pd.DataFrame:
        """Build forecast rows for one origin from a ``(horizon, 4)`` quantile array."""
        step = pd.Timedelta(self.step)
        ts = pd.date_range(issued_at + step, periods=q.shape[0], freq=step)
        f = pd.DataFrame(q, columns=list(QCOLS))
        f.insert(0, "timestamp", ts)
        f.insert(0, "issued_at", issued_at)
        f.insert(0, "tier", self.name)
        f.insert(0, "series_id", sid)
        return f

    @staticmethod
    def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
        if not frames:
            return empty_forecast()
        out = pd.concat(frames, ignore_index=True)
        out["issued_at"] = pd.to_datetime(out["issued_at"], utc=True).astype("datetime64[ns, UTC]")
        out["timestamp"] = pd.to_datetime(out["timestamp"], utc=True).astype("datetime64[ns, UTC]")
        return out[FORECAST_COLUMNS]


def series_values(history: pd.DataFrame, sid: str) -> pd.Series:
    """One series of a history frame as a Series indexed by timestamp."""
    g = history[history["series_id"] == sid]
    return pd.Series(g["value"].to_numpy(dtype="float64"), index=pd.DatetimeIndex(g["timestamp"]))
