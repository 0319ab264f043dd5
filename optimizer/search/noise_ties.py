"""Ties within the days' noise (setting ``plan.noise_ties``): which of the grid scan's policies
to keep when several score within the noise of the tuning window's days of its best.

The grid scan (:func:`optimizer.search.policy_search.grid_scan`) ranks about 2,600 training policies on one
tuning week. Policies of different structure (the daily level at p90 under the ``max`` rule, or at
p95 under the ``newsvendor`` rule) can score within a few tens of USD of each other, far less
than what the week's days disagree on. A forecast that moves by 0.5-3 % (another seed of the
daily LSTM) then reorders them, and the plan flips between policies whose evaluation costs differ
by 5-15 %.

* ``exact`` (default): the scan's own order (:func:`optimizer.search.policy_search.pick_best`; only policies
  within float noise, :data:`optimizer.search.policy_search.TIE_RTOL`, count as tied).
* ``cheapest_within_noise``: every scanned policy whose robust score (the worst of it and its grid
  neighbours) is above the best's by no more than the days' noise of their paired daily costs
  (:func:`optimizer.rivals.judge.rival_margin`, ``Z x sqrt(n) x sd`` of the daily cost differences, the
  margin a rival must clear to displace the searched policy) is as good as the best on this
  evidence. Among those that cover the tuning window at least to the tuning's coverage target,
  the one with the lowest tuning cost is kept; with none, the best. The reason: the window cannot
  tell these policies apart, and of policies that meet the target, the cheaper one costs less
  when it is wrong. The margin is symmetric (the paired differences' spread), so two policies
  within noise of each other are both in the set whichever of them scores best, and the
  preference (cost among those meeting a fixed target) does not depend on which one does: a
  perturbation that swaps the best of two near-tied policies leaves the choice alone, where the
  ``exact`` order follows the swap.

The rule needs days with demand to estimate their noise: a pool whose tuning window is
intermittent (:mod:`optimizer.training.intermittent`: a difference on the one day with demand is always
"within noise") keeps ``exact``; the tuning says so in a note when the rule changes the
policy.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

from optimizer.plan.policy import Metrics
from optimizer.rivals.judge import Z, rival_margin

NoiseTies = Literal["exact", "cheapest_within_noise"]
NOISE_TIES = get_args(NoiseTies)


def within_noise(points: dict[tuple, tuple[float, Metrics, object]], robust: dict[tuple, float], best: tuple,
                 z: float = Z) -> dict[tuple, tuple[float, Metrics, object]]:
    """The points (``key -> (objective, metrics, params)``, as the scan's cache holds them) whose
    ``robust[key]`` score is at most ``robust[best]`` plus the days' noise of their paired daily
    costs against ``best``'s (:func:`optimizer.rivals.judge.rival_margin`, USD; 0 without daily costs,
    so such a point must tie exactly), ``best`` included."""
    b_m = points[best][1]
    out = {}
    for k, v in points.items():
        margin = 0.0 if k == best else rival_margin(b_m, v[1], z)
        if robust[k] <= robust[best] + margin + 1e-9 * max(1.0, abs(robust[best])):
            out[k] = v
    return out


def cheapest_within_noise(points: dict[tuple, tuple[float, Metrics, object]], robust: dict[tuple, float],
                          best: tuple, target: float, z: float = Z) -> tuple[tuple, int]:
    """``(key, n)``: of the points :func:`within_noise` of ``best`` (``n`` of them) whose tuning
    coverage is at least ``target`` (ratio; the tuning's coverage target), the one with the lowest
    tuning cost (USD; module docstring); ``best`` when none meets the target. Ties on cost go to
    ``best`` when it is among them, else to the first in ``points``' order."""
    near = within_noise(points, robust, best, z)
    ok = [k for k, (_, m, _) in near.items() if _cov(m) >= target - 1e-12]
    key = min(ok, key=lambda k: (points[k][1].cost_usd, k != best)) if ok else best
    return key, len(near)


def noise_tie_notes(tie: dict | None) -> list[str]:
    """The tuning's note when :func:`cheapest_within_noise` changed the scan's policy (``tie``:
    :attr:`optimizer.search.policy_search.SearchResult.noise_tie`); empty when it did not (None)."""
    if not tie:
        return []
    ex = tie["exact_params"]
    was = ", ".join(f"{k} {ex[k]}" for k in ("quantile", "daily_rule", "daily_cap", "headroom", "topup_quantile",
                                               "topup_headroom") if k in ex) or str(ex)
    return [f"tuning: {tie['n_within']} policies scored within the days' noise of the scan's best ({was}; "
            f"optimizer.rivals.judge' paired margin); the cheapest that meets the tuning's coverage target was kept "
            f"({tie['cost_usd']:,.2f} vs {tie['exact_cost_usd']:,.2f} USD on the tuning window; plan.noise_ties: "
            "cheapest_within_noise, optimizer.search.noise_ties)"]


def _cov(m: Metrics) -> float:
    return m.coverage if math.isfinite(m.coverage) else 0.0


__all__ = ["NOISE_TIES", "NoiseTies", "cheapest_within_noise", "noise_tie_notes", "within_noise"]
