"""Read the autoscaling parameters back from a written ``ScaledObject`` or ``HorizontalPodAutoscaler``.

What a cluster runs is the manifest, not ``policy.yaml``'s ``params``; this module recovers the
:class:`optimizer.plan.policy.InferenceParams` fields a manifest carries, so a check can replay them
(:func:`optimizer.engine.replay.replay_inference`) and compare with the recommended figures:

* ``min_replicas`` / ``max_replicas``: ``minReplicaCount`` / ``maxReplicaCount`` (KEDA) or
  ``minReplicas`` / ``maxReplicas`` (HPA);
* ``target_utilization``: the GPU-utilisation trigger's ``threshold`` (KEDA) or the first External
  metric's ``averageValue`` (HPA), percent points per replica, divided by 100 x GPUs per replica
  (:func:`optimizer.exporters.hpa.target_percent`);
* ``scale_up_window_s``, ``scale_down_window_s``, ``scale_up_percent``, ``scale_down_percent``,
  ``period_s``: the ``behavior`` (:func:`optimizer.exporters.hpa.behavior`);
* ``family``: ``lookahead`` when a ``lookahead`` trigger (KEDA) or ``capplan_lookahead_*`` metric
  (HPA) is present, ``predictive`` when the predicted-demand trigger or metric is, else ``hpa``;
* with a ``lookahead`` KEDA trigger, from its query (:func:`optimizer.inference.lookahead.promql`):
  ``headroom_quantile`` (the ``quantile_over_time`` level), ``data_step_s`` (the subquery step) and
  ``level_window_s`` (the level's range: whole steps, less the one second of
  :func:`optimizer.inference.lookahead._range`;
  one step reads back as 0, the policy's "last value");
* with a predicted-demand KEDA trigger: ``prescale_quantile`` (its ``quantile`` label).

Raises ValueError (naming the manifest's field) when a manifest lacks what it should carry.
"""

from __future__ import annotations

import re

from optimizer.exporters.predictive import TRIGGER_NAME as PREDICTIVE_TRIGGER

_QUANTILE = re.compile(r"quantile_over_time\(([0-9.eE+-]+),")
_LEVEL = re.compile(r"^sum\(avg_over_time\(\((.*)\)\[(\d+)s:(\d+)s\]\) \+ quantile_over_time")
_PRED_Q = re.compile(r'quantile="([^"]+)"')


def _behavior(b: dict, where: str) -> dict:
    try:
        up, down = b["scaleUp"], b["scaleDown"]
        return {"scale_up_window_s": int(up["stabilizationWindowSeconds"]),
                "scale_down_window_s": int(down["stabilizationWindowSeconds"]),
                "scale_up_percent": int(up["policies"][0]["value"]),
                "scale_down_percent": int(down["policies"][0]["value"]),
                "period_s": int(up["policies"][0]["periodSeconds"])}
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"{where}: behavior lacks {exc}") from exc


def lookahead_fields(query: str) -> dict:
    """``headroom_quantile``, ``data_step_s`` and ``level_window_s`` from a lookahead query (module
    docstring). Raises ValueError when the query is not one :func:`optimizer.inference.lookahead.promql` writes."""
    q, lv = _QUANTILE.search(query), _LEVEL.match(query)
    if not q or not lv:
        raise ValueError(f"lookahead query not in capplan's form: {query[:120]}")
    step = int(lv.group(3))
    steps = (int(lv.group(2)) + 1) // step
    return {"headroom_quantile": float(q.group(1)), "data_step_s": step,
            "level_window_s": 0 if steps <= 1 else steps * step}


def scaledobject_params(obj: dict, gpus_per_replica: int = 1) -> dict:
    """The :class:`optimizer.plan.policy.InferenceParams` fields a KEDA ``ScaledObject`` carries (module docstring)."""
    spec = obj.get("spec") or {}
    triggers = {t.get("name"): t for t in spec.get("triggers", [])}
    if "gpu-utilization" not in triggers:
        raise ValueError("ScaledObject spec.triggers: no gpu-utilization trigger")
    out = {"min_replicas": int(spec["minReplicaCount"]), "max_replicas": int(spec["maxReplicaCount"]),
           "target_utilization": (float(triggers["gpu-utilization"]["metadata"]["threshold"])
                                  / (100.0 * gpus_per_replica)),
           **_behavior(spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {}),
                       "ScaledObject spec.advanced.horizontalPodAutoscalerConfig")}
    out["family"] = "hpa"
    if "lookahead" in triggers:
        out.update(family="lookahead", **lookahead_fields(triggers["lookahead"]["metadata"]["query"]))
    elif PREDICTIVE_TRIGGER in triggers:
        m = _PRED_Q.search(triggers[PREDICTIVE_TRIGGER]["metadata"]["query"])
        out.update(family="predictive", prescale_quantile=m.group(1) if m else "none")
    return out


def hpa_params(obj: dict, gpus_per_replica: int = 1) -> dict:
    """The :class:`optimizer.plan.policy.InferenceParams` fields an ``autoscaling/v2`` HPA carries (module
    docstring)."""
    spec = obj.get("spec") or {}
    ext = [m["external"] for m in spec.get("metrics", []) if m.get("type") == "External"]
    if not ext:
        raise ValueError("HorizontalPodAutoscaler spec.metrics: no External metric")
    names = [e["metric"]["name"] for e in ext]
    out = {"min_replicas": int(spec["minReplicas"]), "max_replicas": int(spec["maxReplicas"]),
           "target_utilization": float(ext[0]["target"]["averageValue"]) / (100.0 * gpus_per_replica),
           **_behavior(spec.get("behavior", {}), "HorizontalPodAutoscaler spec")}
    out["family"] = ("lookahead" if any(n.startswith("capplan_lookahead_") for n in names) else
                     "predictive" if any(n.startswith("capplan_predicted_") for n in names) else "hpa")
    return out


def manifest_params(obj: dict, gpus_per_replica: int = 1) -> dict:
    """:func:`scaledobject_params` or :func:`hpa_params` by the object's ``kind``; ValueError for another kind."""
    kind = obj.get("kind")
    if kind == "ScaledObject":
        return scaledobject_params(obj, gpus_per_replica)
    if kind == "HorizontalPodAutoscaler":
        return hpa_params(obj, gpus_per_replica)
    raise ValueError(f"not an autoscaler manifest: kind {kind!r}")


__all__ = ["manifest_params", "scaledobject_params", "hpa_params", "lookahead_fields"]
