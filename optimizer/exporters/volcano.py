"""Volcano ``Queue`` (``scheduling.volcano.sh/v1beta1``) per training pool.

Volcano docs "Queue": ``guarantee`` is reserved for the queue and never lent,
``deserved`` is its fair share that other queues may borrow when idle and that
is reclaimed when ``reclaimable`` is true, ``capability`` is the hard upper
limit. Volcano's admission requires guarantee <= deserved <= capability.

How the three follow from the plan and the pool's quota (GPU counts, resource
``nvidia.com/gpu`` by default; :func:`queue_quantities`):

* ``guarantee`` = the plan's reserved GPUs (weekly lead time);
* **bought** = reserved + on-demand + spot (+ the hourly on-demand top-up):
  what the plan pays for;
* ``capability`` = the plan's cap (``capability_gpus``: headroom x the 7-day
  p99 peak, at least what it buys), then
  - at most the quota (``quota_gpus``) when ``export.capability_limit`` is
    ``quota`` (the default) and the quota is known — a queue may not take
    more than the team was given; ``plan`` keeps the plan's cap;
  - never 0: a pool whose forecast is all zero gets the quota, else the last
    non-zero daily peak of its history (``last_peak_gpus``), else 1, and a
    warning — a cap of 0 would block its next job;
  - at least ``guarantee``;
* ``deserved`` = the larger of the next day's p50 need (``deserved_gpus``)
  and what the plan buys, within [guarantee, capability];
* ``reclaimable`` and ``weight`` from ``export``.

The Queue carries the quota and the bought count as annotations
(``capplan.io/quota-gpus``, ``capplan.io/planned-gpus``) so that the lint rules
(:mod:`.lint`, ``volcano-queue-quota``) can check capability <= quota and
deserved >= min(bought, capability) on hand-edited files too.

Queues are cluster-scoped: no namespace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from optimizer.book.purchase_check import NEED_BASIS
from optimizer.exporters.base import Context, Doc, register
from optimizer.plan.policy import SeriesPlan

QUOTA_ANNOTATION = "capplan.io/quota-gpus"
PLANNED_ANNOTATION = "capplan.io/planned-gpus"
ABOVE_QUOTA_ANNOTATION = "capplan.io/capability-above-quota"
BOUGHT_KEYS = ("reserved_gpus", "on_demand_gpus", "spot_gpus", "on_demand_hourly_gpus")


@dataclass
class QueueQuantities:
    """GPU counts of one Queue with a comment on each and the warnings they raise."""

    guarantee: int
    deserved: int
    capability: int
    bought: int
    quota: int | None
    notes: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def queue_quantities(plan: SeriesPlan, limit: str = "quota") -> QueueQuantities:
    """guarantee, deserved and capability of a training plan (rules in the module docstring)."""
    pl = plan.plan
    bl = pl.get("baseline") or {}
    guarantee = int(pl.get("reserved_gpus") or 0)
    bought = sum(int(pl.get(k) or 0) for k in BOUGHT_KEYS)
    quota = pl.get("quota_gpus")
    quota = int(math.floor(float(quota))) if quota is not None and float(quota) > 0 else None
    cap = max(int(pl.get("capability_gpus") or 0), bought)
    warnings: list[str] = []
    why = "plan: headroom x 7-day p99 peak"
    if cap == 0:
        peak = pl.get("last_peak_gpus")
        if quota is not None:
            cap, why = quota, "quota (forecast is all zero)"
        elif peak:
            cap, why = int(math.ceil(float(peak))), "last non-zero daily peak (forecast is all zero, no quota)"
        else:
            cap, why = 1, "1 (forecast and history are all zero, no quota)"
        warnings.append(f"export: forecast for {plan.series_id} is all zero; Volcano capability set to {cap} "
                        f"({why}) instead of 0, which would block the pool's next job")
    if quota is not None and limit == "quota" and cap > quota:
        if bought > quota:
            warnings.append(f"export: the next day's plan buys {bought} GPUs for {plan.series_id}, above its quota of "
                            f"{quota}; the Queue caps it at the quota. Raise the quota (the report's quota check gives "
                            f"{NEED_BASIS}) or set export.capability_limit: plan")
        cap, why = quota, f"quota (plan's cap {cap} is above it)"
    if guarantee > cap:
        warnings.append(f"export: {plan.series_id} reserves {guarantee} GPUs, above the Queue's capability {cap}; "
                        f"guarantee lowered to {cap}")
        guarantee = cap
    deserved = min(max(int(pl.get("deserved_gpus") or 0), bought, guarantee), cap)
    b_res, b_cap = bl.get("reserved_gpus"), bl.get("capacity_gpus")
    notes = {
        "guarantee": "reserved GPUs (tuned weekly plan); baseline: " + (f"{b_res} (" if b_res is not None else "(")
                     + "30 % of 1.2 x the last day's peak)",
        "deserved": "max(next day's p50 need, GPUs the plan buys), within guarantee..capability; baseline: "
                    + (f"{b_cap} (" if b_cap is not None else "(") + "1.2 x the last day's peak)",
        "capability": f"hard cap: {why}",
    }
    return QueueQuantities(guarantee, deserved, cap, bought, quota, notes, warnings)


def queue(plan: SeriesPlan, ctx: Context) -> Doc:
    s = ctx.settings
    q = queue_quantities(plan, s.capability_limit)
    name = ctx.names[plan.series_id]
    meta = ctx.meta(plan, name)
    meta["annotations"][PLANNED_ANNOTATION] = str(q.bought)
    if q.quota is not None:
        meta["annotations"][QUOTA_ANNOTATION] = str(q.quota)
    if s.capability_limit == "plan":
        meta["annotations"][ABOVE_QUOTA_ANNOTATION] = "true"
    obj = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": meta,
        "spec": {
            "weight": s.queue_weight,
            "reclaimable": s.reclaimable,
            "guarantee": {"resource": {s.gpu_resource: str(q.guarantee)}},
            "deserved": {s.gpu_resource: str(q.deserved)},
            "capability": {s.gpu_resource: str(q.capability)},
        },
    }
    return Doc(f"manifests/{name}-queue.yaml", obj, notes=q.notes,
               header=f"Volcano Queue for training pool {plan.series_id} (forecast {plan.forecast_version})")


def warnings(plans: list[SeriesPlan], ctx: Context) -> dict[str, list[str]]:
    """``series_id -> messages`` about the Queues (idle pool, plan above quota)."""
    out = {}
    for p in plans:
        if p.kind == "training":
            w = queue_quantities(p, ctx.settings.capability_limit).warnings
            if w:
                out[p.series_id] = w
    return out


@register("volcano")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """One Queue per training series."""
    return [queue(p, ctx) for p in plans if p.kind == "training"]
