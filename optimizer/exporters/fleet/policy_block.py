"""``policy.yaml``'s ``spec.fleet``: the fleet's Kueue quotas and purchase mix, written beside the per-series
entries when the plan has a fleet, and read back so that ``capplan export --out`` re-renders the Kueue objects
(:mod:`.kueue`) from the policy alone.

Shape (camelCase, as the rest of the policy; schema ``$defs/fleet`` of ``schemas/dispatcherpolicy.schema.json``)::

    fleet:
      cohort: research
      models:
        A100-80GB:
          gpuProduct: NVIDIA-A100-SXM4-80GB   # nvidia.com/gpu.product of its nodes (ResourceFlavor.spec.nodeLabels)
          nodeLabels: {}                      # more labels selecting them
          capacityGpus: 12                    # GPUs of the model the plan holds at once, at most
          mix:                                # the recommended plan per purchase option on the evaluation window
            reserved: {gpus: 4, gpuHours: 288, costUsd: 673.9}
            spot: {gpus: 6, gpuHours: 400, costUsd: 624.0}
            onDemand: {gpus: 2, gpuHours: 10, costUsd: 39.0}
      teams:
        train-vc6ye-74100c:
          namespace: default
          scheduler: kueue
          series: [train/vc6YE]
          quotas:
            A100-80GB: {nominalQuota: 4, borrowingLimit: 2, lendingLimit: 1}   # GPUs

Floats are rounded for reading (:func:`optimizer.exporters.policy_fields.human`), as elsewhere in the policy.
"""

from __future__ import annotations

from optimizer.exporters.fleet.kueue import FlavorSpec, FleetQuota, ModelQuota, TeamQuota
from optimizer.exporters.policy_fields import camel, camel_dict, human, snake, snake_dict

_QUOTA = {"nominal": "nominalQuota", "borrowing_limit": "borrowingLimit", "lending_limit": "lendingLimit"}


def fleet_entry(fleet: FleetQuota) -> dict:
    """``spec.fleet`` of ``fleet`` (module docstring); limits that are None (no limit) are left out."""
    models = {}
    for m, f in fleet.models.items():
        e: dict = {"gpuProduct": f.gpu_product, "nodeLabels": dict(f.node_labels), "capacityGpus": f.capacity_gpus}
        if f.mix:
            e["mix"] = {camel(k): camel_dict(v) for k, v in f.mix.items()}
        models[m] = e
    teams = {}
    for name, t in fleet.teams.items():
        quotas = {m: {v: getattr(q, k) for k, v in _QUOTA.items() if getattr(q, k) is not None}
                  for m, q in t.models.items()}
        teams[name] = {"namespace": t.namespace or name, "scheduler": t.scheduler, "series": list(t.series),
                       "quotas": quotas}
    return human({"cohort": fleet.cohort, "models": models, "teams": teams})


def fleet_of(entry: dict) -> FleetQuota:
    """The :class:`FleetQuota` of a ``spec.fleet`` entry (the inverse of :func:`fleet_entry`). Raises pydantic's
    ValidationError for a missing or bad field (a quota not a whole count, a lending limit above nominal, a team
    naming a model not under ``models``), KeyError/TypeError for an entry of the wrong shape."""
    models = {m: FlavorSpec(gpu_product=e["gpuProduct"], node_labels=dict(e.get("nodeLabels") or {}),
                            capacity_gpus=e["capacityGpus"],
                            mix={snake(k): snake_dict(v) for k, v in (e.get("mix") or {}).items()})
              for m, e in entry["models"].items()}
    teams = {}
    for name, t in entry["teams"].items():
        quotas = {m: ModelQuota(**{k: q[v] for k, v in _QUOTA.items() if v in q}) for m, q in t["quotas"].items()}
        teams[name] = TeamQuota(namespace=t.get("namespace"), scheduler=t.get("scheduler", "kueue"), models=quotas,
                                series=list(t.get("series") or []))
    return FleetQuota(cohort=entry["cohort"], teams=teams, models=models)


def fleet_from_policy(obj: dict) -> FleetQuota | None:
    """The fleet quota a parsed DispatcherPolicy records (``spec.fleet``), or None when it records none (a plan
    without a fleet). Errors as :func:`fleet_of`."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    entry = spec.get("fleet") if isinstance(spec, dict) else None
    return None if entry is None else fleet_of(entry)


__all__ = ["fleet_entry", "fleet_of", "fleet_from_policy"]
