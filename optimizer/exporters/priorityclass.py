"""PriorityClass objects (``scheduling.k8s.io/v1``) for three preemption tiers.

Kubernetes docs "Pod Priority and Preemption": a pending pod may preempt pods
of lower priority unless its class says ``preemptionPolicy: Never``; values
above 1,000,000,000 are reserved for system classes.

* ``capplan-realtime-inference`` (1,000,000): real-time inference may preempt
  training and batch;
* ``capplan-training`` (100,000): may preempt batch only;
* ``capplan-batch`` (1,000, ``Never``): lowest; waits, never preempts.

None is ``globalDefault``. Cluster-scoped: no namespace.
"""

from __future__ import annotations

from optimizer.exporters.base import Context, Doc, register
from optimizer.plan.policy import SeriesPlan

TIERS = [
    ("capplan-realtime-inference", 1_000_000, "PreemptLowerPriority",
     "Real-time inference: may preempt training and batch pods."),
    ("capplan-training", 100_000, "PreemptLowerPriority", "Training: may preempt batch pods, never inference."),
    ("capplan-batch", 1_000, "Never", "Batch: lowest tier; never preempts."),
]


@register("priorityclass")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    if not ctx.settings.priority_classes:
        return []
    return [Doc(f"manifests/{name}-priorityclass.yaml",
                {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": ctx.meta(None, name), "value": value, "globalDefault": False,
                 "preemptionPolicy": policy, "description": desc})
            for name, value, policy, desc in TIERS]
