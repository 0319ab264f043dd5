"""Replay simulator: real demand against a policy, at the data's resolution.

Training pools (:func:`replay_training`, vectorised with numpy)
    * reserved GPUs are fixed per week, from the weekly forecast issued before
      the week;
    * on-demand and spot GPUs are bought per day, from the daily forecast issued
      before the day (or, ``daily_rule="empirical"``, from the demand observed
      before the day, :mod:`optimizer.training.empirical`; ``"calibrated"``, from that
      forecast's p50 and its realised errors, :mod:`optimizer.training.calibrated_day`);
    * optionally, on-demand GPUs are topped up per hour (the reactive layer),
      from the latest forecast issued before the hour, up to
      ``topup_headroom x`` its quantile's max over the hour; they are paid at
      the on-demand price for the hour and every change counts as a scale event;
    * spot interruptions arrive at ``interruption_rate`` per spot GPU-hour
      (Poisson, drawn from a seeded stream shared by every policy — common
      random numbers). What an interruption costs is the input's ``spot_outage``
      (setting ``plan.spot_outage``, :func:`spot_outage`): ``replacement`` (the
      setting's default) has the cluster autoscaler replace it after
      ``replacement_s`` (the node cold start) and buys the lost work,
      ``recovery_s`` GPU-seconds per interruption, on demand: the accounting the
      newsvendor ratio's effective spot price assumes (:mod:`optimizer.training.newsvendor`),
      and the perfect-foresight limit pays its expected cost (:mod:`optimizer.rivals.perfect_foresight`);
      ``recovery`` (a bare :class:`ReplayInput`'s default) holds the GPU out of
      capacity for ``recovery_s`` (the rules of thumb: 30 min of checkpoint recovery)
      with no replacement and no cost;
    * demand above capacity is unmet (GPU-hours); with ``queue_unmet`` it is
      carried to later intervals (Lindley recursion).

Inference services (:func:`replay_inference`), at the data's own resolution
(1-minute inputs are replayed per minute, never averaged first). Decision
timeline of step ``i`` (covering ``[t_i, t_i + step)``):

    t_i - step - lag  ... the demand of step i-1-ceil(lag/step) ends and is
                          scraped; after ``metrics_lag_s`` (default 60 s: the
                          metrics pipeline plus the 15 s HPA sync) it is
                          observable
    t_i               the controller (HPA, threshold rule or a peer) decides
                      the replica spec from what is observable then: demand up
                      to step ``i - 1 - ceil(metrics_lag_s / step)``, never the
                      step being scored; pre-scaling uses the latest hourly
                      forecast issued before ``t_i - metrics_lag_s``
    t_i ...           a new replica is paid from ``t_i`` (it is starting) and
                      serves from step ``i + ceil(cold_start_s / step)`` on
                      (docs/method.md: 90 s node cold start), whole steps only
    t_i               removed replicas stop serving and stop being paid at once
                      (starting ones are removed first)

    * replicas follow :class:`optimizer.engine.hpa_controller.HPA` on the utilisation metric
      ``observed demand / replicas`` against ``target_utilization``, with an
      optional predicted-demand metric for pre-scaling (the HPA takes the larger);
    * every replica, ready or starting, is paid at the on-demand price.

Metrics (docs/method.md, "Vocabulary"), over intervals with known demand:
coverage = share of intervals with provisioned >= demand (also per day of the
window, ``daily_coverage``); idle ratio =
sum(max(provisioned - demand, 0)) / sum(provisioned); unmet = sum(max(demand -
provisioned, 0)) * step hours; p95 utilisation = 95th percentile of
demand / provisioned.

Decisions see only forecasts issued before them: the lookup arrays are built
by :func:`latest_before`, which takes for each decision time the latest
forecast with ``issued_at < t``.
"""

from __future__ import annotations

import numpy as np

from optimizer.book.purchase import purchase_mix, reserved_level, sellable_layers, spot_terms, within_quota
from optimizer.book.whole_units import count_tolerance, whole
from optimizer.engine.replay_core import (
    INFERENCE_FAMILIES,
    SPOT_OUTAGES,
    ReplayInput,
    hpa_from_params,
    prescale_demand,
    run_controller,
    window_metrics,
)
from optimizer.inference import lookahead, predictive  # noqa: F401 (registration: the families register on import)
from optimizer.plan.policy import InferenceParams, Metrics, TrainingParams
from optimizer.training.empirical import with_empirical_levels
from optimizer.training.newsvendor import spot_pays, spot_split


