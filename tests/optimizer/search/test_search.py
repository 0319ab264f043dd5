"""optimizer/search/policy_search.py on hand-computed cases: the coverage shortfall, the objective, the
daily-regret score, the tie order, the robust grid scan and the search space's points."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skopt.space import Real

from optimizer.plan.policy import Metrics
from optimizer.search.objective import coverage_shortfall, daily_regret_score, objective_value
from optimizer.search.policy_search import grid_scan, pick_best, run_search
from optimizer.search.space import Space, training_space


def metrics(cost=0.0, coverage=1.0, daily=None, daily_cost=None) -> Metrics:
    return Metrics(cost_usd=cost, coverage=coverage, idle_ratio=0.0, unmet=0.0, daily_coverage=daily,
                   daily_cost_usd=daily_cost)


def test_coverage_shortfall_window_daily_and_lower_confidence_bound():
    assert coverage_shortfall(metrics(coverage=0.90), 0.95) == pytest.approx(0.05)
    assert coverage_shortfall(metrics(coverage=0.97), 0.95) == 0.0
    assert coverage_shortfall(metrics(coverage=math.nan), 0.95) == 0.95  # no coverage counts as none
    m = metrics(coverage=0.90, daily=[1.0, 0.8])
    # daily: mean of max(0, 0.95 - day) = (0 + 0.15) / 2
    assert coverage_shortfall(m, 0.95, "daily") == pytest.approx(0.075)
    # lcb: 0.90 less sd([1.0, 0.8], ddof=1) / sqrt(2) = 0.1414 / 1.414 = 0.1, so 0.95 - 0.80
    assert coverage_shortfall(m, 0.95, "lcb") == pytest.approx(0.15)
    # one day only: no spread to estimate, the window's shortfall
    assert coverage_shortfall(metrics(coverage=0.90, daily=[0.9]), 0.95, "lcb") == pytest.approx(0.05)
    with pytest.raises(ValueError, match="unknown coverage objective"):
        coverage_shortfall(m, 0.95, "median")


def test_objective_is_cost_plus_the_penalised_shortfall_in_usd():
    # 100 USD + 0.5 x 100 x 0.05 shortfall x 200 USD reference = 100 + 500
    assert objective_value(metrics(cost=100.0, coverage=0.90), 0.95, 200.0, 0.5) == pytest.approx(600.0)
    assert objective_value(metrics(cost=100.0, coverage=0.99), 0.95, 200.0, 0.5) == pytest.approx(100.0)


def test_daily_regret_score_is_the_q75_of_cost_over_limit_on_days_with_a_limit():
    m = metrics(cost=20.0, coverage=1.0, daily_cost=[2.0, 4.0, 6.0, 8.0])
    # days with a positive limit: ratios 2/1, 4/1, 6/2 -> q75 of [2, 3, 4] (linear) = 3.5; the 4th day has no limit
    assert daily_regret_score(m, [1.0, 1.0, 2.0, 0.0], 0.95, 10.0, 4.0, 0.5) == pytest.approx(3.5)
    # a shortfall adds penalty x 100 x shortfall x reference / limit: 0.5 x 100 x 0.05 x 10 / 4 = 6.25
    short = m.model_copy(update={"coverage": 0.90})
    assert daily_regret_score(short, [1.0, 1.0, 2.0, 0.0], 0.95, 10.0, 4.0, 0.5) == pytest.approx(3.5 + 6.25)
    # no day with a limit: the objective in units of the reference cost, (20 + 0) / 10
    assert daily_regret_score(m, [0.0] * 4, 0.95, 10.0, 4.0, 0.5) == pytest.approx(2.0)


def _space(grid: list[float], safety=lambda p: ()) -> Space:
    return Space([Real(0.0, 10.0, name="h")], lambda v: dict(v), safety=safety, grid={"h": grid})


def test_pick_best_breaks_ties_by_coverage_then_cost_then_safety():
    space = _space([1.0], safety=lambda p: (p["h"],))
    pts = {(1.0,): (5.0, metrics(cost=5.0, coverage=0.96), {"h": 1.0}),
           (2.0,): (5.0, metrics(cost=5.0, coverage=0.99), {"h": 2.0}),
           (3.0,): (9.0, metrics(cost=9.0, coverage=1.00), {"h": 3.0})}
    assert pick_best(pts, space) == ((2.0,), 2)  # two tied at 5.0: the higher coverage
    pts[(2.0,)] = (5.0, metrics(cost=6.0, coverage=0.96), {"h": 2.0})
    assert pick_best(pts, space)[0] == (1.0,)  # same coverage: the lower cost
    pts[(2.0,)] = (5.0, metrics(cost=5.0, coverage=0.96), {"h": 2.0})
    assert pick_best(pts, space)[0] == (2.0,)  # all equal: the safer (larger h)


def test_grid_scan_prefers_a_flat_region_to_a_narrow_dip():
    cost = {0.8: 10.0, 0.9: 1.0, 1.0: 10.0, 1.1: 3.0, 1.2: 3.0}  # a dip at 0.9 between dear neighbours
    seen = []

    def evaluate(p):
        seen.append(p["h"])
        return metrics(cost=cost[round(p["h"], 9)])

    res, x = grid_scan(evaluate, _space(list(cost)), 0.95, 1.0)
    # worst of each point and its neighbours: 10, 10, 10, 10, 3 -> 1.2 wins, its own objective 3
    assert x == [1.2] and res.best_params == {"h": 1.2}
    assert res.best_objective == 3.0 and res.robust_objective == 3.0
    assert sorted(seen) == sorted(cost)  # each grid point replayed once


def test_grid_scan_ties_on_the_robust_score_go_to_the_lower_own_objective():
    cost = {1.0: 5.0, 2.0: 4.0, 3.0: 5.0}  # every point's worst-of-neighbours is 5
    res, x = grid_scan(lambda p: metrics(cost=cost[round(p["h"], 9)]), _space(list(cost)), 0.95, 1.0)
    assert x == [2.0] and res.best_objective == 4.0 and res.robust_objective == 5.0


def test_an_empty_grid_has_no_best_policy():
    space = Space([Real(0.0, 1.0, name="h")], lambda v: dict(v), grid={"h": []})
    space.grid_points = lambda: []
    res, x = grid_scan(lambda p: metrics(), space, 0.95, 1.0)
    assert res.best_params is None and x == [] and res.best_objective == math.inf


def test_training_space_points_clip_into_the_bounds_and_index_ordered_labels():
    space = training_space({"headroom": (0.9, 1.1), "quantile": ["p99", "p50", "p90"]})
    assert space.labels["quantile"] == ["p50", "p90", "p99"]  # ordered, whatever the config's order
    x = space.to_point({**space.anchors[0], "headroom": 3.0, "quantile": "p99"})
    p = space.to_params(x)
    assert p.headroom == 1.1 and p.quantile == "p99" and x[space.names.index("quantile")] == 2
    pts = space.grid_points()
    assert len(pts) == len({tuple(x) for x in pts})  # no duplicates
    assert all(0.9 <= space.to_params(x).headroom <= 1.1 for x in pts)
    # a top-up without a forecast quantile is scanned only at topup_headroom 1.0
    assert all(space.to_params(x).topup_headroom == 1.0 for x in pts
               if space.to_params(x).topup_quantile in ("none", "c80", "c90", "c95"))


class _P(dict):
    def model_dump(self):
        return dict(self)


def test_run_search_is_seeded_and_starts_from_the_given_point():
    space = Space([Real(0.0, 4.0, name="h")], lambda v: _P(v))
    evaluate = lambda p: metrics(cost=(p["h"] - 3.0) ** 2 + 1.0)  # noqa: E731  minimum 1 USD at h = 3
    a = run_search(evaluate, space, 12, 7, 0.95, 1.0, start=[[2.5]])
    b = run_search(evaluate, space, 12, 7, 0.95, 1.0, start=[[2.5]])
    assert a.trials[0]["params"] == {"h": 2.5}  # the start is replayed first, within the budget
    assert len(a.trials) == 12
    assert [t["params"] for t in a.trials] == [t["params"] for t in b.trials]  # same seed, same trials
    assert a.best_objective <= 1.25 and abs(a.best_params["h"] - 3.0) <= 0.5
    assert a.best_objective == min(t["objective"] for t in a.trials)
    assert np.isfinite([t["seconds"] for t in a.trials]).all()
