"""Kueue quotas from the recommended fleet plan: per team (a group of member series) and GPU model, the
``nominalQuota``, ``borrowingLimit`` and ``lendingLimit`` of its ClusterQueue, and per model its ResourceFlavor's
capacity and the plan's purchase mix (:class:`optimizer.exporters.fleet.kueue.FleetQuota`, which the Kueue exporter
writes).

All figures are read from the recommended plan replayed on the evaluation window
(:class:`optimizer.fleet.causal.FleetPlan`: ``capacity`` per purchase option (M, T) GPUs held per model and
hour, ``placed`` (N, M, T) GPUs of model m serving series i in hour h):

* **capacity** of model m (the ResourceFlavor's ``capplan.io/capacity-gpus``): the most GPUs of m the plan holds
  at once, reserved + spot + on-demand, ``max_h``. This is what the cohort can lend out at most.
* **held for a series**: the GPUs bought ahead (reserved, a week ahead, + spot, a day ahead; the layers a quota
  can promise; on-demand is the hourly burst) that serve it:
  ``held[i, m, h] = placed[i, m, h] * min(1, committed[m, h] / sum_k placed[k, m, h])`` with
  ``committed = reserved + spot``, i.e. when the series on m together use more than was bought ahead, the
  committed GPUs are shared in proportion to use and the rest was on-demand. A team's held GPUs are its members'
  summed per hour.
* **nominalQuota** of team g on model m: ``ceil(max_h held[g, m, h])``, the committed GPUs the plan holds for the
  team on m at the team's own peak. Chosen over the team's peak use (which includes on-demand bursts the plan
  buys only an hour ahead) so that the nominal quotas are GPUs the plan has bought ahead. When the teams'
  peaks, reached at different hours, sum above the model's capacity, the capacity is shared among them in
  proportion to ``max_h held`` (largest remainder), so that the cohort never promises GPUs that do not exist
  (lint rule ``kueue-quota-capacity``); what is cut shows in the borrowing limit.
* **borrowingLimit**: ``ceil(max_h placed[g, m, h]) - nominal`` (>= 0): the extra the team used on m at its peak
  beyond its nominal, i.e. the pooled capacity (other teams' idle quota or on-demand) it borrowed; at most the
  capacity less its nominal.
* **lendingLimit**: ``nominal - min(nominal, floor(min_h placed[g, m, h]))``: its nominal less what it always
  used on m in the window, i.e. the part of its quota that sat idle at some hour and may be lent.

A team lists the models any member may use (its list, cut at its memory floor) on which the plan holds GPUs;
a team whose allowed models hold none lists its members' own models with a zero quota, so that its ClusterQueue
still admits to a flavor. The GFD product label of each model's nodes (``nvidia.com/gpu.product``) is
:data:`GFD_PRODUCT` (the spellings of NVIDIA GPU Feature Discovery, ``../shared/research/heterogeneous-gpus.md``);
a model not in it gets ``NVIDIA-<model>``; the label can be edited in ``policy.yaml``'s ``spec.fleet`` and
re-rendered (``capplan export --out``).
"""

from __future__ import annotations

import math

import numpy as np

from optimizer.exporters.fleet.kueue import FlavorSpec, FleetQuota, ModelQuota, TeamQuota
from optimizer.fleet.causal import FleetPlan
from optimizer.fleet.limit import LAYERS
from optimizer.fleet.problem import FleetProblem

#: ``nvidia.com/gpu.product`` as GPU Feature Discovery labels the nodes of each built-in model (one common
#: board: SXM where there is one); edit ``spec.fleet.models.<model>.gpuProduct`` in policy.yaml for another.
GFD_PRODUCT = {"H200-141GB": "NVIDIA-H200", "H100-80GB": "NVIDIA-H100-80GB-HBM3",
               "A100-80GB": "NVIDIA-A100-SXM4-80GB", "A100-40GB": "NVIDIA-A100-SXM4-40GB", "L40S": "NVIDIA-L40S",
               "L4": "NVIDIA-L4", "A10G": "NVIDIA-A10G", "T4": "Tesla-T4", "V100-32GB": "Tesla-V100-SXM2-32GB"}
EPS = 1e-6


def gfd_product(model: str) -> str:
    """The ``nvidia.com/gpu.product`` label value of ``model``'s nodes (:data:`GFD_PRODUCT`, else
    ``NVIDIA-<model>``)."""
    return GFD_PRODUCT.get(model, f"NVIDIA-{model}")


