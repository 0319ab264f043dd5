"""The model-free levels of optimizer.training.empirical: scale-free, no look-ahead, and the same in the replay,
the empirical peer, its exported expression and the plan."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from optimizer.book.prices import GpuPrice
from optimizer.engine.replay import replay_training
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.capacity import capacity_plan
from optimizer.plan.policy import TrainingParams
from optimizer.rivals.expressed import expressed_params, expressible
from optimizer.rivals.peers import EMPIRICAL_PARAMS, PEERS, replay_peers
from optimizer.search.space import training_space
from optimizer.training.empirical import conformal_hour_level, conformal_level, day_level_at, empirical_day_level
from optimizer.training.newsvendor import critical_ratios

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)
DAY = 288  # 5-minute steps


def _demand(days: int, base: float, seed: int) -> np.ndarray:
    """A pool of about ``base`` GPUs with a daily cycle and noise, whole GPUs."""
    t = np.arange(days * DAY)
    rng = np.random.default_rng(seed)
    return np.round(base * (1 + 0.3 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 0.05, len(t)))).clip(0)


def _inp(demand, before) -> ReplayInput:
    times = pd.date_range("2024-01-08", periods=len(demand), freq="300s", tz="UTC")
    return ReplayInput(times=times, demand=np.asarray(demand, float), step_s=300, price=PRICE,
                       history_before=np.asarray(before, float))


def test_the_idle_share_is_the_same_at_10_and_3300_gpus():
    shape = _demand(14, 10.0, 3)
    idle = []
    for scale in (1, 330):  # 10 and 3,300 GPUs: the same demand shape
        d = shape * scale
        m, _ = replay_peers(_inp(d[7 * DAY:], d[:7 * DAY]), "training", interruption_rate=0.0)["empirical"]
        idle.append(m.idle_ratio)
        assert m.coverage > 0.9
    assert idle[0] == pytest.approx(idle[1], abs=0.02)  # a quantile of c x D is c x the quantile of D


def test_a_days_level_does_not_see_demand_after_the_day_starts():
    d = _demand(10, 40.0, 5)
    share = 0.405
    before = empirical_day_level(d, 7 * DAY, 3 * DAY, 300, share)
    changed = d.copy()
    changed[8 * DAY + 1:] += 500  # the second day of the window, after its first step, and later
    after = empirical_day_level(changed, 7 * DAY, 3 * DAY, 300, share)
    assert np.array_equal(before[:2 * DAY], after[:2 * DAY])  # the first two days are decided before it
    assert after[2 * DAY] > before[2 * DAY]  # the third day has seen it
    assert before[0] == day_level_at(d[:7 * DAY], 7 * DAY, 300, share)
    # the hourly level of an hour is decided from the steps before the hour
    times = pd.date_range("2024-01-08", periods=3 * DAY, freq="300s", tz="UTC")
    h0 = conformal_hour_level(d, 7 * DAY, times, 300)
    h1 = conformal_hour_level(changed, 7 * DAY, times, 300)
    assert np.array_equal(h0[:DAY + 12], h1[:DAY + 12]) and h1[DAY + 12] > h0[DAY + 12]


def test_the_daily_level_is_the_newsvendor_level_of_the_last_weeks_hourly_maxima():
    hours = np.repeat(np.arange(168, dtype=float), 12)  # hour k's maximum is k
    share = 0.25
    assert day_level_at(hours, len(hours), 300, share) == 167 - math.ceil(0.25 * 168) + 1


def test_the_peer_is_its_exported_expression_and_a_grid_may_scan_it():
    d = _demand(14, 30.0, 7)
    inp = _inp(d[7 * DAY:], d[:7 * DAY])
    peer, _ = PEERS["empirical"].training(inp, interruption_rate=0.01, seed=2)
    assert expressible("empirical", "training") and not expressible("empirical", "inference")
    ex = TrainingParams(**expressed_params("empirical", "training", {"reservation_ratio": 0.7, "quantile": "p99"}))
    assert (ex.daily_rule, ex.topup_quantile, ex.reservation_ratio) == ("empirical", "n95", 0.0)
    m, _ = replay_training(_inp(d[7 * DAY:], d[:7 * DAY]), ex, interruption_rate=0.01, seed=2)
    assert (m.cost_usd, m.coverage) == (peer.cost_usd, peer.coverage)
    assert not any(p.daily_rule == "empirical" or p.topup_quantile == "n95"  # a peer, not searched by default
                   for p in map(training_space().to_params, training_space().grid_points()))
    sp = training_space({"daily_rule": ["newsvendor", "empirical"], "topup_quantile": ["none", "p90", "n95"]})
    pts = [sp.to_params(x) for x in sp.grid_points()]
    emp = [p for p in pts if p.daily_rule == "empirical"]
    assert emp and all(p.headroom == 1.0 and p.quantile == "p50" for p in emp)  # it reads no quantile
    assert any(p.daily_rule == "empirical" and p.topup_quantile == "n95" for p in pts)


def test_the_plan_buys_the_levels_the_replay_would_for_the_next_day():
    d = _demand(8, 30.0, 9)
    ts = pd.date_range("2024-01-01", periods=len(d), freq="300s", tz="UTC")
    hist = pd.DataFrame({"timestamp": ts, "value": d})
    issued = ts[-1]
    fut = pd.date_range(issued + pd.Timedelta("5min"), periods=DAY, freq="300s", tz="UTC")
    final = pd.DataFrame({"issued_at": issued, "timestamp": fut, **{q: 20.0 for q in ("p50", "p90", "p95", "p99")}})
    share = critical_ratios(PRICE)["spot"]
    plan = capacity_plan("training", {**EMPIRICAL_PARAMS, "quantile": "p90"}, final, pd.DataFrame(),
                         history=hist, spot_share=share, price=PRICE)
    spot = math.ceil(day_level_at(d, len(d), 300, share) - 0.1)
    assert plan["spot_gpus"] == spot and plan["reserved_gpus"] == 0 and plan["on_demand_gpus"] == 0
    hourly = math.ceil(conformal_level(d, 300, np.array([len(d) - 1]))[0] - 0.1)
    assert plan["on_demand_hourly_gpus"] == max(hourly - spot, 0)
    with pytest.raises(ValueError, match="spot_share"):
        capacity_plan("training", {**EMPIRICAL_PARAMS, "quantile": "p90"}, final, pd.DataFrame(), history=hist)
