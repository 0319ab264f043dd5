"""Volcano ``Queue`` (``scheduling.volcano.sh/v1beta1``) per training pool.

Volcano docs "Queue": ``guarantee`` is reserved for the queue and never lent,
``deserved`` is its fair share that other queues may borrow when idle and that
is reclaimed when ``reclaimable`` is true, ``capability`` is the hard upper
limit. Here (GPU counts, resource ``nvidia.com/gpu`` by default):

* ``guarantee`` = the plan's reserved GPUs (weekly lead time);
* ``deserved``  = the forecast need for the next day (``deserved_gpus``),
  clamped into [guarantee, capability] because Volcano's admission
  requires guarantee <= deserved <= capability;
* ``capability`` = the plan's cap (``capability_gpus``);
* ``reclaimable`` and ``weight`` from ``export``.

Queues are cluster-scoped: no namespace.
"""

from __future__ import annotations

from optimizer.exporters.base import Context, Doc, register
from optimizer.policy import SeriesPlan


def queue(plan: SeriesPlan, ctx: Context) -> Doc:
    s = ctx.settings
    pl = plan.plan
    guarantee = int(pl.get("reserved_gpus") or 0)
    capability = max(int(pl.get("capability_gpus") or 0), guarantee)
    deserved = min(max(int(pl.get("deserved_gpus") or 0), guarantee), capability)
    name = ctx.names[plan.series_id]
    obj = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": ctx.meta(plan, name),
        "spec": {
            "weight": s.queue_weight,
            "reclaimable": s.reclaimable,
            "guarantee": {"resource": {s.gpu_resource: str(guarantee)}},
            "deserved": {s.gpu_resource: str(deserved)},
            "capability": {s.gpu_resource: str(capability)},
        },
    }
    return Doc(f"manifests/{name}-queue.yaml", obj,
               notes={"guarantee": "reserved GPUs (weekly plan)", "deserved": "forecast need, next day",
                      "capability": "hard cap"},
               header=f"Volcano Queue for training pool {plan.series_id} (forecast {plan.forecast_version})")


@register("volcano")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """One Queue per training series."""
    return [queue(p, ctx) for p in plans if p.kind == "training"]
