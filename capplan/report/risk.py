"""Risk notes on aggressive settings in the exported plan: a small rule set.

The search picks the cheapest policy that met the coverage target on the tuning window
(capplan's replay); that replay does not model pod failures, rollouts, a metrics outage
or a spot reclaim wave. Settings that leave no room for those are flagged here as
``risk:`` warnings in the report (so the CLI and the dashboard show them with the other
warnings). Each :class:`Rule` reads the series' plan (what the manifests carry:
:class:`capplan.report.model.InferencePlan` / :class:`capplan.report.model.TrainingPlan`, as a dict)
and the recommended policy's parameters; the thresholds are in :data:`LIMITS`.

Sources of the thresholds:

* ``min_replicas`` 1: a single replica has no redundancy; Kubernetes' guidance for
  highly available workloads is at least 2 replicas with a PodDisruptionBudget
  (kubernetes.io, "Specifying a Disruption Budget for your Application").
* ``target_utilization`` >= 0.9: demand that grows faster than the scale-up delay
  (metrics lag + cold start) can use only the 1 - target headroom; the baseline's rule of
  thumb scales at 0.7 and common HPA targets are 0.5-0.8.
* scale-down ``stabilizationWindowSeconds`` 0: Kubernetes' default for scale-down is 300 s
  (HorizontalPodAutoscaler behavior); 0 lets replicas flap with every dip.
* a training pool all on spot (>= 0.9 of its planned GPUs): one reclaim wave stops most
  jobs at once; the replay charges interruptions at ``plan.interruption_rate``, not a wave.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

#: thresholds of the rules (units in the module docstring)
LIMITS = {"min_replicas": 1, "target_utilization": 0.9, "scale_down_window_s": 0, "spot_share": 0.9}


@dataclass(frozen=True)
class Rule:
    """``kind`` (training | inference) and ``check(plan, params) -> message | None``."""

    name: str
    kind: str
    check: Callable[[dict, dict], str | None]


def _single_replica(plan: dict, params: dict) -> str | None:
    m = plan.get("min_replicas")
    if m is None or m > LIMITS["min_replicas"]:
        return None
    return (f"risk: minReplicas {m}: a pod or node failure, or a rollout, leaves the service without a ready replica "
            "until a new one starts; for a service that must stay up, set plan.inference_bounds.min_replicas to at "
            "least 2 (with a PodDisruptionBudget)")


def _high_target(plan: dict, params: dict) -> str | None:
    t = plan.get("target_utilization")
    if t is None or t < LIMITS["target_utilization"]:
        return None
    return (f"risk: a {100 * t:.0f} % utilisation target leaves {100 * (1 - t):.0f} % headroom while the autoscaler "
            "reacts (metrics lag + cold start); a burst faster than that is unmet. The rules of thumb scale at 70 %; "
            "narrow plan.inference_bounds.target_utilization to lower it")


def _no_scale_down_window(plan: dict, params: dict) -> str | None:
    w = params.get("scale_down_window_s")
    if w is None or w > LIMITS["scale_down_window_s"] or params.get("family", "hpa") != "hpa":
        return None
    return ("risk: scale-down stabilizationWindowSeconds 0 (Kubernetes' default is 300 s): replicas are removed at "
            "every dip and added back at the next rise")


def _all_spot(plan: dict, params: dict) -> str | None:
    parts = [plan.get(k) or 0 for k in ("reserved_gpus", "on_demand_gpus", "spot_gpus")]
    total = sum(parts)
    if not total or parts[2] / total < LIMITS["spot_share"]:
        return None
    return (f"risk: {100 * parts[2] / total:.0f} % of the GPUs planned for the next day are spot: a reclaim "
            "wave stops most jobs at once; keep checkpointing on, or reserve part of the pool")


RULES = [Rule("single_replica", "inference", _single_replica),
         Rule("high_target", "inference", _high_target),
         Rule("no_scale_down_window", "inference", _no_scale_down_window),
         Rule("all_spot", "training", _all_spot)]


def _plain(x: Any) -> dict:
    if x is None:
        return {}
    return x.model_dump() if hasattr(x, "model_dump") else dict(x)


def risk_warnings(kind: str, plan: Any, params: Any = None) -> list[str]:
    """The ``risk:`` warnings of one series: every :data:`RULES` entry of its ``kind``
    (``training`` | ``inference``) that fires on its ``plan`` (the exported plan, a dict
    or model) and ``params`` (the recommended policy's parameters; may be empty)."""
    p, q = _plain(plan), _plain(params)
    return [msg for r in RULES if r.kind == kind for msg in [r.check(p, q)] if msg]
