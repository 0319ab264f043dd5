"""Predictive scaling through a served metric (:mod:`optimizer.inference.predictive`): the KEDA trigger, the
HPA External metric and its prometheus-adapter rule.

``capplan serve`` exposes ``capplan_forecast_demand{series, quantile, lead}`` (replicas at 100 %
utilisation; :mod:`capplan.serve.metrics`) and Prometheus scrapes it. The autoscaler reads

    max(capplan_forecast_demand{series="<name>", quantile="<q>", lead="<L>"})

(one element, as KEDA's Prometheus scaler needs; ``max`` also drops the scrape's own labels), with
``L`` = ``export.predictive_lead_s`` (default 150 s: the 90 s cold start plus the 60 s metrics lag,
:func:`optimizer.inference.predictive.predictive_lead_s`) and ``q`` the policy's
:func:`optimizer.inference.predictive.predictive_quantile`. With ``metricType: AverageValue`` and
``threshold`` = ``target_utilization`` the HPA asks for ``ceil(predicted / target_utilization)``
replicas (Kubernetes HPA docs, "Algorithm details"); beside the live GPU-utilisation trigger, it takes
the larger: exactly the replayed rule. Label values are escaped for PromQL (:func:`promql_label`).

Used when the policy's family is ``predictive`` or ``export.predictive_metric`` is on; the cron
pre-scaling windows are then left out (the served forecast replaces them).
"""

from __future__ import annotations

from optimizer.exporters.base import Context
from optimizer.inference.predictive import predictive_quantile
from optimizer.plan.policy import InferenceParams, SeriesPlan

METRIC = "capplan_forecast_demand"
TRIGGER_NAME = "predicted-demand"
NOTE = ("predictive: capplan serve's forecast at the lead of cold start + metrics lag, in replicas at 100 %; "
        "threshold = target_utilization, so desired replicas = ceil(predicted / target); baseline: none")


def promql_label(value: str) -> str:
    """``value`` as a PromQL double-quoted string's content (backslash and quote escaped)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def uses_predictive(p: InferenceParams, ctx: Context) -> bool:
    """Whether a service's autoscaler gets the predicted-demand metric (module docstring)."""
    return p.family == "predictive" or bool(getattr(ctx.settings, "predictive_metric", False))


def predictive_query(name: str, p: InferenceParams, lead_s: int) -> str:
    """The one-element query on the served metric of the service named ``name`` (Kubernetes name)."""
    return (f'max({METRIC}{{series="{promql_label(name)}",quantile="{predictive_quantile(p)}",'
            f'lead="{int(lead_s)}"}})')


def predictive_trigger(plan: SeriesPlan, ctx: Context, prom: dict, threshold: str) -> dict:
    """The KEDA ``prometheus`` trigger on the predicted demand; server and authentication as the
    utilisation trigger ``prom``; ``threshold``: ``target_utilization`` as a Kubernetes quantity string."""
    p = InferenceParams(**plan.params)
    md = {k: v for k, v in prom["metadata"].items() if k not in ("query", "threshold", "activationThreshold")}
    md.update({"query": predictive_query(ctx.names[plan.series_id], p, ctx.settings.predictive_lead_s),
               "threshold": threshold})
    out = {"type": "prometheus", "name": TRIGGER_NAME, "metricType": "AverageValue", "metadata": md}
    if "authenticationRef" in prom:
        out["authenticationRef"] = prom["authenticationRef"]
    return out


def predictive_metric_name(name: str) -> str:
    """The HPA's External metric served by :func:`adapter_rule`."""
    return "capplan_predicted_" + name.replace("-", "_")


def predictive_metric(plan: SeriesPlan, ctx: Context, average_value: str) -> dict:
    """The HPA ``External`` metric entry; ``average_value``: ``target_utilization`` as a quantity string."""
    return {"type": "External", "external": {
        "metric": {"name": predictive_metric_name(ctx.names[plan.series_id])},
        "target": {"type": "AverageValue", "averageValue": average_value}}}


def adapter_rule(plan: SeriesPlan, ctx: Context) -> dict:
    """prometheus-adapter ``externalRules`` entry serving :func:`predictive_metric_name`: the query of
    :func:`predictive_query`, not namespaced (the served metric carries capplan's own namespace)."""
    p = InferenceParams(**plan.params)
    name = ctx.names[plan.series_id]
    return {"seriesQuery": f'{METRIC}{{series="{promql_label(name)}"}}',
            "resources": {"namespaced": False},
            "name": {"matches": f"^{METRIC}$", "as": predictive_metric_name(name)},
            "metricsQuery": predictive_query(name, p, ctx.settings.predictive_lead_s)}


__all__ = ["predictive_trigger", "predictive_metric", "adapter_rule", "predictive_query", "uses_predictive",
           "predictive_metric_name", "promql_label", "NOTE"]
