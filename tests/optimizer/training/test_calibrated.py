"""The calibrated hourly top-up (optimizer.training.calibrated): causal, calibrated, with a stated fallback."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optimizer.plan.capacity import capacity_plan
from optimizer.plan.policy import Metrics
from optimizer.search.objective import coverage_shortfall
from optimizer.training.calibrated import LEVELS, MIN_ERRORS, NAMES, calibrated_hour_max

T0 = pd.Timestamp("2024-01-01", tz="UTC")
STEP = pd.Timedelta("5min")


def _setup(days=14, seed=0):
    """Demand of 10 GPUs plus gamma noise (5-minute steps), and flat p50 = 10 / p90 = 14 forecasts
    issued every 4 hours for the next day."""
    n = days * 288
    ts = pd.date_range(T0, periods=n, freq=STEP)
    demand = pd.Series(10.0 + np.random.default_rng(seed).gamma(1.5, 1.5, n).round(), index=ts)
    rows = []
    for issued in pd.date_range(T0 - pd.Timedelta("4h"), ts[-1], freq="4h"):
        t = pd.date_range(issued + STEP, periods=288, freq=STEP)
        rows.append(pd.DataFrame({"issued_at": issued, "timestamp": t, "p50": 10.0, "p90": 14.0, "p95": 15.0,
                                  "p99": 17.0}))
    return demand, pd.concat(rows, ignore_index=True)


def test_levels_are_calibrated_ordered_and_fall_back_to_p90_without_a_day_of_errors():
    demand, fc = _setup()
    start, end = T0 + pd.Timedelta("7D"), demand.index[-1]
    times = demand.index[demand.index >= start]
    lv, margin, n_fb = calibrated_hour_max(fc, demand, times, start, end)
    assert n_fb == 0 and set(lv) == set(NAMES)  # the fixed levels and the adaptive a95 (test_adaptive.py)
    assert np.all(lv["c80"] <= lv["c90"]) and np.all(lv["c90"] <= lv["c95"])
    hour_peak = np.ceil(demand[times].groupby((times - start) // pd.Timedelta("1h")).transform("max").to_numpy())
    for name, a in LEVELS.items():
        covered = (hour_peak <= lv[name] + 1e-9).mean()
        assert a - 0.1 <= covered <= min(1.0, a + 0.08), (name, covered)
    assert np.all(np.isfinite(margin["c90"]))
    # at the very start of the forecasts there are no past errors: the hours use p90 and are counted
    early = demand.index[demand.index < T0 + pd.Timedelta("2D")]
    lv0, m0, fb0 = calibrated_hour_max(fc, demand, early, T0, early[-1])
    assert fb0 >= MIN_ERRORS and np.all(lv0["c90"][:12] == 14.0) and np.isnan(m0["c90"][0])


def test_no_level_uses_demand_observed_after_its_hour_began():
    demand, fc = _setup()
    start, end = T0 + pd.Timedelta("7D"), demand.index[-1]
    times = demand.index[demand.index >= start]
    cut = start + pd.Timedelta("3D")  # an hour boundary
    later = demand.copy()
    later[later.index >= cut] += 50.0
    a, _, _ = calibrated_hour_max(fc, demand, times, start, end)
    b, _, _ = calibrated_hour_max(fc, later, times, start, end)
    before = times < cut + pd.Timedelta("1h")  # the hour starting at the cut is decided before it
    for name in NAMES:
        assert np.array_equal(a[name][before], b[name][before])
        assert not np.array_equal(a[name], b[name])  # and later hours do see the change


def test_plan_adds_the_learnt_margin_to_the_next_hours_p50():
    issued = T0
    f = pd.DataFrame({"issued_at": issued, "timestamp": pd.date_range(issued + STEP, periods=288 * 7, freq=STEP),
                      "p50": 10.0, "p90": 14.0, "p95": 15.0, "p99": 17.0})
    params = {"reservation_ratio": 0.0, "quantile": "p50", "headroom": 0.5, "spot_fraction": 1.0,
              "topup_quantile": "c90", "topup_margin_gpus": 2.5}
    plan = capacity_plan("training", params, f, pd.DataFrame())
    assert plan["spot_gpus"] == 5 and plan["on_demand_hourly_gpus"] == 13 - 5  # ceil(10 + 2.5) - daily
    no_margin = capacity_plan("training", {**params, "topup_margin_gpus": None}, f, pd.DataFrame())
    assert no_margin["on_demand_hourly_gpus"] == 14 - 5  # the stated fallback: the next hour's p90


def test_lcb_objective_charges_a_variable_window_more_than_a_steady_one():
    steady = Metrics(cost_usd=0, coverage=0.96, idle_ratio=0, unmet=0, daily_coverage=[0.96] * 7)
    shaky = Metrics(cost_usd=0, coverage=0.96, idle_ratio=0, unmet=0, daily_coverage=[1, 1, 1, 1, 0.86, 0.9, 0.96])
    assert coverage_shortfall(steady, 0.96, "lcb") == 0.0
    assert coverage_shortfall(shaky, 0.96, "lcb") > 0.01
    assert coverage_shortfall(shaky, 0.96, "window") == 0.0


def test_a_newsvendor_daily_layer_is_planned_at_its_newsvendor_level_not_the_day_max():
    """The manifests must buy what the replay scored: a newsvendor daily rule plans the highest
    hourly maximum that at least spot_share of the next day's hours reach."""
    issued = T0
    ts = pd.date_range(issued + STEP, periods=288 * 7, freq=STEP)
    hour = ((ts - issued) // pd.Timedelta("1h")).to_numpy()
    p50 = np.where(hour % 24 < 6, 20.0, 8.0)  # 6 busy hours a day at 20, the other 18 at 8
    f = pd.DataFrame({"issued_at": issued, "timestamp": ts, "p50": p50, "p90": p50, "p95": p50, "p99": p50})
    base = {"reservation_ratio": 0.0, "quantile": "p50", "headroom": 1.0, "spot_fraction": 1.0}
    assert capacity_plan("training", {**base, "daily_rule": "max"}, f, pd.DataFrame())["spot_gpus"] == 20
    # spot pays for a GPU used in >= 40 % of the hours: the busy level (25 % of hours) does not, 8 does
    assert capacity_plan("training", {**base, "daily_rule": "newsvendor"}, f, pd.DataFrame(),
                         spot_share=0.4)["spot_gpus"] == 8
    assert capacity_plan("training", {**base, "daily_rule": "newsvendor"}, f, pd.DataFrame(),
                         spot_share=0.2)["spot_gpus"] == 20
    with pytest.raises(ValueError, match="spot_share"):
        capacity_plan("training", {**base, "daily_rule": "newsvendor"}, f, pd.DataFrame())
