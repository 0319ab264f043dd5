"""The fleet plan: the limit against brute force, pooling and substitution never raise it, placements respect
each series' list and memory floor, the causal plan reads no future demand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from optimizer.book.gpus import BUILTIN_CATALOGUE
from optimizer.book.prices import default_price_book
from optimizer.fleet.causal import CausalRule, causal_plan, rule_scenarios, seasonal_scenario
from optimizer.fleet.compare import compare
from optimizer.fleet.limit import size
from optimizer.fleet.problem import build_problem, violations
from optimizer.fleet.replay import assign

BOOK = default_price_book()


def _problem(demand, own, allowed, floors=None, kinds=None):
    n = len(own)
    return build_problem([f"s{i}" for i in range(n)], kinds or ["training"] * n, own, allowed,
                         floors or [None] * n, np.asarray(demand, float), BUILTIN_CATALOGUE, BOOK)


def _feasible(p, h, cap):
    """Can hour h's demand be placed on capacity ``cap`` (M,)? An LP, independent of the fleet code."""
    need = p.need()[:, h]
    n, m = p.ratio.shape
    pairs = [(i, j) for i in range(n) for j in range(m) if np.isfinite(p.ratio[i, j])]
    if not need.any():
        return True
    a_ub, b_ub = [], []
    for i in range(n):  # -sum_j y_ij <= -need_i
        a_ub.append([-1.0 if ii == i else 0.0 for ii, _ in pairs])
        b_ub.append(-need[i])
    for j in range(m):
        a_ub.append([p.ratio[ii, jj] if jj == j else 0.0 for ii, jj in pairs])
        b_ub.append(cap[j])
    return linprog(np.zeros(len(pairs)), A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs").status == 0


def _brute_force(p, top=4):
    """The cheapest whole-GPU reserved + spot (one each per model: the window is under a day) + hourly
    on-demand, by enumeration of every capacity 0..top."""
    m, t = len(p.models), p.hours
    grid = list(itertools.product(range(top + 1), repeat=m))
    ok = {h: {k for k in grid if _feasible(p, h, k)} for h in range(t)}
    price = {k: np.array([getattr(p.prices[x], k) for x in p.models]) for k in ("reserved", "spot", "on_demand")}
    best = np.inf
    for r in grid:
        for s in grid:
            base = np.add(r, s)
            cost = t * (price["reserved"] @ r + price["spot"] @ s)
            for h in range(t):
                hc = [price["on_demand"] @ od for od in grid if tuple(np.add(base, od)) in ok[h]]
                if not hc:
                    cost = np.inf
                    break
                cost += min(hc)
            best = min(best, cost)
    return best


CASES = [
    # V100 work may move to the A100-40GB (at 0.42 of the GPUs); the A100 team may not move to the V100
    ([[3, 2, 0, 3], [1, 2, 2, 0]], ["V100-32GB", "A100-40GB"], [["V100-32GB", "A100-40GB"], ["A100-40GB"]]),
    ([[2, 0, 1], [1, 3, 1]], ["A100-80GB", "A100-40GB"], [["A100-80GB", "H100-80GB"], ["A100-40GB", "A100-80GB"]]),
    ([[1, 1, 2, 1], [0, 2, 1, 1]], ["L4", "A10G"], [["L4", "A10G"], ["A10G", "L4", "T4"]]),
]


@pytest.mark.parametrize("demand,own,allowed", CASES)
def test_limit_equals_brute_force(demand, own, allowed):
    kinds = ["inference", "inference"] if own[0] == "L4" else None
    p = _problem(demand, own, allowed, kinds=kinds)
    exact = size(p, exact=True, gap=0.0)
    assert exact.cost_usd == pytest.approx(_brute_force(p, top=4 if len(p.models) == 2 else 3), rel=1e-6)
    fast = size(p)  # the two-stage default: a whole-GPU plan, never below the optimum, bound never above it
    assert fast.cost_usd >= exact.cost_usd - 1e-6 and fast.bound_usd <= exact.cost_usd + 1e-6


def test_pooling_and_substitution_never_raise_the_limit():
    rng = np.random.default_rng(7)
    for _ in range(4):
        d = rng.integers(0, 5, size=(3, 30))
        p = _problem(d, ["V100-32GB", "A100-40GB", "A100-80GB"],
                     [["V100-32GB", "A100-40GB", "A100-80GB"], ["A100-40GB", "A100-80GB"], ["A100-80GB", "H100-80GB"]])
        sub = size(p, exact=True, gap=0.0).cost_usd
        pooled = size(p.variant("pooled"), exact=True, gap=0.0).cost_usd
        alone = sum(size(a, exact=True, gap=0.0).cost_usd for a in p.alone())
        assert sub <= pooled + 1e-6 <= alone + 2e-6
        assert sub < alone  # V100 work is cheaper on the A100-40GB in the default book: substitution pays


def test_demand_is_converted_by_relative_speed():
    p = _problem([[10, 10]], ["V100-32GB"], [["A100-40GB"]])
    s = size(p, exact=True, gap=0.0)
    ratio = BUILTIN_CATALOGUE["V100-32GB"].speed["training"] / BUILTIN_CATALOGUE["A100-40GB"].speed["training"]
    assert s.placed.sum() == pytest.approx(20 * ratio)
    assert s.placed[0, p.models.index("V100-32GB")].sum() == 0
    total = sum(c[p.models.index("A100-40GB")] for c in s.capacity.values())
    assert np.all(total == np.ceil(10 * ratio))


def _fleet(seed=3, days=16):
    rng = np.random.default_rng(seed)
    t = 24 * days
    hod = np.sin(np.arange(t) / 24 * 2 * np.pi)
    d = np.maximum(0, np.round(rng.normal([[12], [6], [4]], 2, size=(3, t)) + np.array([[4], [2], [1]]) * hod))
    p = _problem(d, ["V100-32GB", "A100-40GB", "A100-80GB"],
                 [["V100-32GB", "A100-40GB", "A100-80GB"], ["A100-40GB", "A100-80GB"], ["A100-80GB", "H100-80GB"]],
                 floors=[None, 40, 80])
    return p, d


def test_recommended_plan_never_places_below_a_floor_or_outside_a_list():
    p, d = _fleet()
    start = d.shape[1] - 48
    c = compare(p.window(start, start + 48), d, start)
    assert c.violations == 0
    assert c.limit.cost_usd <= c.pooled_limit.cost_usd + 1e-6 and c.recommended.cost_usd >= c.limit.bound_usd - 1e-6
    rows = c.series_rows()
    assert "V100-32GB" not in rows["s1"]["placement"] and set(rows["s2"]["placement"]) <= {"A100-80GB", "H100-80GB"}
    # the check itself catches a placement on a model outside the list
    bad = c.recommended.placed.copy()
    bad[2, p.models.index("A100-40GB"), 5] = 1.0
    assert violations(c.problem, bad) == 1


def test_causal_plan_reads_no_future_demand():
    p, d = _fleet()
    start, t = d.shape[1] - 48, 48
    base = causal_plan(p.window(start, start + t), d, start)
    later = d.copy()
    later[:, start + 30:] += 50  # a surge from hour 30 of the window on
    moved = causal_plan(p.window(start, start + t, later[:, start:start + t]), later, start)
    for k in ("reserved", "spot"):  # decided a day or a week ahead: hours 0-29 (and the day they lie in) unmoved
        assert np.array_equal(base.capacity[k][:, :24], moved.capacity[k][:, :24])
    assert np.array_equal(base.capacity["on_demand"][:, :31], moved.capacity["on_demand"][:, :31])
    assert moved.unmet[:, 30].sum() > 0  # the first surge hour was not foreseen
    with pytest.raises(ValueError, match="look-ahead"):
        seasonal_scenario(d, 10, 20, 11, CausalRule())
    sc = rule_scenarios(d, start, start + t, CausalRule())
    assert np.array_equal(sc["on_demand"][:, 1:], d[:, start:start + t - 1])


def test_replay_serves_what_capacity_allows_and_records_the_rest():
    p = _problem([[4, 4], [2, 2]], ["A100-40GB", "A100-40GB"], [["A100-40GB"], ["A100-40GB"]])
    placed, unmet = assign(p, np.array([[6.0, 3.0]]))
    assert placed[:, 0, 0].sum() == pytest.approx(6) and unmet[:, 0].sum() == pytest.approx(0)
    assert unmet[:, 1].sum() == pytest.approx(3)
    # shortfall shared by share of demand: neither series is left with nothing
    assert placed[0, 0, 1] > 0 and placed[1, 0, 1] > 0


def test_an_idle_window_places_nothing_and_leaves_nothing_unmet():
    # a member with no demand in the window (an idle pool) alone: no variable to solve for, not an error
    p = _problem([[0, 0, 0]], ["A100-40GB"], [["A100-40GB"]])
    placed, unmet = assign(p, np.array([[2.0, 2.0, 2.0]]))
    assert placed.sum() == 0 and unmet.sum() == 0


def test_quantile_rule_and_given_forecasts_plan_too():
    p, d = _fleet()
    start, t = d.shape[1] - 48, 48
    w = p.window(start, start + t)
    q = causal_plan(w, d, start, CausalRule(method="quantile"))
    assert q.cost_usd > 0 and np.all(q.coverage > 0.5)
    # perfect forecasts as every layer's scenario: nothing is left unmet
    exact = {k: d[:, start:start + t].astype(float) for k in ("reserved", "spot", "on_demand")}
    f = causal_plan(w, d, start, scenarios=exact)
    assert np.all(f.unmet == 0) and np.all(f.coverage == 1.0)
    with pytest.raises(ValueError, match="method"):
        causal_plan(w, d, start, CausalRule(method="magic"))
