"""The ``hourly`` tier: statsmodels ETS on 5-minute data, 12 steps (1 h) ahead.

Model choice (Hyndman et al. 2008, *Forecasting with Exponential Smoothing*;
statsmodels ``ETSModel``), by AICc in a stepwise search over the family (the
pruning idea of Hyndman & Khandakar 2008's stepwise ``auto.arima``, applied
to ETS to keep the fit cheap):

1. additive error with trend none / additive / additive damped;
2. the best of those with an additive daily season (288 steps), only when
   the fit window holds at least two full seasons;
3. the best so far with multiplicative error (and a multiplicative season if
   seasonal), only when the window is strictly positive (a multiplicative fit
   fails on values <= 0).

A stage's candidate replaces the best only with a lower AICc. Five fits at
most, against twelve for the exhaustive search.

``initialization_method`` is always explicit (statsmodels 0.15 requires it):
``estimated`` for non-seasonal models and ``heuristic`` for seasonal ones
(estimating 288 initial seasonal states is slow and unstable).

Prediction intervals come from the model: analytic for additive-error models
and simulation for the others (``ETSResults.get_prediction``, seeded with the
tier's seed so a forecast is reproducible), read at the quantiles
0.5/0.9/0.95/0.99.

Between refits, forecasts at later origins run the fitted model's filter over
the extended data with the same parameters (``ETSModel.smooth``): new data
moves the state, never the parameters. ``capplan plan`` refits on every run;
rolling-origin backtests re-estimate weekly (a compromise that keeps the
backtest of a month of 5-minute data within seconds per series).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from statsmodels.tsa.exponential_smoothing.ets import ETSModel

from forecasting.tiers.base import Forecaster, register, series_values
from forecasting.tiers.naive import naive_quantiles
from forecasting.types import QUANTILES, SeriesMeta

SEASON = 288  # one day of 5-minute steps


def _steps(y: np.ndarray):
    """Candidate specs of the stepwise search, as a generator that is sent the
    best spec so far after each stage (see :meth:`HourlyETS._select`)."""
    best = yield [dict(error="add", trend=t, damped_trend=d, seasonal=None)
                  for t, d in ((None, False), ("add", False), ("add", True))]
    if len(y) >= 2 * SEASON:
        best = yield [dict(best, seasonal="add", seasonal_periods=SEASON)]
    if np.all(y > 0):
        mul = dict(best, error="mul")
        if mul.get("seasonal"):
            mul["seasonal"] = "mul"
        yield [mul]


def _build(y: np.ndarray, spec: dict) -> ETSModel:
    init = "heuristic" if spec.get("seasonal") else "estimated"
    return ETSModel(pd.Series(y), initialization_method=init, **spec)


@register("hourly")
class HourlyETS(Forecaster):
    """Exponential smoothing tier (see module docstring).

    Options: ``fit_window`` (steps of history used to fit, default 864 = 3
    days: two full seasons plus one), ``min_history`` override.
    """

    step = "5min"
    horizon = 12
    min_history = 36  # 3 hours
    refit_every = "7D"  # backtests: parameters re-estimated weekly, state updated at every origin
    arch = "ets-stepwise-aicc"

    def __init__(self, seed: int = 0, fit_window: int = 864, **options):
        super().__init__(seed=seed, **options)
        self.fit_window = fit_window
        self.models: dict[str, dict] = {}

    def fit(self, history: pd.DataFrame, meta: dict[str, SeriesMeta]) -> "HourlyETS":
        """Select and fit one ETS model per series on its last ``fit_window`` points."""
        self._note_range(history)
        for sid in history["series_id"].unique():
            s = series_values(history, sid).iloc[-self.fit_window:]
            y = s.ffill().bfill().to_numpy()
            if s.notna().sum() < self.min_history:
                self.fallbacks[sid] = (f"hourly: {int(s.notna().sum())} points < {self.min_history} needed for ETS; "
                                       "naive (last value) used")
                continue
            if np.nanmax(y) == np.nanmin(y):
                self.fallbacks[sid] = "hourly: constant history, ETS has nothing to fit; naive (last value) used"
                continue
            best, best_ic, caught = self._select(y)
            if caught:
                self.warnings[sid] = caught[:5]
            if best is None:
                self.fallbacks[sid] = "hourly: no ETS candidate could be fitted; naive (last value) used"
                continue
            spec, res = best
            self.models[sid] = {
                "spec": spec,
                "params": [float(v) for v in res.params],
                "start": s.index[0],
                "aicc": float(best_ic),
            }
        return self

    @staticmethod
    def _select(y: np.ndarray):
        """Stepwise AICc search (module docstring); returns ``((spec, results) | None, aicc, notes)``."""
        best, best_ic, caught = None, math.inf, []
        steps = _steps(y)
        specs = next(steps)
        while True:
            for spec in specs:
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    try:
                        res = _build(y, spec).fit(disp=False, maxiter=200)
                    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:  # skipped, and noted
                        caught.append(f"{spec}: {type(exc).__name__}: {exc}")
                        continue
                    caught.extend(f"{spec}: {x.message}" for x in w if "Convergence" in type(x.message).__name__)
                ic = res.aicc if np.isfinite(res.aicc) else res.aic
                if np.isfinite(ic) and ic < best_ic:
                    best, best_ic = (spec, res), ic
            if best is None:
                return None, best_ic, caught
            try:
                specs = steps.send(best[0])
            except StopIteration:
                return best, best_ic, caught

    def predict(self, history, origins=None):
        """Quantiles at each origin; a series without a fitted model, or whose model
        gives non-finite or failing intervals at an origin, gets naive quantiles and a
        stated entry in :attr:`fallbacks` (never a silent default)."""
        frames = []
        for sid, ors in self._origins(history, origins).items():
            s = series_values(history, sid)
            m = self.models.get(sid)
            for o in ors:
                ctx = s[s.index <= o]
                q = None
                if m is not None:
                    q, why = self._predict_one(ctx[ctx.index >= m["start"]], m)
                    if q is None:
                        self.fallbacks.setdefault(sid, f"hourly: ETS {why}; naive (last value) used")
                if q is None:
                    q = naive_quantiles(ctx.to_numpy(), self.horizon)
                frames.append(self._frame(sid, o, q))
        return self._concat(frames)

    def _predict_one(self, ctx: pd.Series, m: dict) -> tuple[np.ndarray | None, str]:
        """``((horizon, 4) quantiles, "")`` or ``(None, reason)``.

        Simulated intervals (multiplicative models) are seeded through ``rng``
        (statsmodels 0.15 renamed ``random_state``): same data, same forecast.
        """
        y = ctx.ffill().bfill().to_numpy()
        if len(y) == 0 or np.isnan(y).all():
            return None, "has no context at this origin"
        if m["spec"]["error"] == "mul" and not np.all(y > 0):
            return None, "multiplicative model met a value <= 0 in the context"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                res = _build(y, m["spec"]).smooth(np.asarray(m["params"]))
                n = len(y)
                pred = res.get_prediction(start=n, end=n + self.horizon - 1,
                                          rng=np.random.default_rng(self.seed))
                out = np.empty((self.horizon, len(QUANTILES)))
                out[:, 0] = np.asarray(pred.predicted_mean)
                for j, q in enumerate(QUANTILES[1:], start=1):
                    out[:, j] = np.asarray(pred.pred_int(alpha=2 * (1 - q)))[:, 1]
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
                return None, f"prediction failed ({type(exc).__name__}: {exc})"
        if not np.all(np.isfinite(out)):
            return None, "gave non-finite quantiles"
        return out, ""

    # persistence (Forecaster.save / load): parameters as JSON --------------------
    def fitted_series(self) -> list[str]:
        return sorted(self.models)

    def _state(self, series: list[str]) -> dict:
        return {sid: {**self.models[sid], "start": self.models[sid]["start"].isoformat()} for sid in series}

    def _restore(self, state: dict, directory) -> None:
        for sid, m in state.items():
            self.models[sid] = {"spec": dict(m["spec"]), "params": [float(v) for v in m["params"]],
                                "start": pd.Timestamp(m["start"]), "aicc": float(m["aicc"])}
