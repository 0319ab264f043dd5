"""What ``capplan serve`` exposes on ``/metrics`` (Prometheus exposition format, prometheus_client).

Per series of the served plan (:class:`capplan.serve.plan.LoadedPlan`), at the scrape time ``t``:

* ``capplan_forecast_demand{series_id, series, quantile, lead}``: the plan forecast (combined
  tier; GPUs for training, replicas at 100 % utilisation for inference) of the step that holds
  ``t + lead``: the first forecast step whose timestamp is at or after it (a step's value is the
  peak of ``(timestamp - step, timestamp]``, :mod:`capplan.promql.steps`). ``lead`` in seconds:
  0, the predictive lead (cold start + metrics lag, :mod:`optimizer.inference.predictive`) and each inference
  policy's pre-scaling lead. ``series`` is the series' Kubernetes name (the manifests' name, usable
  in label selectors, which cannot hold ``/``). No sample when ``t + lead`` is outside the forecast;
* ``capplan_recommended_replicas{series_id, series}`` (inference): ``ceil(max of the policy's
  quantile over the next hour / target_utilization)`` within ``[min_replicas, max_replicas]``
  (:func:`optimizer.inference.prescale.hourly_need`); ``capplan_recommended_gpus{series_id, series}``
  (training): the plan's reserved + on-demand + spot + hourly on-demand GPUs;
* ``capplan_forecast_horizon_seconds{series_id, series}``: seconds from ``t`` to the last forecast
  step (negative when the plan is older than its forecast);

and for the plan: ``capplan_plan_stale_seconds`` (seconds since the last forecast step of every series passed:
0 while some forecast covers ``t``; :func:`stale_reason`, which ``/readyz`` answers 503 with),
``capplan_plan_age_seconds`` (since the run finished), ``capplan_plan_info{run_id}``,
``capplan_plan_reload_failures_total`` and ``capplan_plan_last_reload_failed`` (1 while the newest
``LATEST`` could not be loaded and the previous plan is served).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from capplan.serve.plan import LoadedPlan, PlanSource
from optimizer.exporters.names import k8s_name
from optimizer.inference.predictive import predictive_quantile
from optimizer.inference.prescale import hourly_need
from optimizer.plan.policy import InferenceParams

NEXT_INTERVAL = pd.Timedelta("1h")


def forecast_at(g: pd.DataFrame, t: pd.Timestamp, q: str) -> float | None:
    """The value of quantile column ``q`` at the first step of ``g`` (sorted by ``timestamp``)
    at or after ``t``; None when ``t`` is after the last step or more than one step before the first."""
    ts = g["timestamp"]
    if ts.empty:
        return None
    i = int(np.searchsorted(ts.to_numpy(dtype="datetime64[ns]"),
                            np.datetime64(t.tz_convert("UTC").tz_localize(None), "ns"), side="left"))
    if i >= len(ts):
        return None
    if i == 0 and len(ts) > 1 and t < ts.iloc[0] - (ts.iloc[1] - ts.iloc[0]):
        return None
    v = g[q].iloc[i]
    return float(v) if np.isfinite(v) else None


def forecast_end(plan: LoadedPlan) -> pd.Timestamp | None:
    """The last forecast step of the served plan, over every series (UTC); None without forecasts."""
    ts = plan.forecasts["timestamp"] if "timestamp" in plan.forecasts else pd.Series(dtype="datetime64[ns, UTC]")
    return None if ts.empty else pd.Timestamp(ts.max())


def stale_reason(plan: LoadedPlan, now: pd.Timestamp) -> str | None:
    """Why the served plan is stale at ``now`` (UTC), in one line naming the run, where its forecasts end and
    what to do; None while some series' forecast covers ``now`` (its last step is at or after it). A stale plan
    serves no ``capplan_forecast_demand`` sample and no recommended replicas for the next hour, so an
    autoscaler reading it falls back (KEDA ``fallback``)."""
    end = forecast_end(plan)
    if end is not None and end >= now:
        return None
    where = (f"run {plan.run_id} has no plan forecasts" if end is None else
             f"the forecasts of run {plan.run_id} end at {end.isoformat()}, "
             f"{_ago((now - end).total_seconds())} before now")
    return (f"no forecast covers now: {where}; publish a plan on recent history "
            "(capplan ingest, then capplan plan --source store --publish)")


def _ago(seconds: float) -> str:
    """``seconds`` as the largest whole unit that fits: ``6.5 years``, ``3.0 days``, ``2.0 hours``, ``40 s``."""
    for unit, n in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600)):
        if seconds >= n:
            return f"{seconds / n:.1f} {unit}"
    return f"{seconds:.0f} s"


def series_leads(plan: LoadedPlan, predictive_lead_s: int) -> list[int]:
    """Leads (seconds) exposed: 0, the predictive lead and the inference policies' pre-scaling leads."""
    leads = {0, int(predictive_lead_s)}
    for s in plan.report.series.values():
        if s.kind == "inference" and "prescale_lead_s" in (s.recommended.params or {}):
            leads.add(int(s.recommended.params["prescale_lead_s"]))
    return sorted(leads)


