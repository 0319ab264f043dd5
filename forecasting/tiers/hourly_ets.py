"""The ``hourly`` tier: statsmodels ETS on 5-minute data, 12 steps (1 h) ahead.

Two readings of the last ``fit_window`` points compete (Hyndman et al. 2008,
*Forecasting with Exponential Smoothing*; statsmodels ``ETSModel``), both
conditional on the first value:

* **changes**: the model runs on the one-step changes ``z[t] = y[t] - y[t-1]``
  and the forecast is the last value plus the (shrunk) sum of the predicted
  changes. GPU demand is step-shaped, and a level model reads its steps as a
  lagging level; on the changes, a smoothing weight of 0 is exactly the naive
  forecast (the last value), so persistence is one of the models it can fit;
* **level**: ETS(A,N,N) of the level itself, from a known initial level (the
  first value). Where demand is noisy around a slowly moving level (a web
  service's request rate, a pool whose jobs come and go every few minutes), a
  smoothing weight below 1 averages the noise out and beats the last value;
  with a weight of 1 it is the naive forecast again.

Model choice (:meth:`HourlyETS._choose`):

1. ETS(A,N,N) of each reading; the one with the lower mean absolute error over
   leads 1-12 from every origin of the fit window is kept (:func:`horizon_mae`;
   the level must win by more than :data:`TIE`). The tier is scored on the hour
   ahead: a smoothed level wins one step ahead on noise, and loses to the last
   value for an hour after each step of a step-shaped pool, which one-step
   criteria such as AICc miss;
2. when the changes won and the fit window holds two full seasons, ETS(A,N,A)
   with a daily season of the changes (288 steps: a daily ramp); it replaces
   the first only with a lower AICc (the pruning idea of Hyndman & Khandakar
   2008's stepwise ``auto.arima``).

No multiplicative model: changes take both signs. ``initialization_method`` is
always explicit (statsmodels 0.15 requires it).

Shrinkage toward naive, for the changes model (:func:`change_shrinkage`): the
predicted changes are multiplied by the least-squares slope of the realised on
the predicted one-step changes in the fit window, clipped to [0, 1]. The level
model is not shrunk: its smoothing weight is already the evidence's answer.

Bands: exact Gaussian quantiles, with no simulation noise and no seed. For the
changes (:func:`change_sum_sd`): both candidates have additive Gaussian errors
and, for the seasonal one, a season (288 steps) longer than the 12-step
horizon, so the sum of the next ``h`` changes is Gaussian around its mean with
standard deviation ``sigma * sqrt(sum_{j<h} (1 + alpha * j)^2)``. For the level
(:func:`level_sd`): ``sigma * sqrt(1 + (h - 1) * alpha^2)`` (Hyndman et al. 2008,
ch. 6, class 1 variances).

Between refits, forecasts at later origins run the fitted model's filter over
the extended data with the same parameters (``ETSModel.smooth``): new data
moves the state, never the parameters. ``capplan plan`` refits on every run;
rolling-origin backtests re-estimate weekly. A series the model cannot serve
(too short, constant, no candidate fitted, a failed or non-finite prediction)
gets naive quantiles and a stated entry in ``fallbacks``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from scipy.stats import norm
from statsmodels.tsa.exponential_smoothing.ets import ETSModel

from forecasting.tiers.base import Forecaster, series_values
from forecasting.tiers.naive import naive_quantiles
from forecasting.types import QUANTILES, STEPS_PER_DAY, SeriesMeta

SEASON = STEPS_PER_DAY  # one day


READINGS = ("changes", "level")  #: the two readings of the level; ``changes`` first wins a tie
#: the level reading replaces the changes only with a horizon MAE lower by more than this share: on a
#: step-shaped pool both fit the last value (weights 0 and 1) and differ by rounding, not evidence
TIE = 0.01
PLAIN = dict(error="add", trend=None, damped_trend=False, seasonal=None)  #: ETS(A,N,N)


def horizon_mae(y: np.ndarray, on: str, fitted: np.ndarray, shrink: float, horizon: int) -> float:
    """Mean absolute error (GPUs) over leads ``1..horizon`` of a non-seasonal candidate's
    forecasts from every origin of the fit window, from its one-step fitted values alone (no
    look-ahead: the forecast from origin ``t`` uses ``y[..t]``).

    ``y``: the fit window's level, shape ``(n,)``; ``fitted``: the candidate's one-step fitted
    values, shape ``(n - 1,)`` (of ``y[1:]`` for ``level``, of ``diff(y)`` for ``changes``).
    ETS(A,N,N) forecasts are flat in what they model: from origin ``t`` the level reading
    forecasts ``fitted[t]`` at every lead, the changes reading ``y[t] + shrink * h * fitted[t]``.
    This is the criterion between the readings: the tier is scored on the hour ahead, where a
    smoothed level that wins one step ahead can lose to the last value after a step (AICc
    measures one step only). NaN when the window is shorter than ``horizon + 1``."""
    n = len(y)
    if n <= horizon + 1:
        return float("nan")
    future = np.lib.stride_tricks.sliding_window_view(y[1:], horizon)  # (n - horizon, horizon): y[t+1 .. t+h]
    t = np.arange(future.shape[0])
    f1 = np.asarray(fitted, dtype="float64")[t][:, None]
    h = np.arange(1, horizon + 1)[None, :]
    pred = f1 if on == "level" else y[t][:, None] + shrink * h * f1
    return float(np.nanmean(np.abs(future - pred)))


def change_shrinkage(z: np.ndarray, fitted: np.ndarray) -> float:
    """How much of the model's predicted change to keep, in [0, 1].

    The least-squares slope through the origin of the realised one-step changes
    ``z`` on the model's one-step predictions of them (``fitted``) over the fit
    window — a Mincer–Zarnowitz style correction toward the naive reference
    (Mincer & Zarnowitz 1969): 0 when the predicted changes carry no information
    (the forecast is the last value), 1 when they are worth their full size.
    """
    ok = np.isfinite(z) & np.isfinite(fitted)
    den = float(np.dot(fitted[ok], fitted[ok]))
    if den <= 0:
        return 0.0
    return float(np.clip(np.dot(fitted[ok], z[ok]) / den, 0.0, 1.0))


def change_sum_sd(sigma: float, alpha: float, horizon: int) -> np.ndarray:
    """Standard deviation (GPUs) of the sum of the next ``1..horizon`` one-step changes
    under ETS(A,N,N) or ETS(A,N,A) with a season longer than ``horizon``: shape
    ``(horizon,)``, ``sigma * sqrt(cumsum((1 + alpha * j)^2))`` for ``j = 0 .. horizon-1``.

    Derivation (Hyndman et al. 2008, *Forecasting with Exponential Smoothing*, ch. 6):
    ``z[n+j] = l[n] + alpha * (e[n+1] + ... + e[n+j-1]) + s[n+j-m] + e[n+j]``, so the sum
    of ``h`` changes weighs error ``e[n+i]`` by ``1 + alpha * (h - i)``; the seasonal
    states read within the horizon are all known at the origin when ``m > horizon``.
    ``sigma``: the error's standard deviation (statsmodels' ``sqrt(scale)``, the one its
    ``simulate`` draws with); ``alpha``: ``smoothing_level``."""
    j = np.arange(horizon, dtype="float64")
    return float(sigma) * np.sqrt(np.cumsum((1.0 + float(alpha) * j) ** 2))


def level_sd(sigma: float, alpha: float, horizon: int) -> np.ndarray:
    """Standard deviation (GPUs) of the ``1..horizon``-step forecast errors of ETS(A,N,N)
    of the level: shape ``(horizon,)``, ``sigma * sqrt(1 + (h - 1) * alpha^2)`` (Hyndman et
    al. 2008, ch. 6: the ``h``-step error is ``e[n+h] + alpha * (e[n+1] + ... + e[n+h-1])``)."""
    h = np.arange(1, horizon + 1, dtype="float64")
    return float(sigma) * np.sqrt(1.0 + (h - 1.0) * float(alpha) ** 2)


def _build(y: np.ndarray, spec: dict) -> ETSModel:
    """An ETS model of the level ``y`` as ``spec["on"]`` reads it, on the observations
    ``y[1:]`` given ``y[0]`` either way (so both readings forecast the same points).

    ``on == "changes"``: of the one-step changes ``diff(y)``; a non-seasonal model starts
    from a known level of 0 (no change): an estimated initial level of the changes is a
    drift, which would extrapolate a few days' growth into every forecast. Seasonal models
    use ``heuristic`` initialisation (estimating 288 seasonal states is slow and unstable).
    ``on == "level"``: of ``y[1:]`` from the known initial level ``y[0]``."""
    ets = {k: v for k, v in spec.items() if k != "on"}
    if spec.get("on", "changes") == "level":
        return ETSModel(pd.Series(y[1:]), initialization_method="known", initial_level=float(y[0]), **ets)
    z = np.diff(y)
    if spec.get("seasonal"):
        return ETSModel(pd.Series(z), initialization_method="heuristic", **ets)
    return ETSModel(pd.Series(z), initialization_method="known", initial_level=0.0, **ets)


def _aicc(res) -> float:
    """AICc of a fitted ETS model (AIC when AICc is undefined); ``inf`` when neither is finite."""
    ic = res.aicc if np.isfinite(res.aicc) else res.aic
    return float(ic) if np.isfinite(ic) else math.inf


def _fit(y: np.ndarray, spec: dict, caught: list[str]):
    """The fitted model of ``spec`` on ``y`` (:func:`_build`), or None when statsmodels raises;
    the failure and any convergence warning are appended to ``caught``."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            res = _build(y, spec).fit(disp=False, maxiter=200)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:  # skipped, and noted
            caught.append(f"{spec}: {type(exc).__name__}: {exc}")
            return None
        caught.extend(f"{spec}: {x.message}" for x in w if "Convergence" in type(x.message).__name__)
    return res


