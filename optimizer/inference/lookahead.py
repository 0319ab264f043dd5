"""The ``lookahead`` inference family: pre-scale to a quantile of the demand peak over the lead time.

Why a second family. With the metrics lag and the cold start (:mod:`optimizer.engine.replay`), a replica
the controller adds at ``t_i`` serves from step ``i + d`` (``d = ceil(cold_start_s / step)``), and
the newest demand it can see is that of step ``j = i - 1 - ceil(metrics_lag_s / step)``. The HPA
family (:func:`optimizer.engine.replay.replay_inference`) covers that gap with a utilisation target below
1 (headroom proportional to the load, all day) and a scale-down stabilisation window; the
perfect-foresight limit (:mod:`optimizer.rivals.perfect_foresight`) pays neither. This family instead holds, at
every decision, a **quantile of the peak demand over exactly the steps its decision still has to
cover**, learnt from the service's own recent errors (split-conformal prediction: the empirical
quantile of past residuals of a point predictor is a distribution-free predictive quantile;
Vovk, Gammerman and Shafer, *Algorithmic Learning in a Random World*, 2005; Angelopoulos and
Bates, "A Gentle Introduction to Conformal Prediction", 2021):

* with ``g = 1 + ceil(metrics_lag_s / step)`` (the newest observable step is ``j = i - g``) and
  ``d = ceil(cold_start_s / step)``, the decision at ``t_i`` can still change the steps ``i ..
  i + d`` only: it removes replicas at once, and what it adds serves from ``i + d`` while later
  decisions add nothing ready before ``i + 1 + d``; the steps ``j + 1 .. i - 1`` are already
  decided. So the family covers the **peak over steps j + g .. j + g + d**, ``H = g + d`` steps
  after the newest observation (5-minute data with the default 60 s lag and 90 s cold start:
  the peak of steps j+2..j+3, 15 min ahead; 1-minute data: j+2..j+4);
* level ``L_j`` = the mean of the observed demand (replicas at 100 % utilisation) over the last
  ``level_window_s`` (at least one step), the point predictor;
* error ``e_s = max(demand[s+g .. s+H]) - L_s``: how far that peak rose above the level;
  ``e_s`` is known at step ``s + H``, so the decision at ``j`` uses only errors with
  ``s + H <= j`` (no look-ahead);
* margin ``M_j`` = the ``headroom_quantile`` (0-1) empirical quantile of those errors over the
  trailing :data:`ERROR_WINDOW` (7 days, the naive-conformal peer's window,
  :mod:`optimizer.rivals.peers`), history before the window included; 0 before the first error;
* desired replicas ``ceil(L_j + M_j)``, proposed to the HPA controller (:class:`optimizer.engine.hpa_controller.HPA`,
  tolerance, stabilisation windows and rate policies from the params) beside the reactive
  floor ``observed demand / target_utilization`` (the service's utilisation trigger); the HPA
  takes the larger. Scale-down follows the target as fast as ``scale_down_window_s`` and
  ``scale_down_percent`` allow.

Both directions are asymmetric by construction: up moves are made ``H`` steps early from the
quantile, down moves wait for the level (and the stabilisation window) to fall.

**What a cluster applies** (:mod:`optimizer.exporters.keda`): a KEDA ``prometheus`` trigger
(KEDA docs, "Prometheus" scaler; ``metricType: AverageValue``, so the HPA sets
``desiredReplicas = ceil(query / threshold)``, Kubernetes HPA docs, "Algorithm details") whose
query is :func:`promql` — the same level plus a PromQL subquery computing the same quantile of
the same errors (Prometheus docs, "Subquery", ``quantile_over_time``, ``max_over_time``,
``avg_over_time``, ``offset``), with ``threshold`` = 100 x GPUs per replica (percent points of
``DCGM_FI_DEV_GPU_UTIL`` that one replica serves at 100 %).

Listed in :data:`optimizer.engine.replay.INFERENCE_FAMILIES` as ``lookahead``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.engine.replay_core import (
    INFERENCE_FAMILIES,
    ReplayInput,
    hpa_from_params,
    observed_demand,
    run_controller,
)
from optimizer.plan.policy import InferenceParams, Metrics

ERROR_WINDOW = pd.Timedelta("7D")


def lead_steps(step_s: int, cold_start_s: int, metrics_lag_s: int) -> int:
    """``H = g + d``: steps from the newest observable step to the last step the decision still covers."""
    return observed_lag_steps(step_s, metrics_lag_s) + cold_steps(step_s, cold_start_s)


def observed_lag_steps(step_s: int, metrics_lag_s: int) -> int:
    """``g``: the decision at step ``i`` sees demand up to step ``i - g``
    (:func:`optimizer.engine.replay_core.observed_demand`)."""
    return 1 + int(np.ceil(max(metrics_lag_s, 0) / step_s - 1e-9))


def cold_steps(step_s: int, cold_start_s: int) -> int:
    """``d``: a replica added at step ``i`` serves from ``i + d`` (whole steps, :mod:`optimizer.engine.replay`)."""
    return int(np.ceil(max(cold_start_s, 0) / step_s - 1e-9))


def level_steps(level_window_s: int, step_s: int) -> int:
    """The level's window in steps (at least one)."""
    return max(1, int(round(level_window_s / step_s)))


