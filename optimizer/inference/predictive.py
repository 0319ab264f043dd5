"""The ``predictive`` inference family: scale on the larger of live demand and capplan's predicted
demand, read live from ``capplan serve`` (KEDA/HPA), instead of cron windows fixed at export time.

The rule. At each decision ``t_i`` the autoscaler (:class:`optimizer.engine.hpa_controller.HPA`, with the policy's
tolerance, stabilisation windows and rate policies) takes the larger of two metrics:

* **live**: observed demand / ``target_utilization`` (the service's GPU-utilisation trigger; the
  demand observable at ``t_i``, :func:`optimizer.engine.replay_core.observed_demand`);
* **predicted**: ``capplan_forecast_demand{quantile=q, lead=L}`` / ``target_utilization``, where
  ``L = cold_start_s + metrics_lag_s`` (:func:`predictive_lead_s`). ``capplan serve`` exposes at
  scrape time ``s`` the plan forecast of the step holding ``s + L``; the autoscaler acts on that
  scrape ``metrics_lag_s`` later, at ``t_i = s + metrics_lag_s``, so the value covers
  ``t_i + cold_start_s``: when a replica added at ``t_i`` is ready. The replay, whose timeline
  counts whole steps (a replica added at ``t_i`` serves from step ``i + ceil(cold_start_s / step)``),
  therefore reads the forecast of that step from the latest plan issued before ``t_i``
  (:func:`optimizer.engine.replay_core.prescale_demand`, whole forecast steps, hourly plans as an hourly
  CronJob writes them). ``q`` is the policy's ``prescale_quantile`` (``p90`` when ``none``,
  :func:`predictive_quantile`).

So the predicted metric only ever adds replicas, like the cron windows, but follows every new
plan instead of the one exported. What a cluster applies: :func:`optimizer.exporters.keda.predictive_trigger`
(a second ``prometheus`` trigger on the served metric, ``AverageValue`` with ``threshold`` =
``target_utilization``) and :func:`optimizer.exporters.hpa.predictive_metric` (an External metric).

Listed in :data:`optimizer.engine.replay.INFERENCE_FAMILIES` as ``predictive``.
"""

from __future__ import annotations

import numpy as np

from optimizer.engine.replay_core import (
    INFERENCE_FAMILIES,
    ReplayInput,
    hpa_from_params,
    prescale_demand,
    run_controller,
)
from optimizer.inference.lookahead import cold_steps
from optimizer.plan.policy import InferenceParams, Metrics

DEFAULT_QUANTILE = "p90"


def predictive_quantile(p: InferenceParams) -> str:
    """The forecast quantile column the predicted metric serves: ``p.prescale_quantile``, or
    :data:`DEFAULT_QUANTILE` when that is ``none``."""
    return p.prescale_quantile if p.prescale_quantile != "none" else DEFAULT_QUANTILE


def predictive_lead_s(cold_start_s: int = 90, metrics_lag_s: int = 60) -> int:
    """The served metric's lead (seconds): the cold start plus the metrics lag (defaults 90 s + 60 s,
    docs/method.md "Replay simulator")."""
    return int(cold_start_s) + int(metrics_lag_s)


def predicted_metric(inp: ReplayInput, p: InferenceParams, cold_start_s: int = 90) -> np.ndarray:
    """Per step, the predicted demand the autoscaler reads at ``t_i`` (replicas at 100 %, NaN where
    no plan was issued yet): the forecast of step ``i + d``, where a replica added at ``t_i`` starts
    serving on the replay's whole-step timeline (``d = ceil(cold_start_s / step)``,
    :func:`optimizer.inference.lookahead.cold_steps`; module docstring)."""
    lead = cold_steps(inp.step_s, cold_start_s) * inp.step_s
    return prescale_demand(inp, predictive_quantile(p), int(lead))


@INFERENCE_FAMILIES.register("predictive")
def replay_predictive(inp: ReplayInput, p: InferenceParams, cold_start_s: int = 90, initial: int | None = None,
                      metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """Replay the ``predictive`` rule (module docstring) on the timeline of :mod:`optimizer.engine.replay`:
    ``(metrics, {"replicas", "provisioned"})`` as :func:`optimizer.engine.replay.replay_inference`."""
    hpa = hpa_from_params(p, inp.step_s)
    pred = predicted_metric(inp, p, cold_start_s)
    t = p.target_utilization

    def decide(now, cur, d, i):
        metrics = [d / max(cur, 1) / t]
        if np.isfinite(pred[i]):
            metrics.append(pred[i] / max(cur, 1) / t)
        return hpa.step(now, cur, metrics, inp.step_s)

    return run_controller(inp, decide, cold_start_s, initial or max(p.min_replicas, 1), metrics_lag_s)


__all__ = ["replay_predictive", "predicted_metric", "predictive_quantile", "predictive_lead_s", "DEFAULT_QUANTILE"]