def replay_training(inp: ReplayInput, p: TrainingParams, interruption_rate: float = 0.01,
                    recovery_s: int = 1800, queue_unmet: bool = False, seed: int = 0) -> tuple[Metrics, dict]:
    """Replay a training pool's reservation policy (vectorised).

    Returns ``(metrics, series)`` where ``series`` holds the per-step arrays
    ``reserved``, ``on_demand``, ``spot``, ``on_demand_hourly``, ``lost``,
    ``provisioned`` (GPUs). Steps with no weekly or daily forecast fall back to
    the last observed demand before the window (a stated fallback of the
    caller); hours with no forecast get no top-up.
    """
    wm = np.nan_to_num(inp.week_mean.get(p.quantile, np.full(len(inp.times), np.nan)), nan=_last(inp))
    with_empirical_levels(inp, p.daily_rule, p.topup_quantile, interruption_rate, recovery_s)
    dm = np.nan_to_num(daily_lookup(inp, p), nan=_last(inp))
    if inp.count_tol is None:
        inp.count_tol = count_tolerance(inp.history_before)
    tol = inp.count_tol
    reserved = reserved_level(p.reservation_ratio, p.reservation_basis, wm, inp.price, tol)
    target = whole(p.headroom * dm, tol)
    if p.daily_cap == "last_day_peak":  # never buy for the day more than the last 24 h needed
        if inp.day_peak is None:
            inp.day_peak = day_start_peak(inp)
        target = np.minimum(target, np.ceil(inp.day_peak - 1e-9))
    flex = np.maximum(target - reserved, 0.0)
    od, spot = spot_split(flex, p.spot_fraction, inp.price is None or spot_pays(inp.price, interruption_rate,
                                                                                 recovery_s))
    hourly = None
    if p.topup_quantile != "none":
        hm = inp.hour_max.get(p.topup_quantile)
        hm = np.zeros(len(inp.times)) if hm is None else np.nan_to_num(hm, nan=0.0)
        hourly = np.maximum(whole(p.topup_headroom * hm, tol) - reserved - flex, 0.0)
    return account_training(inp, reserved, od, spot, interruption_rate, recovery_s, queue_unmet, seed, hourly)


def daily_lookup(inp: ReplayInput, p: TrainingParams) -> np.ndarray:
    """Per time step, the daily level (GPUs, NaN: no forecast for the day) that ``p.daily_rule`` sizes
    the day from, before ``headroom``. Raises ValueError when ``inp`` lacks that lookup (build it with
    :func:`optimizer.engine.inputs.replay_input`)."""
    if p.daily_rule in ("empirical", "calibrated"):  # levels with no forecast quantile
        level = inp.day_empirical if p.daily_rule == "empirical" else inp.day_calibrated
        if level is None:
            raise ValueError(f"replay input has no {p.daily_rule} daily level; build it with "
                             "optimizer.engine.inputs.replay_input")
        return level
    table = inp.day_level if p.daily_rule == "newsvendor" else inp.day_max
    if p.quantile not in table:
        raise ValueError(f"replay input has no {'newsvendor level' if p.daily_rule == 'newsvendor' else 'day max'} "
                         f"lookup for {p.quantile}; build it with optimizer.engine.inputs.replay_input")
    return table[p.quantile]


def day_start_peak(inp: ReplayInput) -> np.ndarray:
    """Per time step, the peak demand (GPUs) of the 24 hours before its decision day began
    (days counted from the window's first step, as the daily lookups; the history before the
    window included; NaN ignored; 0 when nothing was observed)."""
    before = inp.history_before if inp.history_before is not None else np.array([])
    allv = np.concatenate([before, inp.demand]).astype(float)
    n_day = int(round(86400 / inp.step_s))
    day = np.arange(len(inp.times)) // n_day
    out = np.zeros(len(inp.times))
    for d in np.unique(day):
        i0 = len(before) + d * n_day
        past = allv[max(0, i0 - n_day):i0]
        past = past[np.isfinite(past)]
        out[day == d] = past.max() if len(past) else 0.0
    return out