class PlanCollector(Collector):
    """A prometheus_client collector over a :class:`PlanSource` (module docstring)."""

    def __init__(self, source: PlanSource, predictive_lead_s: int, clock=time.time):
        self.source = source
        self.lead = int(predictive_lead_s)
        self.clock = clock

    def collect(self):
        plan = self.source.current()
        now_s = self.clock()
        now = pd.Timestamp(now_s, unit="s", tz="UTC")
        fail = CounterMetricFamily("capplan_plan_reload_failures", "runs LATEST named that could not be loaded")
        fail.add_metric([], self.source.reload_failures)
        yield fail
        last = GaugeMetricFamily("capplan_plan_last_reload_failed",
                                 "1 while the newest LATEST could not be loaded (the previous plan is served)")
        last.add_metric([], 1.0 if self.source.last_error else 0.0)
        yield last
        if plan is None:
            return
        info = GaugeMetricFamily("capplan_plan_info", "the served run", labels=["run_id"])
        info.add_metric([plan.run_id], 1.0)
        yield info
        run = plan.report.run
        done = pd.Timestamp(run.started_at).timestamp() + (run.duration_s or 0.0)
        age = GaugeMetricFamily("capplan_plan_age_seconds", "seconds since the served run finished")
        age.add_metric([], max(now_s - done, 0.0))
        yield age
        end = forecast_end(plan)
        stale = GaugeMetricFamily("capplan_plan_stale_seconds", "seconds since every series' last forecast step "
                                  "passed (0 while some forecast covers now; /readyz is 503 above 0)")
        stale.add_metric([], float("inf") if end is None else max((now - end).total_seconds(), 0.0))
        yield stale
        yield from self._series(plan, now)

    def _series(self, plan: LoadedPlan, now: pd.Timestamp):
        demand = GaugeMetricFamily("capplan_forecast_demand", "plan forecast at now + lead (GPUs or replicas at "
                                   "100 % utilisation)", labels=["series_id", "series", "quantile", "lead"])
        reps = GaugeMetricFamily("capplan_recommended_replicas", "replicas for the next hour (inference)",
                                 labels=["series_id", "series"])
        gpus = GaugeMetricFamily("capplan_recommended_gpus", "GPUs the plan holds (training)",
                                 labels=["series_id", "series"])
        horizon = GaugeMetricFamily("capplan_forecast_horizon_seconds", "seconds to the last forecast step",
                                    labels=["series_id", "series"])
        leads = series_leads(plan, self.lead)
        by_sid = dict(tuple(plan.forecasts.groupby("series_id", sort=False)))
        for sid, s in plan.report.series.items():
            g = by_sid.get(sid)
            if g is None or g.empty:
                continue
            name = k8s_name(sid)  # the manifests' object name (optimizer.exporters.names)
            horizon.add_metric([sid, name], (g["timestamp"].iloc[-1] - now).total_seconds())
            for q in ("p50", "p90", "p95", "p99"):
                for lead in leads:
                    v = forecast_at(g, now + pd.Timedelta(seconds=lead), q)
                    if v is not None:
                        demand.add_metric([sid, name, q, str(lead)], v)
            if s.kind == "inference":
                n = _next_replicas(g, now, s.recommended.params)
                if n is not None:
                    reps.add_metric([sid, name], n)
            else:
                gpus.add_metric([sid, name], float(sum(float(getattr(s.plan, k, 0) or 0) for k in (
                    "reserved_gpus", "on_demand_gpus", "spot_gpus", "on_demand_hourly_gpus"))))
        yield from (demand, reps, gpus, horizon)


def _next_replicas(g: pd.DataFrame, now: pd.Timestamp, params: dict) -> float | None:
    """``ceil(max quantile over (now, now + 1 h] / target_utilization)`` clipped to the policy's bounds."""
    try:
        p = InferenceParams(**params)
    except (TypeError, ValueError):
        return None
    w = g[(g["timestamp"] > now) & (g["timestamp"] <= now + NEXT_INTERVAL)]
    if w.empty:
        return None
    q = predictive_quantile(p)
    need = hourly_need(w, q, p)
    return float(need.max()) if len(need) and math.isfinite(float(need.max())) else None


__all__ = ["PlanCollector", "forecast_at", "forecast_end", "series_leads", "stale_reason"]
