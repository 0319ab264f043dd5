"""The ``weekly`` tier: Prophet on hourly data, 7 days (168 h) ahead, with China's calendar.

* Holidays: China's public holidays from :mod:`forecasting.calendar`, with
  Spring Festival and Golden Week as their own named windows (not only
  ``add_country_holidays("CN")``, whose list misses make-up workdays);
  make-up workdays (调休) enter as the extra regressor ``makeup_workday``.
* Optional custom events (``events=["618", "double11"]``).
* What it learns is what the naive reference leaves over. Prophet is fitted on
  the hours' *mean* (:func:`forecasting.regularise.to_hourly`; the evaluation
  scores 5-minute values, which an hour's peak overstates), and at an origin
  ``o`` the median forecast is ``last + b_shape * (yhat(t) - yhat(o)) +
  b_level * (yhat(t) - last)``: the last 5-minute reading (naive), plus the
  change Prophet predicts from the origin's hour, plus a pull toward Prophet's
  own level. ``b_shape`` and ``b_level`` in [0, 1] come from a held-out week
  (:meth:`WeeklyProphet._holdout_shrink`): 0 and 0 is naive. The bands keep the
  width of Prophet's predictive samples around that median.
* ``growth="flat"`` and ``seasonality_mode="additive"`` by default (``"auto"``:
  multiplicative when the series is strictly positive), with the anchoring on
  the last reading and both held-out weights: chosen on the two weeks before the
  sample's evaluation windows, by the median MASE at 7 d over seasonal-naive's
  (the variants compared and their figures: docs/method.md, "Measured on the
  sample: the daily and weekly tiers").
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
from typing import Annotated

import numpy as np
import pandas as pd
from pydantic import BeforeValidator, Field, field_validator
from scipy.optimize import nnls

from forecasting.calendar import CUSTOM_EVENTS, event_name, local_naive, makeup_regressor, prophet_holidays
from forecasting.regularise import hourly_columns
from forecasting.tiers.base import Forecaster, TierSettings, series_values
from forecasting.tiers.naive import naive_quantiles
from forecasting.types import QUANTILES, SeriesMeta

HOLDOUT = 168  # hours held out to measure how much of Prophet's predicted change to keep


def _quiet() -> None:
    """Silence cmdstanpy's per-chain INFO lines (they drown the CLI's progress)."""
    for name in ("prophet", "cmdstanpy"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.ERROR)
        for h in lg.handlers:
            h.setLevel(logging.ERROR)
    logging.getLogger("cmdstanpy").disabled = True  # failures still surface as exceptions


class WeeklyProphetSettings(TierSettings):
    """The weekly tier's options from the ``forecast:`` section."""

    uncertainty_samples: int = Field(default=300, alias="prophet_samples", ge=50, le=10_000, description="Prophet's "
                                     "uncertainty_samples: simulated paths its p90-p99 quantiles come from (weekly "
                                     "tier and the default-Prophet peer)")
    events: list[Annotated[str, BeforeValidator(event_name)]] = Field(
        default_factory=list, alias="events", max_length=len(CUSTOM_EVENTS),
        description="custom events the weekly tier's Prophet models as holidays, e.g. [\"618\", \"double11\"] "
        "(forecasting.calendar.CUSTOM_EVENTS), each at most once")
    holdout: bool = Field(default=True, alias="prophet_holdout", description="fit the weekly tier's second, "
                          "holdout-week Prophet model that sizes how much of Prophet's predicted change its forecast "
                          "keeps (false: all of it; quick runs)")

    @field_validator("events")
    @classmethod
    def _once(cls, v):
        if len(set(v)) < len(v):
            raise ValueError("an event is listed twice")
        return v


class DefaultProphetSettings(TierSettings):
    """Default Prophet's options from the ``forecast:`` section."""

    uncertainty_samples: int = WeeklyProphetSettings.model_fields["uncertainty_samples"]