def held_for_series(plan: FleetPlan) -> np.ndarray:
    """(N, M, T) GPUs bought ahead (reserved + spot) that serve each series on each model per hour (module
    docstring); per model and hour they sum to at most the committed GPUs."""
    committed = plan.capacity["reserved"] + plan.capacity["spot"]
    used = plan.placed.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(used > committed, committed / np.where(used > 0, used, 1.0), 1.0)
    return plan.placed * scale[None]


def _share(total: int, weights: list[float]) -> list[int]:
    """``total`` whole GPUs shared in proportion to ``weights`` (largest remainder, ties to the first)."""
    w = np.asarray(weights, float)
    if total <= 0 or w.sum() <= 0:
        return [0] * len(weights)
    exact = total * w / w.sum()
    out = np.floor(exact + EPS).astype(int)
    for k in np.argsort(-(exact - out), kind="stable")[: max(total - int(out.sum()), 0)]:
        out[k] += 1
    return [int(x) for x in out]


def fleet_quota(problem: FleetProblem, plan: FleetPlan, teams: dict[str, tuple[str | None, list[str]]],
                cohort: str, mix: dict[str, dict[str, dict[str, float]]] | None = None) -> FleetQuota:
    """The :class:`FleetQuota` of the recommended ``plan`` of ``problem`` (module docstring).

    ``teams``: team name -> (namespace or None for the team's name, member series ids of ``problem``);
    ``cohort``: the Kueue cohort's name; ``mix``: per model the plan's purchase mix
    (:meth:`optimizer.fleet.compare.FleetComparison.mix`: option -> ``gpus``, ``gpu_hours``, ``cost_usd``),
    recorded on each flavor. Quotas in whole GPUs of each model.

    Raises ValueError when a team names a series not in ``problem``, or a series is in two teams; pydantic's
    ValidationError when a name is not an RFC 1123 label (:class:`FleetQuota`)."""
    index = {s: i for i, s in enumerate(problem.series)}
    seen: dict[str, str] = {}
    for team, (_, members) in teams.items():
        for s in members:
            if s not in index:
                raise ValueError(f"fleet quota: team {team!r}: series {s!r} is not in the fleet")
            if s in seen:
                raise ValueError(f"fleet quota: series {s!r} is in teams {seen[s]!r} and {team!r}")
            seen[s] = team
    total = sum(plan.capacity[k] for k in LAYERS)
    capacity = {m: int(math.ceil(float(total[j].max(initial=0.0)) - EPS)) for j, m in enumerate(problem.models)}
    held = held_for_series(plan)
    listed: dict[str, list[str]] = {}
    for team, (_, members) in teams.items():
        idx = [index[s] for s in members]
        allowed = {m for i in idx for m in problem.allowed[i]}
        models = [m for m in problem.models if m in allowed and capacity[m] > 0]
        listed[team] = models or list(dict.fromkeys(problem.own[i] for i in idx))
    raw: dict[str, dict[str, tuple[float, float, float]]] = {}  # team -> model -> (max held, max use, min use)
    for team, (_, members) in teams.items():
        idx = [index[s] for s in members]
        raw[team] = {}
        for m in listed[team]:
            j = problem.models.index(m)
            h = held[idx, j].sum(axis=0)
            u = plan.placed[idx, j].sum(axis=0)
            low = float(u.min()) if u.size else 0.0
            raw[team][m] = (float(h.max(initial=0.0)), float(u.max(initial=0.0)), low)
    nominal: dict[str, dict[str, int]] = {t: {} for t in teams}
    for m in problem.models:
        users = [t for t in teams if m in raw[t]]
        want = [int(math.ceil(raw[t][m][0] - EPS)) for t in users]
        if sum(want) > capacity[m]:
            want = _share(capacity[m], [raw[t][m][0] for t in users])
        for t, n in zip(users, want):
            nominal[t][m] = n
    out_teams = {}
    for team, (ns, members) in teams.items():
        quotas = {}
        for m, (_, peak, low) in raw[team].items():
            n = nominal[team][m]
            borrow = min(max(int(math.ceil(peak - EPS)) - n, 0), max(capacity[m] - n, 0))
            lend = n - min(n, int(math.floor(low + EPS)))
            quotas[m] = ModelQuota(nominal=n, borrowing_limit=borrow, lending_limit=lend)
        out_teams[team] = TeamQuota(namespace=ns, models=quotas, series=list(members))
    used = sorted({m for t in out_teams.values() for m in t.models})
    flavors = {m: FlavorSpec(gpu_product=gfd_product(m), capacity_gpus=capacity[m], mix=(mix or {}).get(m, {}))
               for m in used}
    return FleetQuota(cohort=cohort, teams=out_teams, models=flavors)


__all__ = ["GFD_PRODUCT", "fleet_quota", "gfd_product", "held_for_series"]
