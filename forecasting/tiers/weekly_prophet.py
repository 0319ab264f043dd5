"""The ``weekly`` tier: Prophet on hourly data, 7 days (168 h) ahead, with China's calendar.

* Holidays: China's public holidays from :mod:`forecasting.calendar`, with
  Spring Festival and Golden Week as their own named windows (not only
  ``add_country_holidays("CN")``, whose list misses make-up workdays);
  make-up workdays (调休) enter as the extra regressor ``makeup_workday``.
* Optional custom events (``events=["618", "double11"]``).
* ``seasonality_mode="multiplicative"`` only when the series is strictly
  positive; additive otherwise.
* ``ds`` is passed as naive *local* wall-clock ``datetime64[ns]`` in the
  series' timezone (tz-aware or ms-precision columns break Prophet), so that
  holiday dates, which are local days, start at local midnight and daily
  seasonality follows the local day.
* Quantiles come from ``Prophet.predictive_samples`` (``uncertainty_samples``
  draws), read at 0.5/0.9/0.95/0.99.
* If cmdstan's optimiser fails (``RuntimeError``), the fit is retried with
  ``algorithm="Newton"``; if that fails too, the series falls back to
  seasonal-naive (season one week when there is one, else one day), stated.

The ``prophet`` forecaster is the peer a user would pick instead: Prophet with
default settings and no calendar, used only in backtests.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

from forecasting.calendar import local_naive, makeup_regressor, prophet_holidays
from forecasting.tiers.base import Forecaster, register, series_values
from forecasting.tiers.naive import naive_quantiles
from forecasting.types import QUANTILES, SeriesMeta



def _quiet() -> None:
    """Silence cmdstanpy's per-chain INFO lines (they drown the CLI's progress)."""
    for name in ("prophet", "cmdstanpy"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.ERROR)
        for h in lg.handlers:
            h.setLevel(logging.ERROR)
    logging.getLogger("cmdstanpy").disabled = True  # failures still surface as exceptions


@register("weekly")
class WeeklyProphet(Forecaster):
    """Prophet with China's calendar (see module docstring).

    Options: ``events`` (custom event names), ``uncertainty_samples`` (300),
    ``calendar`` (True; False gives the default-settings peer).
    """

    step = "1h"
    horizon = 168
    min_history = 72  # 3 days of hours
    refit_every = "7D"
    arch = "prophet-local-ds"

    def __init__(self, seed: int = 0, events: tuple[str, ...] = (), uncertainty_samples: int = 300,
                 calendar: bool = True, **options):
        super().__init__(seed=seed, **options)
        self.events = tuple(events)
        self.uncertainty_samples = uncertainty_samples
        self.calendar = calendar
        self.models: dict[str, object] = {}
        self.tz: dict[str, str] = {}

    def _new_model(self, y: np.ndarray, years: list[int]):
        from prophet import Prophet

        _quiet()
        kw = dict(daily_seasonality=True, weekly_seasonality=True, yearly_seasonality=False,
                  uncertainty_samples=self.uncertainty_samples)
        if not self.calendar:
            return Prophet(uncertainty_samples=self.uncertainty_samples)
        kw["seasonality_mode"] = "multiplicative" if np.all(y > 0) else "additive"
        kw["holidays"] = prophet_holidays(years, self.events)
        m = Prophet(**kw)
        m.add_regressor("makeup_workday", mode="additive")
        return m

    def _frame_in(self, ds: pd.Series, sid: str) -> pd.DataFrame:
        df = pd.DataFrame({"ds": ds.to_numpy()})
        if self.calendar:
            df["makeup_workday"] = makeup_regressor(df["ds"])
        return df

    def fit(self, history: pd.DataFrame, meta: dict[str, SeriesMeta]) -> "WeeklyProphet":
        """Fit one Prophet model per series; failures fall back with a stated reason."""
        self._note_range(history)
        np.random.seed(self.seed)
        for sid in history["series_id"].unique():
            s = series_values(history, sid).dropna()
            self.tz[sid] = meta.get(sid, SeriesMeta()).timezone
            label = "weekly" if self.calendar else "prophet"
            if len(s) < self.min_history:
                self.fallbacks[sid] = (f"{label}: {len(s)} hours < {self.min_history} needed for Prophet; "
                                       "seasonal-naive used")
                continue
            ds = local_naive(s.index, self.tz[sid])
            years = sorted(set(ds.dt.year.tolist()) | {int((ds.iloc[-1] + pd.Timedelta("8D")).year)})
            df = self._frame_in(ds, sid)
            df["y"] = s.to_numpy()
            for attempt in ({}, {"algorithm": "Newton"}):
                m = self._new_model(df["y"].to_numpy(), years)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        m.fit(df, **attempt)
                    self.models[sid] = m
                    if attempt:
                        self.warnings.setdefault(sid, []).append(f"{label}: default optimiser failed; Newton used")
                    break
                except RuntimeError as exc:
                    self.warnings.setdefault(sid, []).append(f"{label}: cmdstan failed: {exc}")
            else:
                self.fallbacks[sid] = f"{label}: cmdstan optimiser failed twice; seasonal-naive used"
        return self

    def predict(self, history, origins=None):
        """Quantiles at each origin. Prophet's forecast for a target does not depend on
        data after its fit, so one ``predictive_samples`` call covers every origin of a
        series (targets from the first origin + 1 h to the last origin + 168 h) and each
        origin takes its own 168-hour slice."""
        frames = []
        step = pd.Timedelta("1h")
        for sid, ors in self._origins(history, origins).items():
            m = self.models.get(sid)
            s = series_values(history, sid)
            if m is None:
                for o in ors:
                    ctx = s[s.index <= o].to_numpy()
                    season = 168 if len(ctx) >= 336 else 24
                    frames.append(self._frame(sid, o, naive_quantiles(ctx, self.horizon, season=season)))
                continue
            ors = sorted(ors)
            ts = pd.date_range(ors[0] + step, ors[-1] + step * self.horizon, freq=step)
            fut = self._frame_in(local_naive(ts, self.tz.get(sid, "UTC")), sid)
            np.random.seed(self.seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                samples = m.predictive_samples(fut)["yhat"]
            q = np.quantile(samples, QUANTILES, axis=1).T
            for o in ors:
                k = int((o - ors[0]) / step)
                frames.append(self._frame(sid, o, q[k:k + self.horizon]))
        return self._concat(frames)

    # persistence (Forecaster.save / load): prophet.serialize JSON, no pickle ----------
    def fitted_series(self) -> list[str]:
        return sorted(self.models)

    def _state(self, series: list[str]) -> dict:
        from prophet.serialize import model_to_json

        return {sid: {"model": model_to_json(self.models[sid]), "timezone": self.tz.get(sid, "UTC")} for sid in series}

    def _restore(self, state: dict, directory) -> None:
        from prophet.serialize import model_from_json

        for sid, doc in state.items():
            self.models[sid] = model_from_json(doc["model"])
            self.tz[sid] = doc["timezone"]


@register("prophet")
class DefaultProphet(WeeklyProphet):
    """Prophet with default settings: the peer a user would pick instead (backtests only)."""

    def __init__(self, seed: int = 0, **options):
        options.pop("calendar", None)
        super().__init__(seed=seed, calendar=False, **options)