class WeeklyProphet(Forecaster):
    """Prophet with China's calendar (see module docstring).

    Options: ``events`` (custom event names), ``uncertainty_samples`` and ``holdout`` (defaults of
    :class:`WeeklyProphetSettings`),
    ``calendar`` (True; False gives the default-settings peer: hourly peaks, no
    anchoring), ``anchor`` (True: start from the last reading, see :meth:`predict`),
    ``growth`` (``"flat"``; Prophet's ``"linear"`` also works), ``seasonality_mode``
    (``"additive"``, ``"multiplicative"`` or ``"auto"``).
    """

    step = "1h"
    horizon = 168
    min_history = 72  # 3 days of hours
    refit_every = "7D"
    arch = "prophet-local-ds-mean-anchored"
    settings = WeeklyProphetSettings
    fit_options = ("seed", "events", "calendar", "anchor", "growth", "seasonality_mode", "holdout",
                   "uncertainty_samples")

    def __init__(self, seed: int = 0, events: tuple[str, ...] = (), uncertainty_samples: int | None = None,
                 calendar: bool = True, anchor: bool = True, growth: str = "flat",
                 seasonality_mode: str = "additive", holdout: bool | None = None, **options):
        super().__init__(seed=seed, **options)
        self.events = tuple(events)
        self.anchor = anchor and calendar
        self.growth, self.seasonality_mode = growth, seasonality_mode
        self.uncertainty_samples = WeeklyProphetSettings.default("uncertainty_samples", uncertainty_samples)
        self.holdout = WeeklyProphetSettings.default("holdout", holdout)
        self.calendar = calendar
        self.models: dict[str, object] = {}
        self.tz: dict[str, str] = {}
        #: series_id -> share of Prophet's predicted change kept (:meth:`_holdout_shrink`)
        self.shrink: dict[str, float] = {}

    def _new_model(self, y: np.ndarray, years: list[int]):
        from prophet import Prophet

        _quiet()
        kw = dict(growth=self.growth, daily_seasonality=True, weekly_seasonality=True, yearly_seasonality=False,
                  uncertainty_samples=self.uncertainty_samples)
        if not self.calendar:
            return Prophet(uncertainty_samples=self.uncertainty_samples)
        kw["seasonality_mode"] = (self.seasonality_mode if self.seasonality_mode != "auto"
                                  else "multiplicative" if np.all(y > 0) else "additive")
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
            s = series_values(history, sid, self._columns(history)[0]).dropna()
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
            m = self._fit_prophet(df, years, sid, label)
            if m is None:
                self.fallbacks[sid] = f"{label}: cmdstan optimiser failed twice; seasonal-naive used"
                continue
            self.models[sid] = m
            if self.anchor and self.holdout:
                self.shrink[sid] = self._holdout_shrink(history, sid, s, df, years, label)
        return self

    def _fit_prophet(self, df: pd.DataFrame, years: list[int], sid: str, label: str):
        """A fitted Prophet model, or ``None`` when cmdstan fails with both optimisers
        (each failure is noted in :attr:`warnings`)."""
        for attempt in ({}, {"algorithm": "Newton"}):
            m = self._new_model(df["y"].to_numpy(), years)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m.fit(df, **attempt)
            except RuntimeError as exc:
                self.warnings.setdefault(sid, []).append(f"{label}: cmdstan failed: {exc}")
                continue
            if attempt:
                self.warnings.setdefault(sid, []).append(f"{label}: default optimiser failed; Newton used")
            return m
        return None

    def _holdout_shrink(self, history: pd.DataFrame, sid: str, s: pd.Series, df: pd.DataFrame,
                        years: list[int], label: str) -> float:
        """How much of Prophet's predicted change from an origin to keep, in [0, 1].

        A second model is fitted without the last ``HOLDOUT`` hours; from origins every
        6 hours in them it predicts the change ``yhat(t) - yhat(o)`` to every later hour
        of the holdout, and the least-squares slope through the origin of the realised
        change (the hour's level minus the last reading at the origin) on it, clipped
        to [0, 1], is the shrinkage (Mincer & Zarnowitz 1969, as the other tiers): 0
        where Prophet's shapes carried no information out of sample (the forecast is
        then the last reading), 1 where they were worth their full size. A series too
        short for a holdout (or whose holdout model fails) keeps 1, noted in
        :attr:`warnings`."""
        end = s.index[-1]
        cut = end - pd.Timedelta(hours=HOLDOUT)
        keep = (s.index <= cut)
        if keep.sum() < self.min_history:
            self.warnings.setdefault(sid, []).append(
                f"{label}: {int(keep.sum())} hours before the holdout week < {self.min_history}; "
                "Prophet's changes kept at full size (no shrinkage)")
            return (1.0, 0.0)
        mh = self._fit_prophet(df[keep].reset_index(drop=True), years, sid, label)
        if mh is None:
            self.warnings.setdefault(sid, []).append(f"{label}: holdout model failed; no shrinkage")
            return (1.0, 0.0)
        lev_col, ref_col = self._columns(history)
        grid = pd.date_range(cut, end, freq="1h")
        lev = series_values(history, sid, lev_col).reindex(grid).to_numpy()
        ref = series_values(history, sid, ref_col).reindex(grid).ffill().to_numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yh = self._point(mh, self._frame_in(local_naive(grid, self.tz[sid]), sid))
        shape, level, act = [], [], []
        for i in range(0, len(grid) - 24, 6):
            if not np.isfinite(ref[i]):
                continue
            shape.append(yh[i + 1:] - yh[i])
            level.append(yh[i + 1:] - ref[i])
            act.append(lev[i + 1:] - ref[i])
        if not act:
            return (1.0, 0.0)
        x = np.column_stack([np.concatenate(shape), np.concatenate(level)])
        a = np.concatenate(act)
        ok = np.isfinite(x).all(axis=1) & np.isfinite(a)
        if not ok.any() or not np.any(x[ok]):
            return (0.0, 0.0)
        coef, _ = nnls(x[ok], a[ok])
        return tuple(float(c) for c in np.clip(coef, 0.0, 1.0))

    def _columns(self, history: pd.DataFrame) -> tuple[str, str]:
        """(level, reference) columns: the hour's mean and its last 5-minute reading
        for the calendar tier; the peer (``calendar=False``) fits the hourly peak."""
        return hourly_columns(history) if self.calendar else ("value", "value")

    @staticmethod
    def _point(m, fut: pd.DataFrame) -> np.ndarray:
        """Prophet's deterministic ``yhat`` for ``fut`` (trend and seasonal components, as
        ``Prophet.predict`` computes them, without its interval sampling)."""
        df = m.setup_dataframe(fut.copy())
        trend = m.predict_trend(df)
        comp = m.predict_seasonal_components(df)
        return np.asarray(trend * (1 + comp["multiplicative_terms"]) + comp["additive_terms"], dtype="float64")

    def predict(self, history, origins=None):
        """Quantiles at each origin. Prophet's forecast for a target does not depend on
        data after its fit, so one ``predictive_samples`` call covers every origin of a
        series (the origin hours up to the last origin + 168 h) and each origin takes
        its own 168-hour slice.

        Anchoring (calendar tier, ``anchor``; the module docstring): the median is the
        last reading at the origin (``last`` of :func:`~forecasting.regularise.to_hourly`)
        plus the held-out shares of Prophet's predicted change and of its level's gap
        to that reading; a model fitted up to a week ago thus starts from today's
        level. An origin without any reading keeps Prophet's own forecast (stated)."""
        frames = []
        step = pd.Timedelta("1h")
        lev_col, ref_col = self._columns(history)
        for sid, ors in self._origins(history, origins).items():
            m = self.models.get(sid)
            s = series_values(history, sid, lev_col)
            if m is None:
                for o in ors:
                    ctx = s[s.index <= o].to_numpy()
                    season = 168 if len(ctx) >= 336 else 24
                    frames.append(self._frame(sid, o, naive_quantiles(ctx, self.horizon, season=season)))
                continue
            ors = sorted(ors)
            ts = pd.date_range(ors[0], ors[-1] + step * self.horizon, freq=step)
            fut = self._frame_in(local_naive(ts, self.tz.get(sid, "UTC")), sid)
            np.random.seed(self.seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                samples = m.predictive_samples(fut)["yhat"]
                point = self._point(m, fut) if self.anchor else None
            q = np.quantile(samples, QUANTILES, axis=1).T
            ref = series_values(history, sid, ref_col).ffill() if self.anchor else None
            for o in ors:
                k = int((o - ors[0]) / step)
                qo = q[k + 1:k + 1 + self.horizon]
                if self.anchor:
                    last = ref[ref.index <= o]
                    if len(last) and np.isfinite(last.iloc[-1]):
                        b_shape, b_level = self.shrink.get(sid, (1.0, 0.0))
                        yo, yt, r = point[k], point[k + 1:k + 1 + self.horizon], last.iloc[-1]
                        # last reading + b_shape x predicted change + b_level x (Prophet's level -
                        # last reading); the bands keep their width around it
                        p50 = r + b_shape * (yt - yo) + b_level * (yt - r)
                        qo = qo - qo[:, :1] + p50[:, None]
                    else:
                        self.fallbacks.setdefault(sid, "weekly: no reading at or before an origin to anchor "
                                                       "on; Prophet's own level used there")
                frames.append(self._frame(sid, o, qo))
        return self._concat(frames)

    # persistence (Forecaster.save / load): prophet.serialize JSON, no pickle ----------
    def fitted_series(self) -> list[str]:
        return sorted(self.models)

    def _state(self, series: list[str]) -> dict:
        from prophet.serialize import model_to_json

        return {sid: {"model": model_to_json(self.models[sid]), "timezone": self.tz.get(sid, "UTC"),
                      "shrink": list(self.shrink.get(sid, (1.0, 0.0)))} for sid in series}

    def _restore(self, state: dict, directory) -> None:
        from prophet.serialize import model_from_json

        for sid, doc in state.items():
            self.models[sid] = model_from_json(doc["model"])
            self.tz[sid] = doc["timezone"]
            self.shrink[sid] = tuple(float(v) for v in doc["shrink"])


class DefaultProphet(WeeklyProphet):
    """Prophet with default settings: the peer a user would pick instead (backtests only)."""

    settings = DefaultProphetSettings

    def __init__(self, seed: int = 0, **options):
        options.pop("calendar", None)
        super().__init__(seed=seed, calendar=False, **options)