def lookahead_target(inp: ReplayInput, p: InferenceParams, cold_start_s: int = 90, metrics_lag_s: int = 60
                     ) -> np.ndarray:
    """Per step of ``inp``'s window, ``L_j + M_j`` (replicas at 100 % utilisation, float; module
    docstring), from the demand observable at the step's decision time only. Missing demand is
    carried forward (as :func:`optimizer.engine.replay_core.observed_demand`); 0 before anything is known."""
    before = inp.history_before if inp.history_before is not None else np.array([])
    allv = pd.Series(np.concatenate([np.asarray(before, float), np.asarray(inp.demand, float)])).ffill().fillna(0.0)
    off = len(before)
    n = len(inp.demand)
    if len(allv) == 0:
        return np.zeros(n)
    g, d = observed_lag_steps(inp.step_s, metrics_lag_s), cold_steps(inp.step_s, cold_start_s)
    level = allv.rolling(level_steps(p.level_window_s, inp.step_s), min_periods=1).mean()
    peak_ahead = allv[::-1].rolling(d + 1, min_periods=1).max()[::-1].shift(-g)  # max over s+g .. s+g+d
    err_known = (peak_ahead - level).shift(g + d)  # indexed by the step at which it is fully observed
    window = max(1, int(ERROR_WINDOW / pd.Timedelta(seconds=inp.step_s)))
    margin = err_known.rolling(window, min_periods=1).quantile(p.headroom_quantile).fillna(0.0)
    target = (level + margin).to_numpy()
    j = np.arange(n) + off - g
    return np.where(j >= 0, target[np.clip(j, 0, None)], 0.0)


@INFERENCE_FAMILIES.register("lookahead")
def replay_lookahead(inp: ReplayInput, p: InferenceParams, cold_start_s: int = 90, initial: int | None = None,
                     metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """Replay the ``lookahead`` family (module docstring) on the timeline of :mod:`optimizer.engine.replay`:
    ``(metrics, {"replicas", "provisioned"})`` as :func:`optimizer.engine.replay.replay_inference`."""
    hpa = hpa_from_params(p, inp.step_s)
    want = lookahead_target(inp, p, cold_start_s, metrics_lag_s)
    obs = observed_demand(inp, metrics_lag_s)
    first = int(np.ceil(max(want[0], obs[0] / p.target_utilization) - 1e-9)) if len(want) else 1
    start = initial or min(max(first, p.min_replicas, 1), p.max_replicas)
    return run_controller(inp, lambda now, cur, d, i: hpa.step(
        now, cur, [want[i] / max(cur, 1), d / max(cur, 1) / p.target_utilization], inp.step_s),
        cold_start_s, start, metrics_lag_s)


def promql(series: str, p: InferenceParams, scrape_s: int = 60) -> str:
    """The query that computes :func:`lookahead_target` in a cluster, one element (an outer ``sum``
    of one series, as KEDA's Prometheus scaler needs): ``series`` is a PromQL expression whose value
    is the summed demand (e.g. percent points of GPU utilisation); the result is the level plus the
    margin in that unit (KEDA's ``threshold`` divides it by what one replica serves). Durations are
    whole steps of ``p.data_step_s``: the level over ``level_window_s``; each error is the peak over
    the last ``p.lookahead_cover_s`` (``d + 1`` steps) less the level ``p.lookahead_lead_s``
    (``H`` steps) earlier; their ``headroom_quantile`` over :data:`ERROR_WINDOW`, evaluated every
    step (subqueries ``(expr)[<range>:<step>]``, ``offset``; Prometheus docs, "Subquery").

    The replay's demand at a step is the peak of ``(t - step, t]`` (a pull's default
    ``step_aggregation: max``, :mod:`capplan.promql.steps`), so when the step is longer than
    ``scrape_s`` (the exporter's scrape interval, seconds; ``export.scrape_interval_s``) the query
    first takes that peak, ``max_over_time((series)[step - 1 s : scrape_s])``: a burst between two
    steps raises the level and the errors as it did in the replay."""
    step = int(p.data_step_s)
    st = f"{step}s"
    scrape = max(int(scrape_s), 1)
    if step > scrape:  # each step's peak at the scrape resolution, as a pull stores it (capplan.promql.steps)
        series = f"max_over_time(({series})[{_range(step)}:{scrape}s])"
    lv = _range(level_steps(p.level_window_s, step) * step)
    hz = f"{max(int(p.lookahead_lead_s), step)}s"
    cv = _range(max(int(p.lookahead_cover_s), step))
    level = f"avg_over_time(({series})[{lv}:{st}])"
    err = f"(max_over_time(({series})[{cv}:{st}]) - avg_over_time(({series})[{lv}:{st}] offset {hz}))"
    wd = _range(int(ERROR_WINDOW.total_seconds()) // step * step)
    return f"sum({level} + quantile_over_time({p.headroom_quantile:.4g}, {err}[{wd}:{st}]))"


def _range(seconds: int) -> str:
    """A subquery range of ``seconds`` (whole steps) less one second: Prometheus 2.x selects the
    closed range ``[t - r, t]`` and 3.x the left-open ``(t - r, t]`` (Prometheus 3.0 migration
    guide, "Range selectors and lookback exclude samples coinciding with the left boundary"), so
    with the subquery's points on whole steps both hold exactly ``seconds / step`` of them, the
    window :func:`lookahead_target` uses (``tests/optimizer/inference/test_lookahead_promql.py`` checks it on a real
    Prometheus)."""
    return f"{max(int(seconds) - 1, 1)}s"


__all__ = ["lookahead_target", "replay_lookahead", "promql", "lead_steps", "cold_steps", "observed_lag_steps",
           "ERROR_WINDOW"]