class HourlyETS(Forecaster):
    """Exponential smoothing tier (see module docstring).

    Options: ``fit_window`` (steps of history used to fit, default 864 = 3
    days: two full seasons plus one), ``min_history`` override.
    """

    step = "5min"
    horizon = 12
    min_history = 36  # 3 hours
    refit_every = "7D"  # backtests: parameters re-estimated weekly, state updated at every origin
    arch = "ets-changes-or-level"
    fit_options = ("fit_window",)

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
            got, caught = self._choose(y)
            if caught:
                self.warnings[sid] = caught[:5]
            if got is None:
                self.fallbacks[sid] = "hourly: no ETS candidate could be fitted; naive (last value) used"
                continue
            spec, res, shrink = got
            self.models[sid] = {
                "spec": spec,
                "params": [float(v) for v in res.params],
                "start": s.index[0],
                "aicc": _aicc(res),
                "shrink": shrink,
            }
        return self

    def _choose(self, y: np.ndarray):
        """``((spec, results, shrink) | None, notes)``: ETS(A,N,N) of each reading
        (:data:`READINGS`), the one with the lower :func:`horizon_mae` kept (the level by more than
        :data:`TIE`); then, for the changes and with two full seasons of them, ETS(A,N,A) with a
        daily season replaces it only with a lower AICc (Hyndman & Khandakar 2008's stepwise pruning)."""
        caught: list[str] = []
        fitted = {on: r for on in READINGS if (r := _fit(y, dict(PLAIN, on=on), caught)) is not None}
        if not fitted:
            return None, caught
        z = np.diff(y)
        shrink = {on: change_shrinkage(z, np.asarray(r.fittedvalues, dtype="float64")) if on == "changes" else 1.0
                  for on, r in fitted.items()}
        mae = {on: horizon_mae(y, on, np.asarray(r.fittedvalues, dtype="float64"), shrink[on], self.horizon)
               for on, r in fitted.items()}
        score = {on: (mae[on] if np.isfinite(mae[on]) else math.inf) * (1.0 if on == READINGS[0] else 1.0 + TIE)
                 for on in fitted}
        on = min(fitted, key=lambda k: (score[k], READINGS.index(k)))
        spec, res = dict(PLAIN, on=on), fitted[on]
        if on == "changes" and len(z) >= 2 * SEASON:
            seasonal = dict(spec, seasonal="add", seasonal_periods=SEASON)
            r = _fit(y, seasonal, caught)
            if r is not None and _aicc(r) < _aicc(res):
                spec, res = seasonal, r
                shrink[on] = change_shrinkage(z, np.asarray(r.fittedvalues, dtype="float64"))
        return (spec, res, shrink[on]), caught

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

        The model runs on the context with its fitted parameters (``smooth``). For
        the changes, the forecast is the last value plus the shrunk sum of the
        predicted changes, with the exact Gaussian quantiles of the summed changes
        (:func:`change_sum_sd`); for the level, the smoothed level with the exact
        quantiles of its errors (:func:`level_sd`). Same data, same forecast,
        whatever the seed.
        """
        y = ctx.ffill().bfill().to_numpy()
        if len(y) < 2 or np.isnan(y).all():
            return None, "has too little context at this origin"
        on = m["spec"].get("on", "changes")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                res = _build(y, m["spec"]).smooth(np.asarray(m["params"]))
                path = np.asarray(res.forecast(self.horizon), dtype="float64")
                alpha = float(np.asarray(res.params)[res.model.param_names.index("smoothing_level")])
                sigma = math.sqrt(max(float(res.scale), 0.0))
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
                return None, f"prediction failed ({type(exc).__name__}: {exc})"
        if on == "level":
            centre, sd = path, level_sd(sigma, alpha, self.horizon)
        else:
            centre, sd = y[-1] + m["shrink"] * np.cumsum(path), change_sum_sd(sigma, alpha, self.horizon)
        with np.errstate(invalid="ignore", over="ignore"):  # a non-finite context: refused just below
            out = centre[:, None] + sd[:, None] * norm.ppf(np.asarray(QUANTILES))[None, :]
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
                                "start": pd.Timestamp(m["start"]), "aicc": float(m["aicc"]),
                                "shrink": float(m["shrink"])}
