"""Intermittent tuning windows (optimizer.training.intermittent) and the scan's tie order
(optimizer.search.policy_search.grid_scan)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skopt.space import Categorical, Real

from optimizer.plan.policy import Metrics
from optimizer.search.policy_search import grid_scan
from optimizer.search.settings import SearchSettings
from optimizer.search.space import Space
from optimizer.search.tuning import SearchTask, search_one
from optimizer.training.intermittent import ADI_CUTOFF, average_demand_interval, intermittent_space, is_intermittent
from tests.optimizer.engine.test_replay import _flat, inp


def test_average_demand_interval_classifies_by_the_syntetos_boylan_cutoff():
    assert average_demand_interval([0, 0, 3, 0]) == 4.0
    assert average_demand_interval([1, 2, np.nan, 3]) == 1.0  # unknown steps are left out
    assert math.isinf(average_demand_interval(np.zeros(10)))
    assert math.isnan(average_demand_interval([np.nan, np.nan]))
    assert is_intermittent(np.zeros(10)) and not is_intermittent([np.nan]) and not is_intermittent([])
    # 3 steps with demand in 4 (ADI 1.33) is intermittent; 4 in 5 (ADI 1.25) is not
    assert is_intermittent([1, 1, 1, 0]) and not is_intermittent([1, 1, 1, 1, 0])
    assert ADI_CUTOFF == 1.32


def test_intermittent_space_drops_only_the_no_topup_choice():
    sparse = np.r_[np.zeros(100), [2.0]]
    space, note = intermittent_space("training", {}, sparse)
    assert space.labels["topup_quantile"][0] != "none" and "p90" in space.labels["topup_quantile"]
    assert "intermittent" in note and "101.00" in note
    assert space.anchor_points()  # the anchors all have a top-up, so they stay
    # the user's bounds are kept, less "none"
    space, _ = intermittent_space("training", {"topup_quantile": ["none", "c90"], "headroom": (0.9, 1.1)}, sparse)
    assert space.labels["topup_quantile"] == ["c90"]
    assert all(space.to_params(x).topup_quantile == "c90" for x in space.grid_points())
    # nothing to narrow: bounds with no top-up but none, a smooth window, an inference service
    assert intermittent_space("training", {"topup_quantile": ["none"]}, sparse) == (None, None)
    assert intermittent_space("training", {}, np.full(100, 3.0)) == (None, None)
    assert intermittent_space("inference", {}, sparse) == (None, None)


def test_search_on_an_intermittent_window_keeps_an_hourly_topup_and_says_so():
    n = 2016  # a week of 5-minute steps; demand in two hours only
    d = np.zeros(n)
    d[600:612] = 2.0
    d[1500:1512] = 1.0
    tune = _flat(inp(d), 0.0, 0.0, np.zeros(n))
    evalw = _flat(inp(np.r_[np.zeros(1000), np.full(1016, 3.0)], start="2024-01-08"), 0.0, 0.0, np.full(n, 3.0))
    oc = search_one(SearchTask("train/sparse", "training", tune, evalw, SearchSettings(n_calls=4, random_search=False),
                               0, []))
    assert oc.params["topup_quantile"] != "none"
    assert all(t["params"]["topup_quantile"] != "none" for t in oc.trials)  # the refinement too
    assert any(note.startswith("tuning: the tuning window's demand is intermittent") for note in oc.notes)
    # a smooth window searches the whole space and adds no such note
    smooth = _flat(inp(np.full(n, 2.0)), 2.0, 2.0, np.full(n, 2.0))
    oc = search_one(SearchTask("train/smooth", "training", smooth, smooth,
                               SearchSettings(n_calls=4, random_search=False), 0, []))
    assert not any("intermittent" in note for note in oc.notes)


def test_scan_ties_on_the_robust_score_go_to_the_lower_own_objective():
    # "a" is flat (8 USD at every headroom, coverage 1.0); "b" dips to 5 USD at h=1.0 (coverage 0.99, above
    # the target). With its neighbours (8 USD) every point's robust score is 8: a tie, which the point's own
    # objective decides before coverage does
    class P:
        def __init__(self, h, c):
            self.h, self.c = h, c

        def model_dump(self):
            return {"h": self.h, "c": self.c}

    def ev(p):
        if p.c == "a":
            return Metrics(cost_usd=8.0, coverage=1.0, idle_ratio=0.0, unmet=0.0)
        return Metrics(cost_usd=5.0 if abs(p.h - 1.0) < 1e-9 else 8.0, coverage=0.99, idle_ratio=0.0, unmet=0.0)

    space = Space([Real(0.5, 1.5, name="h"), Categorical(["a", "b"], name="c")], lambda v: P(v["h"], v["c"]),
                  grid={"h": [0.8, 0.9, 1.0, 1.1, 1.2], "c": ["a", "b"]})
    scan, x = grid_scan(ev, space, 0.95, 1.0)
    assert x == [1.0, "b"] and scan.best_objective == 5.0 and scan.robust_objective == pytest.approx(8.0)
    assert scan.n_tied == 1
