"""What every replay shares (:mod:`optimizer.engine.replay`, :mod:`optimizer.inference.lookahead`): its input
(:class:`ReplayInput`), the forecast lookups that see only forecasts issued before a decision
(:func:`latest_before`), the window's metrics (:func:`window_metrics`), and the inference
control loop on the replay's decision timeline (:func:`run_controller`, :func:`observed_demand`;
the timeline is described in :mod:`optimizer.engine.replay`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from forecasting.metrics import idle_ratio
from forecasting.plugins import Registry
from forecasting.types import QCOLS, STEP_S
from optimizer.book.prices import GpuPrice
from optimizer.book.purchase import layer_mix
from optimizer.engine.hpa_controller import HPA, ScalingPolicy, ScalingRules
from optimizer.plan.policy import InferenceParams, Metrics

#: The inference family registry (:class:`forecasting.plugins.Registry`): ``InferenceParams.family`` -> replay function
#: ``(inp, p, cold_start_s, initial, metrics_lag_s) -> (Metrics, series)`` (the signature of
#: :func:`optimizer.engine.replay.replay_inference`). Each family registers itself in its own module (``hpa`` in
#: :mod:`optimizer.engine.replay`, ``lookahead`` and ``predictive`` in :mod:`optimizer.inference`).
INFERENCE_FAMILIES: Registry[Callable[..., tuple]] = Registry("inference family")

#: ``plan.spot_outage`` models (:func:`optimizer.engine.replay.spot_outage`)
SPOT_OUTAGES = ("recovery", "replacement")


@dataclass
class ReplayInput:
    """Demand and forecast lookups for one series on one window.

    ``times``: the data's grid (UTC; 5 minutes, or finer for inference); ``demand``: float array (NaN = missing);
    ``step_s``: grid step in seconds. For training, ``week_mean[q]``,
    ``day_max[q]``, ``hour_max[q]`` and ``day_level[q]`` (the day's newsvendor
    level, :mod:`optimizer.training.newsvendor`) give per time step the decision inputs
    built from forecasts issued before the week/day/hour. For inference,
    ``hourly_fc[q]`` is ``(n_origins, 12)`` with
    ``hourly_origin_idx[t]`` the latest origin before ``t`` (-1: none) and
    ``hourly_offset[t]`` the forecast steps (``fc_step_s``) from that origin to ``t``.
    """

    times: pd.DatetimeIndex
    demand: np.ndarray
    step_s: int
    price: GpuPrice
    fc_step_s: int = STEP_S  # the forecasts' grid (hourly_offset counts these steps)
    gpus_per_unit: float = 1.0
    week_mean: dict[str, np.ndarray] = field(default_factory=dict)
    day_max: dict[str, np.ndarray] = field(default_factory=dict)
    hour_max: dict[str, np.ndarray] = field(default_factory=dict)  # also the calibrated c80/c90/c95
    # their margins over p50 (optimizer.training.calibrated)
    topup_margin: dict[str, np.ndarray] = field(default_factory=dict)
    day_level: dict[str, np.ndarray] = field(default_factory=dict)  # newsvendor level (optimizer.training.newsvendor)
    day_empirical: np.ndarray | None = None  # model-free daily level (optimizer.training.empirical), on first use
    day_calibrated: np.ndarray | None = None  # calibrated daily level (optimizer.training.calibrated_day)
    day_errors: np.ndarray | None = None  # the errors the plan's next day pools (optimizer.training.calibrated_day)
    hourly_fc: dict[str, np.ndarray] = field(default_factory=dict)
    hourly_origin_idx: np.ndarray | None = None
    hourly_offset: np.ndarray | None = None
    history_before: np.ndarray | None = None  # demand before the window (baseline's "last observed")
    quota: float | None = None  # training: the pool's quota, GPUs (SeriesMeta.quota_gpus), None if unknown
    # training: the replay holds the pool to ``quota`` (optimizer.book.purchase.within_quota)
    hold_to_quota: bool = False
    day_peak: np.ndarray | None = None  # day_start_peak(), computed on first use
    count_tol: float | None = None  # rounding tolerance of whole GPUs (optimizer.book.whole_units), on first use
    spot_outage: str = "recovery"  # training: what a spot interruption costs (optimizer.engine.replay.spot_outage)
    replacement_s: int = 90  # training, spot_outage "replacement": until a replacement node serves (cold start, s)
    #: training, spot_outage "replacement": GPU-hours of lost work bought on demand per spot GPU-hour
    #: (interruption rate x recovery hours, the GPU model's terms); the limit prices its spot with it
    #: (optimizer.rivals.perfect_foresight); 0 under "recovery"
    spot_redo: float = 0.0


def latest_before(forecasts: pd.DataFrame, decision_times: pd.DatetimeIndex) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """The sorted unique ``issued_at`` values, and per decision time the index
    of the latest forecast issued strictly before it (-1 when there is none)."""
    issued = pd.DatetimeIndex(forecasts["issued_at"].unique()).sort_values()
    return issued, issued.searchsorted(decision_times, side="left") - 1


def period_reduce(forecasts: pd.DataFrame, times: pd.DatetimeIndex, period_starts: pd.DatetimeIndex,
                  period_len: pd.Timedelta, reduce) -> dict[str, np.ndarray]:
    """Per time step, ``reduce(g, q, period_start)`` of the forecast rows ``g``
    (columns of :data:`forecasting.types.FORECAST_COLUMNS`) that the forecast latest
    before the step's decision period began holds for that period; ``q`` is the
    quantile column.

    Returns a dict quantile column -> float array aligned with ``times``
    (NaN where no forecast was available).
    """
    out = {q: np.full(len(times), np.nan) for q in QCOLS}
    if forecasts.empty:
        return out
    issued, k_of = latest_before(forecasts, period_starts)
    by_issue = dict(tuple(forecasts.groupby("issued_at")))
    pidx = period_starts.searchsorted(times, side="right") - 1
    for i, ps in enumerate(period_starts):
        if k_of[i] < 0:
            continue
        g = by_issue[issued[k_of[i]]]
        g = g[(g["timestamp"] >= ps) & (g["timestamp"] < ps + period_len)]
        if g.empty:
            continue
        mask = pidx == i
        for q in QCOLS:
            out[q][mask] = reduce(g, q, ps)
    return out


def period_lookup(forecasts: pd.DataFrame, times: pd.DatetimeIndex, period_starts: pd.DatetimeIndex,
                  period_len: pd.Timedelta, agg: str) -> dict[str, np.ndarray]:
    """Per time step, ``agg`` (``mean`` or ``max``) of the forecast that was
    latest before the step's decision period began, over that period
    (:func:`period_reduce`).

    Returns a dict quantile column -> float array aligned with ``times``
    (NaN where no forecast was available).
    """
    return period_reduce(forecasts, times, period_starts, period_len, lambda g, q, ps: getattr(g[q], agg)())


def window_metrics(demand: np.ndarray, cap: np.ndarray, cost: float, step_h: float, events: int,
             step_cost: np.ndarray | None = None) -> Metrics:
    per_day = max(1, int(round(24 / step_h)))
    daily_cost = None if step_cost is None or len(step_cost) == 0 else \
        [float(x) for x in np.bincount(np.arange(len(step_cost)) // per_day, weights=step_cost)]
    ok = np.isfinite(demand)
    d, c = demand[ok], cap[ok]
    if len(d) == 0:
        return Metrics(cost_usd=float(cost), coverage=float("nan"), idle_ratio=float("nan"), unmet=0.0,
                       scale_events=events, daily_cost_usd=daily_cost)
    covered = c >= d - 1e-9
    day = np.flatnonzero(ok) // per_day  # day of the window of each known step
    daily = np.bincount(day, weights=covered) / np.bincount(day)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(c > 0, d / c, np.where(d > 0, np.inf, 0.0))
    return Metrics(
        cost_usd=float(cost),
        coverage=float(covered.mean()),
        idle_ratio=idle_ratio(d, c),
        unmet=float(np.maximum(d - c, 0).sum() * step_h),
        scale_events=int(events),
        p95_utilization=float(np.quantile(np.minimum(util, 10.0), 0.95)),
        daily_coverage=[float(x) for x in daily[np.isfinite(daily)]],
        daily_cost_usd=daily_cost,
    )

def hpa_from_params(p: InferenceParams, step_s: int) -> HPA:
    """Build the HPA controller that ``p`` describes (Percent policies per ``period_s``)."""
    up = ScalingRules(p.scale_up_window_s, (ScalingPolicy("Percent", p.scale_up_percent, p.period_s),), "Max")
    down = ScalingRules(p.scale_down_window_s, (ScalingPolicy("Percent", p.scale_down_percent, p.period_s),), "Max")
    return HPA(min_replicas=max(p.min_replicas, 1), max_replicas=p.max_replicas, scale_up=up, scale_down=down)



def observed_demand(inp: ReplayInput, metrics_lag_s: int = 60) -> np.ndarray:
    """Per step ``i``: the latest known demand observable at ``t_i`` — that of step
    ``i - 1 - ceil(metrics_lag_s / step_s)`` or earlier (NaN skipped, the
    history before the window included); 0 when nothing is known yet."""
    lag = 1 + int(np.ceil(max(metrics_lag_s, 0) / inp.step_s - 1e-9))
    before = inp.history_before if inp.history_before is not None else np.array([])
    allv = pd.Series(np.concatenate([before, inp.demand])).ffill().fillna(0.0).to_numpy()
    off = len(before)
    idx = np.arange(len(inp.demand)) + off - lag
    return np.where(idx >= 0, allv[np.clip(idx, 0, None)], 0.0) if len(allv) else np.zeros(0)


def run_controller(inp: ReplayInput, decide, cold_start_s: int, initial: int, metrics_lag_s: int = 60
                   ) -> tuple[Metrics, dict]:
    """Run ``decide(now_s, current_spec, observed_demand, i) -> new spec`` once per
    step on the timeline of the module docstring and account the result:
    ``(metrics, {"replicas": spec per step, "provisioned": ready per step})``.
    The ``initial`` replicas are ready at the first step."""
    n = len(inp.times)
    step = inp.step_s
    delay = int(np.ceil(max(cold_start_s, 0) / step - 1e-9))
    obs = observed_demand(inp, metrics_lag_s)
    replicas = np.zeros(n)
    prov = np.zeros(n)
    pending = np.zeros(n + delay + 1)  # replicas becoming ready at step k
    ready = float(initial)
    cur = int(initial)
    events = 0
    for i in range(n):
        ready += pending[i]
        pending[i] = 0.0
        new = int(decide(i * step, cur, float(obs[i]), i))
        if new > cur:
            if delay == 0:
                ready += new - cur
            else:
                pending[i + delay] += new - cur
        elif new < cur:
            drop = cur - new
            # scale-down removes starting replicas first, then ready ones
            for k in range(min(i + delay, len(pending) - 1), i, -1):
                take = min(pending[k], drop)
                pending[k] -= take
                drop -= take
            ready -= drop
        if new != cur:
            events += 1
        cur = new
        prov[i] = ready
        replicas[i] = cur
    step_h = step / 3600.0
    cost = float(replicas.sum() * step_h * inp.gpus_per_unit * inp.price.on_demand)
    m = window_metrics(inp.demand, prov, cost, step_h, events)
    m.mix = layer_mix({"on_demand": float(replicas.sum() * step_h * inp.gpus_per_unit)}, inp.price)  # all on demand
    return m, {"replicas": replicas, "provisioned": prov}


def prescale_demand(inp: ReplayInput, quantile: str, lead_s: int) -> np.ndarray:
    """Forecast demand at ``t + lead`` known at ``t`` (NaN where no forecast)."""
    fc = inp.hourly_fc.get(quantile)
    n = len(inp.times)
    if fc is None or inp.hourly_origin_idx is None or len(fc) == 0:
        return np.full(n, np.nan)
    oi = inp.hourly_origin_idx
    j = inp.hourly_offset + lead_s // inp.fc_step_s - 1
    j = np.clip(j, 0, fc.shape[1] - 1)
    out = np.where(oi >= 0, fc[np.clip(oi, 0, None), j], np.nan)
    return out
