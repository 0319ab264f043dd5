"""``autoscaling/v2`` HorizontalPodAutoscaler for inference services.

GPU utilisation is not a Resource metric: Resource metrics are ``cpu`` and
``memory`` only (Kubernetes docs, "Horizontal Pod Autoscaling", "Support for
resource metrics"), so ``type: Resource`` with ``name: nvidia.com/gpu`` never
works. The HPA scales on an **External** metric instead, served by
prometheus-adapter from the DCGM exporter (rule in :mod:`.adapter`):

* metric: ``capplan_gpu_util_<name>`` = ``sum(DCGM_FI_DEV_GPU_UTIL{pod=~"<deployment>-..."})``,
  the summed utilisation in **percent** (0–100 per GPU) of the service's GPUs;
* target: ``AverageValue`` = ``target_utilization`` (ratio) × 100 ×
  ``gpus_per_replica``, i.e. percent points **per replica** — for an External
  metric the HPA divides the metric by the current replica count
  (HPA docs, "Autoscaling on metrics not related to Kubernetes objects").

``behavior`` comes from the tuned policy: stabilisation windows (0–3600 s) and
one ``Percent`` rate policy per direction with ``periodSeconds`` (1–1800 s)
(HPA docs, "Configurable scaling behavior"). Resource metrics (cpu, memory)
are added only when ``export.resource_metrics`` configures them. A service on the
``lookahead`` family (:mod:`optimizer.inference.lookahead`) gets a second External metric,
``capplan_lookahead_<name>`` (level plus the tuned quantile of its errors, percent points),
with ``averageValue`` 100 x GPUs per replica: the HPA proposes ``ceil(metric / averageValue)``
replicas from it and takes the larger of its metrics' proposals (HPA docs, "Algorithm details").
"""

from __future__ import annotations

from optimizer.exporters.base import Context, Doc, register
from optimizer.exporters.predictive import predictive_metric, uses_predictive
from optimizer.plan.policy import InferenceParams, SeriesPlan

THRESHOLD_NOTE = ("percent points per replica: AverageValue divides the summed DCGM_FI_DEV_GPU_UTIL (0-100 per GPU) "
                  "by the replica count")


def quantity(x: float) -> str:
    """A Kubernetes quantity string for a plain number (``70``, ``65.5``)."""
    x = round(float(x), 3)
    return str(int(x)) if x == int(x) else f"{x:g}"


def min_replicas(p: InferenceParams, allow_zero: bool) -> int:
    """``min_replicas``, raised to 1 unless scale to zero is configured."""
    return int(p.min_replicas) if (allow_zero and p.min_replicas == 0) else max(1, int(p.min_replicas))


def target_percent(p: InferenceParams, gpus_per_replica: int) -> float:
    """Per-replica threshold in percent points: ratio × 100 × GPUs per replica."""
    return p.target_utilization * 100.0 * gpus_per_replica


def behavior(p: InferenceParams) -> dict:
    """HPA ``behavior`` from the tuned policy (windows and periods in seconds, values in percent)."""
    return {
        "scaleUp": {"stabilizationWindowSeconds": int(p.scale_up_window_s), "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": int(p.scale_up_percent),
                                  "periodSeconds": int(p.period_s)}]},
        "scaleDown": {"stabilizationWindowSeconds": int(p.scale_down_window_s), "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": int(p.scale_down_percent),
                                    "periodSeconds": int(p.period_s)}]},
    }


#: Kubernetes' default HPA behaviour (docs, "Configurable scaling behavior", "Default Behavior"):
#: what a baseline HPA without a ``behavior`` section uses. The rules of thumb (the baseline) set no
#: windows or rates of their own.
K8S_DEFAULT_BEHAVIOR = {"scaleUp": "0 s window, +100 % or +4 pods per 15 s",
                        "scaleDown": "300 s window, -100 % per 15 s"}


def behavior_notes(p: InferenceParams, base: str) -> dict[str, str]:
    """End-of-line comments for the tuned numbers of :func:`behavior` under the YAML path ``base``."""
    out = {}
    for side, win, pct in (("scaleUp", p.scale_up_window_s, p.scale_up_percent),
                           ("scaleDown", p.scale_down_window_s, p.scale_down_percent)):
        dflt = K8S_DEFAULT_BEHAVIOR[side]
        out[f"{base}.{side}.stabilizationWindowSeconds"] = ("tuned by replay search; baseline: Kubernetes default "
                                                            f"({dflt})")
        out[f"{base}.{side}.policies[0].value"] = (f"tuned: {'+' if side == 'scaleUp' else '-'}{pct} % of current "
                                                   f"replicas per {p.period_s} s; baseline: Kubernetes default")
    return out


