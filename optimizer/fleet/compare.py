"""The fleet's comparisons on one evaluation window: the causal plan with substitution (recommended) against
each series alone on its own model, the fleet pooled on each series' own model (no substitution), and the
fleet's perfect-foresight limit; fleet regret = the recommended plan's cost / the limit's.

Every variant is planned by the same causal rule (:mod:`optimizer.fleet.causal`) and replayed on the same
hours, so the differences are pooling and substitution, not the forecast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optimizer.fleet.causal import CausalRule, FleetPlan, causal_plan
from optimizer.fleet.limit import LAYERS, Sizing, fleet_limit, layer_cost, size
from optimizer.fleet.problem import FleetProblem, violations


@dataclass
class FleetComparison:
    """The variants of one fleet on one window (``problem``; hours ``start`` onwards of the history).

    ``recommended``/``pooled``: causal plans (substitution / own models pooled); ``alone``: one causal plan per
    series on its own model; ``limit``/``pooled_limit``: perfect-foresight sizings; ``alone_limit_usd``: the sum
    of the series' own limits; ``violations``: steps of the recommended plan on a model outside a series' list or
    below its memory floor (:func:`optimizer.fleet.problem.violations`)."""

    problem: FleetProblem
    recommended: FleetPlan
    pooled: FleetPlan
    alone: list[FleetPlan]
    limit: Sizing
    pooled_limit: Sizing
    alone_limit_usd: float
    violations: int

    @property
    def alone_cost_usd(self) -> float:
        """USD: the sum of the series' alone plans."""
        return float(sum(p.cost_usd for p in self.alone))

    @property
    def alone_coverage(self) -> np.ndarray:
        """(N,) each series' coverage in its alone plan."""
        return np.array([p.coverage[0] for p in self.alone])

    @property
    def regret(self) -> float:
        """Fleet regret: the recommended plan's cost / the limit's cost (NaN when the limit is 0)."""
        return float(self.recommended.cost_usd / self.limit.cost_usd) if self.limit.cost_usd > 0 else float("nan")

    @property
    def regret_vs_bound(self) -> float:
        """The recommended plan's cost / the limit's proven lower bound (>= :attr:`regret`)."""
        b = self.limit.bound_usd
        return float(self.recommended.cost_usd / b) if b > 0 else float("nan")

    def mix(self) -> dict[str, dict[str, dict[str, float]]]:
        """The recommended plan per GPU model and purchase option: ``gpus`` (the most held in an hour),
        ``gpu_hours`` and ``cost_usd``; models with nothing bought are left out."""
        p, plan = self.problem, self.recommended
        costs = plan.cost_by_layer(p)
        out: dict[str, dict[str, dict[str, float]]] = {}
        for j, m in enumerate(p.models):
            row = {k: {"gpus": float(plan.capacity[k][j].max(initial=0.0)),
                       "gpu_hours": float(plan.capacity[k][j].sum()), "cost_usd": float(costs[k][j])}
                   for k in LAYERS}
            if any(v["gpu_hours"] > 0 for v in row.values()):
                out[m] = row
        return out

    def series_rows(self) -> dict[str, dict]:
        """Per series: ``placement`` (GPU-hours per model, recommended plan), ``coverage`` (0-1),
        ``unmet_gpu_hours`` (GPU-hours of its own model), and the same two for its alone plan."""
        p, plan = self.problem, self.recommended
        out = {}
        for i, s in enumerate(p.series):
            hours = plan.placed[i].sum(axis=1)
            out[s] = {"gpu_model": p.own[i], "allowed": list(p.allowed[i]), "min_gpu_memory_gb": p.floors[i],
                      "placement": {m: float(hours[j]) for j, m in enumerate(p.models) if hours[j] > 1e-9},
                      "coverage": float(plan.coverage[i]), "unmet_gpu_hours": float(plan.unmet[i].sum()),
                      "alone_coverage": float(self.alone[i].coverage[0]),
                      "alone_unmet_gpu_hours": float(self.alone[i].unmet[0].sum()),
                      "alone_cost_usd": float(self.alone[i].cost_usd)}
        return out

    def summary(self) -> dict:
        """The comparison as plain numbers (the report's ``fleet`` object): ``limit``, ``recommended``,
        ``pooled``, ``alone`` (each ``cost_usd``), ``regret``, ``mix``, ``series``, ``violations``."""
        return {"models": list(self.problem.models), "hours": self.problem.hours,
                "limit": {"cost_usd": self.limit.cost_usd, "bound_usd": self.limit.bound_usd,
                          "method": self.limit.method},
                "recommended": {"cost_usd": self.recommended.cost_usd},
                "pooled": {"cost_usd": self.pooled.cost_usd, "limit_usd": self.pooled_limit.cost_usd},
                "alone": {"cost_usd": self.alone_cost_usd, "limit_usd": self.alone_limit_usd},
                "regret": self.regret, "violations": self.violations, "mix": self.mix(),
                "series": self.series_rows(), "notes": list(self.problem.notes)}


def compare(problem: FleetProblem, history: np.ndarray, start: int, rule: CausalRule = CausalRule()) -> FleetComparison:
    """Plan and compare ``problem``'s window (hours ``start`` to ``start + problem.hours`` of ``history``,
    (N, T_all) hourly demand in GPUs of each series' own model), every plan causal (:func:`causal_plan`)."""
    rec = causal_plan(problem, history, start, rule)
    pooled_p = problem.variant("pooled")
    pooled = causal_plan(pooled_p, history, start, rule)
    alone = [causal_plan(p, history[i:i + 1], start, rule) for i, p in enumerate(problem.alone())]
    limit = fleet_limit(problem)
    pooled_limit = fleet_limit(problem, "pooled")
    alone_limit = float(sum(size(p).cost_usd for p in problem.alone()))
    return FleetComparison(problem=problem, recommended=rec, pooled=pooled, alone=alone, limit=limit,
                           pooled_limit=pooled_limit, alone_limit_usd=alone_limit,
                           violations=violations(problem, rec.placed))


__all__ = ["FleetComparison", "compare", "layer_cost"]
