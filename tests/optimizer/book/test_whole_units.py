"""Whole GPUs from continuous forecast levels (optimizer.book.whole_units) and the rival rule
(optimizer.rivals.judge)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.types import QCOLS
from optimizer.book.prices import GpuPrice
from optimizer.book.whole_units import COUNT_TOLERANCE, count_tolerance, is_count, whole
from optimizer.engine.replay import replay_training
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.capacity import capacity_plan
from optimizer.plan.policy import Metrics, TrainingParams
from optimizer.rivals.judge import Z, rival_margin, rival_wins

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)


def test_whole_reads_a_level_just_above_a_whole_number_as_that_number_for_counts_only():
    assert is_count([0.0, 3.0, np.nan, 12.0]) and not is_count([0.0, 0.5]) and not is_count([np.nan])
    assert count_tolerance([0.0, 2.0]) == COUNT_TOLERANCE and count_tolerance([0.3]) < 1e-6
    assert count_tolerance(None) < 1e-6  # no history: the plain rounding
    tol = count_tolerance([0.0, 2.0])
    assert whole(0.005, tol) == 0 and whole(3.0 + COUNT_TOLERANCE / 2, tol) == 3
    assert whole(3.0 + 2 * COUNT_TOLERANCE, tol) == 4  # well inside (3, 4): still 4
    assert whole(0.005) == 1 and whole(3.0) == 3 and whole(-2.0) == 0  # plain ceil, never below 0
    assert np.array_equal(whole(np.array([0.005, 1.05, 1.5]), tol), [0.0, 1.0, 2.0])


def _idle(before):
    n = 288
    i = ReplayInput(times=pd.date_range("2024-01-01", periods=n, freq="5min", tz="UTC"), demand=np.zeros(n),
                    step_s=300, price=PRICE, history_before=np.asarray(before, float))
    for q in QCOLS:  # an idle pool's forecast: a few thousandths of a GPU
        i.week_mean[q] = np.full(n, 0.005)
        i.day_max[q] = np.full(n, 0.005)
        i.hour_max[q] = np.full(n, 0.005)
    return i


def test_an_idle_pool_of_whole_gpus_holds_no_gpu_for_a_forecast_of_thousandths():
    p = TrainingParams(reservation_ratio=1.0, quantile="p90", headroom=1.0, spot_fraction=1.0, topup_quantile="p90")
    m, s = replay_training(_idle([0.0, 1.0, 0.0]), p, 0.0)
    assert m.cost_usd == 0.0 and s["provisioned"].max() == 0.0
    # a fractional demand metric keeps the plain rounding: the same forecast buys a whole GPU
    m_frac, s_frac = replay_training(_idle([0.0, 0.5, 0.0]), p, 0.0)
    assert s_frac["reserved"][0] == 1.0 and m_frac.cost_usd > 0


def test_the_plan_rounds_like_the_replay():
    issued = pd.Timestamp("2024-01-01 23:55", tz="UTC")
    ts = pd.date_range(issued + pd.Timedelta("5min"), periods=288 * 7, freq="5min", tz="UTC")
    f = pd.DataFrame({"series_id": "s", "tier": "combined", "issued_at": issued, "timestamp": ts,
                      **{q: 0.005 for q in QCOLS}})
    params = {"reservation_ratio": 0.0, "quantile": "p90", "headroom": 1.0, "spot_fraction": 1.0,
              "topup_quantile": "p90"}
    hist = pd.DataFrame({"timestamp": ts - pd.Timedelta("7D"), "value": 0.0})
    plan = capacity_plan("training", params, f, pd.DataFrame(), history=hist)
    assert plan["spot_gpus"] == 0 and plan["on_demand_hourly_gpus"] == 0
    frac = capacity_plan("training", params, f, pd.DataFrame(), history=hist.assign(value=0.5))
    assert frac["spot_gpus"] == 1


def _m(daily):
    return Metrics(cost_usd=float(sum(daily)), coverage=1.0, idle_ratio=0.0, unmet=0.0, scale_events=0,
                   daily_cost_usd=[float(x) for x in daily])


def test_a_rival_cheaper_on_one_day_only_does_not_replace_the_searched_policy():
    searched = _m([0, 0, 0, 3.9, 0, 0, 0])
    rival = _m([0, 0, 0, 0, 0, 0, 0])
    margin = rival_margin(searched, rival)
    assert margin == pytest.approx(Z * 3.9)  # one day's difference: a paired t-statistic of exactly 1
    assert not rival_wins(3.9, 0.0, margin)
    # cheaper on every day by about the same amount: it wins
    steady = _m([10, 11, 9, 10, 12, 10, 11])
    assert rival_wins(steady.cost_usd + 7.0, steady.cost_usd, rival_margin(_m(np.add(steady.daily_cost_usd, 1.0)),
                                                                          steady))
    # no daily costs (an inference replay): the plain comparison
    plain = Metrics(cost_usd=1.0, coverage=1.0, idle_ratio=0.0, unmet=0.0, scale_events=0)
    assert rival_margin(plain, plain) == 0.0 and rival_wins(2.0, 1.0, 0.0) and not rival_wins(1.0, 1.0, 0.0)