def replica_notes(plan: SeriesPlan, p: InferenceParams) -> dict[str, str]:
    """Comments for ``min``/``max`` replicas and the threshold, keyed by bare key name
    (HPA and ScaledObject spell them differently)."""
    floor = (plan.plan.get("baseline") or {}).get("floor_replicas")
    bl = f"baseline: {int(floor)} (1.5 x the last day's peak)" if floor is not None else \
        "baseline: 1.5 x the previous day's peak"
    tuned = f"tuned by replay search; {bl}"
    return {"minReplicas": tuned, "minReplicaCount": tuned,
            "maxReplicas": "tuned by replay search; baseline: no upper limit",
            "maxReplicaCount": "tuned by replay search; baseline: no upper limit"}


def external_metric_name(name: str) -> str:
    return "capplan_gpu_util_" + name.replace("-", "_")


LOOKAHEAD_NOTE = ("lookahead family: 100 x GPUs per replica, so desired replicas = ceil(level + tuned quantile of "
                  "its recent errors against the peak over the metrics lag + cold start); baseline: none")
"""The comment on the lookahead family's threshold (KEDA) or averageValue (HPA)."""


def lookahead_metric_name(name: str) -> str:
    """The External metric of a ``lookahead`` service (:mod:`optimizer.inference.lookahead`, rule in
    :mod:`.adapter`)."""
    return "capplan_lookahead_" + name.replace("-", "_")


def pod_regex(target_name: str, kind: str) -> str:
    """Pods of a Deployment are ``<name>-<rs hash>-<pod hash>``; of a StatefulSet ``<name>-<ordinal>``."""
    return f"{target_name}-[0-9]+" if kind == "StatefulSet" else f"{target_name}-[a-z0-9]+-[a-z0-9]+"


def hpa(plan: SeriesPlan, ctx: Context) -> Doc:
    p = InferenceParams(**plan.params)
    t = ctx.target(plan)
    name = ctx.names[plan.series_id]
    metrics = [{
        "type": "External",
        "external": {
            "metric": {"name": external_metric_name(name)},
            "target": {"type": "AverageValue", "averageValue": quantity(target_percent(p, t.gpus_per_replica))},
        },
    }]
    if p.family == "lookahead":  # replicas = ceil(level + margin) at 100 %: the HPA takes the larger proposal
        metrics.append({"type": "External", "external": {
            "metric": {"name": lookahead_metric_name(name)},
            "target": {"type": "AverageValue", "averageValue": quantity(100.0 * t.gpus_per_replica)}}})
    if uses_predictive(p, ctx):  # capplan serve's predicted demand (optimizer.exporters.predictive)
        metrics.append(predictive_metric(plan, ctx, quantity(p.target_utilization)))
    for res, pct in sorted(ctx.settings.resource_metrics.items()):
        metrics.append({"type": "Resource",
                        "resource": {"name": res, "target": {"type": "Utilization", "averageUtilization": int(pct)}}})
    obj = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": ctx.meta(plan, name, t.namespace),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": t.kind, "name": t.name},
            "minReplicas": max(1, int(p.min_replicas)),
            "maxReplicas": int(p.max_replicas),
            "metrics": metrics,
            "behavior": behavior(p),
        },
    }
    folder = "manifests" if ctx.settings.autoscaler == "hpa" else "alternatives/hpa"
    notes = {**replica_notes(plan, p), **behavior_notes(p, "spec.behavior"),
             "spec.metrics[0].external.target.averageValue":
                 f"{THRESHOLD_NOTE}; tuned target {p.target_utilization:.2f}, baseline 70 (scale up above 70 %)"}
    if p.family == "lookahead":
        notes["spec.metrics[1].external.target.averageValue"] = LOOKAHEAD_NOTE
    return Doc(f"{folder}/{name}-hpa.yaml", obj, notes=notes,
               header=f"HPA for series {plan.series_id}; needs the prometheus-adapter rule in adapter/")


@register("hpa")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """One HPA per inference series."""
    return [hpa(p, ctx) for p in plans if p.kind == "inference"]
