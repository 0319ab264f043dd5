"""The capacity hindsight bound (benchmarks.policy_hindsight): a diagnostic, chosen on the window it scores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.policy_hindsight import LOOKAHEAD_HINDSIGHT, hindsight_best, hindsight_points
from optimizer.book.prices import GpuPrice
from optimizer.engine.replay_core import ReplayInput
from optimizer.rivals.peers import replay_peers
from optimizer.search.settings import SearchSettings
from optimizer.search.tuning import PolicyReplay

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)


def window(demand, before, start="2024-01-01"):
    times = pd.date_range(start, periods=len(demand), freq="60s", tz="UTC")
    return ReplayInput(times=times, demand=np.asarray(demand, float), step_s=60, price=PRICE,
                       history_before=np.asarray(before, float))


def short_series():
    """A 1-minute service split like a one-hour trace: 60 minutes of history, 20-minute tuning and
    evaluation windows (shorter than a day, where the search tries the HPA family only)."""
    rng = np.random.default_rng(3)
    d = np.round(8 + 3 * np.sin(np.arange(100) / 6.0) + rng.normal(0, 1, 100)).clip(1)
    return window(d[60:80], d[:60]), window(d[80:], d[:80], "2024-01-01 01:20")


def test_both_inference_families_even_on_a_short_tuning_window():
    tune, _ = short_series()
    pts = hindsight_points(PolicyReplay("inference", SearchSettings()), tune)
    look = [p for p in pts if p.family == "lookahead"]
    assert {p.family for p in pts} == {"hpa", "lookahead"}
    assert {p.level_window_s for p in look} == set(LOOKAHEAD_HINDSIGHT["level_window_s"])
    assert {p.target_utilization for p in look} == {0.95, 1.0}


@pytest.mark.slow
def test_the_bound_is_the_cheapest_covering_policy_of_each_family_and_lists_the_peers():
    tune, ev = short_series()
    pr = PolicyReplay("inference", SearchSettings())
    best = hindsight_best(pr, tune, ev, 0.95)
    assert set(best) == {"hpa", "lookahead", "reactive", "naive_conformal"}
    limit = pr.oracle(ev).cost_usd
    for name, (m, _) in replay_peers(ev, "inference").items():  # a peer is a family of one
        assert best[name].n_points == 1
        if m.coverage >= 0.95:
            assert best[name].regret == m.cost_usd / limit
        else:
            assert best[name].metrics is None and np.isnan(best[name].regret)
    b = best["lookahead"]
    assert b.metrics.coverage >= 0.95 and b.regret == b.metrics.cost_usd / limit
    # no policy of the family that covers as much is cheaper
    for p in hindsight_points(pr, tune)[::7]:
        if p.family == "lookahead":
            m = pr.replay(p, ev)[0]
            assert m.coverage < 0.95 or m.cost_usd >= b.metrics.cost_usd - 1e-9
    # a policy covering every step never costs less than the perfect-foresight limit
    cover_all = hindsight_best(pr, tune, ev, 1.0)
    assert all(x.regret >= 1 - 1e-9 for x in cover_all.values() if x.metrics is not None)