def account_training(inp: ReplayInput, reserved: np.ndarray, od: np.ndarray, spot: np.ndarray,
                     interruption_rate: float = 0.01, recovery_s: int = 1800, queue_unmet: bool = False,
                     seed: int = 0, od_hourly: np.ndarray | None = None) -> tuple[Metrics, dict]:
    """Cost and service metrics of per-step reserved, on-demand (daily and
    hourly) and spot GPUs (shared by the tuned policy and the baseline, so
    both are scored alike).

    Cost (USD) = sum over steps of (reserved x reserved price + (on-demand +
    hourly on-demand) x on-demand price + spot x spot price) x step hours x
    GPUs per unit, prices in USD per GPU-hour (:mod:`optimizer.book.prices`), for what the
    purchase book sells of the layers asked (:func:`optimizer.book.purchase.sellable_layers`: spot
    above its cap bought on demand, reservations held for their minimum term), held to
    ``inp.quota`` when ``inp.hold_to_quota`` (:func:`optimizer.book.purchase.within_quota`); the GPU
    model's own interruption terms win (:func:`optimizer.book.purchase.spot_terms`).
    ``Metrics.mix`` is what was bought (:func:`optimizer.book.purchase.purchase_mix`),
    ``Metrics.spot_refused_gpu_hours`` what the spot cap moved on demand.
    Scale events count the changes of each layer separately: the weekly
    reservation, the daily purchase (on-demand + spot) and the hourly top-up.
    ``series`` also holds ``spot_refused`` and ``asked`` (GPUs per step before the quota).
    """
    step_h = inp.step_s / 3600.0
    hourly = np.zeros_like(reserved, dtype=float) if od_hourly is None else od_hourly
    reserved, od, spot, refused = sellable_layers(inp.price, inp.step_s, reserved, od, spot, hourly)
    asked = reserved + od + spot + hourly
    if inp.hold_to_quota:
        reserved, od, spot, hourly = within_quota(inp.quota, reserved, od, spot, hourly)
    interruption_rate, recovery_s = spot_terms(inp.price, interruption_rate, recovery_s)
    lost, redo = spot_outage(inp, spot, interruption_rate, recovery_s, seed)
    cap = reserved + od + spot + hourly - lost
    demand = inp.demand
    if queue_unmet:
        demand = _queue(demand, cap)
    step_cost = (reserved * inp.price.reserved + (od + hourly + redo) * inp.price.on_demand + spot * inp.price.spot) \
        * step_h * inp.gpus_per_unit
    cost = float(step_cost.sum())
    events = sum(int(np.count_nonzero(np.diff(x))) for x in (reserved, od + spot, hourly))
    series = {"reserved": reserved, "on_demand": od, "spot": spot, "on_demand_hourly": hourly, "lost": lost,
              "on_demand_redo": redo,
              "provisioned": cap, "spot_refused": refused, "asked": asked}
    m = window_metrics(demand, cap, cost, step_h, events, step_cost)
    m.mix = purchase_mix(series, inp.price, inp.step_s, inp.gpus_per_unit)
    m.spot_refused_gpu_hours = round(float(refused.sum()) * step_h * inp.gpus_per_unit, 3)
    return m, series


def spot_outage(inp: ReplayInput, spot: np.ndarray, rate_per_gpu_hour: float, recovery_s: int,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(lost, redo)`` per step of ``inp``: spot GPUs out of capacity, and GPUs of redone work bought
    on demand (GPU-steps; 0 under ``recovery``), for the input's ``spot_outage`` model (module
    docstring). ``replacement``: each interruption (the same seeded draws as :func:`spot_losses`) is
    out for ``inp.replacement_s`` (at least one step), and its ``recovery_s`` of lost work is bought
    on demand. Raises ValueError for an unknown model."""
    if inp.spot_outage == "recovery":
        return spot_losses(spot, inp.step_s, rate_per_gpu_hour, recovery_s, seed), np.zeros_like(spot, dtype=float)
    if inp.spot_outage != "replacement":
        raise ValueError(f"unknown spot_outage {inp.spot_outage!r}; use one of {', '.join(SPOT_OUTAGES)}")
    first = spot_losses(spot, inp.step_s, rate_per_gpu_hour, inp.step_s, seed)  # interruptions per step
    k = max(1, int(np.ceil(inp.replacement_s / inp.step_s - 1e-9)))
    lost = np.minimum(np.convolve(first, np.ones(k))[: len(spot)], spot)
    return lost, first * recovery_s / inp.step_s


def spot_losses(spot: np.ndarray, step_s: int, rate_per_gpu_hour: float, recovery_s: int, seed: int) -> np.ndarray:
    """GPUs lost to spot interruptions per step.

    Interruptions per step ~ Poisson(rate * spot GPUs * step hours), drawn by
    inverse CDF from one seeded uniform stream (common random numbers across
    policies). Each interruption removes one GPU for ``recovery_s``; losses
    never exceed the spot GPUs of the step.
    """
    if rate_per_gpu_hour <= 0 or not np.any(spot > 0):
        return np.zeros_like(spot, dtype=float)
    u = np.random.default_rng(seed).random(len(spot))
    lam = rate_per_gpu_hour * spot * step_s / 3600.0
    n = _poisson_ppf(u, lam)
    k = max(1, int(np.ceil(recovery_s / step_s)))
    lost = np.convolve(n, np.ones(k))[: len(spot)]
    return np.minimum(lost, spot)


def _poisson_ppf(u: np.ndarray, lam: np.ndarray, kmax: int = 200) -> np.ndarray:
    """Vectorised inverse CDF of the Poisson distribution (same values as
    ``scipy.stats.poisson.ppf``), fast for the small means of spot interruptions."""
    p = np.exp(-lam)
    cdf = p.copy()
    n = np.zeros_like(lam)
    for k in range(1, kmax + 1):
        more = u > cdf
        if not more.any():
            break
        n += more
        p = p * lam / k
        cdf = cdf + p
    return n


def _queue(demand: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Carry unmet demand forward: effective demand = demand + backlog."""
    out = demand.copy()
    backlog = 0.0
    for i in range(len(out)):
        if not np.isfinite(out[i]):
            continue
        out[i] += backlog
        backlog = max(out[i] - cap[i], 0.0)
    return out


def _last(inp: ReplayInput) -> float:
    h = inp.history_before
    if h is not None and np.isfinite(h).any():
        return float(h[np.isfinite(h)][-1])
    d = inp.demand[np.isfinite(inp.demand)]
    return float(d[0]) if len(d) else 0.0



def replay_hpa(inp: ReplayInput, p: InferenceParams, cold_start_s: int = 90, initial: int | None = None,
               metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """The ``hpa`` family: the HPA (:func:`optimizer.engine.replay_core.hpa_from_params`) on the
    utilisation metric, with the forecast pre-scaling metric when ``p.prescale_quantile`` is set."""
    hpa = hpa_from_params(p, inp.step_s)
    pre = prescale_demand(inp, p.prescale_quantile, p.prescale_lead_s) if p.prescale_quantile != "none" else None
    return run_controller(inp, lambda now, cur, d, i: hpa.step(
        now, cur, [d / max(cur, 1) / p.target_utilization]
        + ([pre[i] / max(cur, 1) / p.target_utilization] if pre is not None and np.isfinite(pre[i]) else []),
        inp.step_s), cold_start_s, initial or max(p.min_replicas, 1), metrics_lag_s)


INFERENCE_FAMILIES.register("hpa", replay_hpa)


def replay_inference(inp: ReplayInput, p: InferenceParams, cold_start_s: int = 90, initial: int | None = None,
                     metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """Replay an inference service under the policy ``p`` (timeline in the module docstring)
    by its family's replay (:data:`INFERENCE_FAMILIES`; KeyError for an unknown one).

    Returns ``(metrics, series)`` with per-step ``replicas`` (spec, paid) and
    ``provisioned`` (ready replicas).
    """
    return INFERENCE_FAMILIES[p.family](inp, p, cold_start_s, initial, metrics_lag_s)


def replay_threshold(inp: ReplayInput, floor: np.ndarray, up: float = 0.7, down: float = 0.3,
                     cold_start_s: int = 90, max_replicas: int = 10_000, metrics_lag_s: int = 60
                     ) -> tuple[Metrics, dict]:
    """Replay the baseline's threshold rule: scale up when utilisation > ``up``
    (to ``ceil(demand / up)``), down when < ``down`` (to ``ceil(demand / down)``),
    never below ``floor[t]`` (replicas)."""

    def rule(now, cur, d, i):
        u = d / max(cur, 1)
        want = cur
        if u > up:
            want = int(np.ceil(d / up))
        elif u < down:
            want = int(np.ceil(d / down))
        return int(min(max(want, floor[i], 1), max_replicas))

    return run_controller(inp, rule, cold_start_s, int(max(floor[0], 1)), metrics_lag_s)
