"""The committed layer (optimizer.training.committed): reservation levels in the scan when the price book caps
spot or makes a reservation cheaper than spot, and none with the default book."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optimizer.book.prices import GpuPrice, default_price_book
from optimizer.book.purchase import refused_gpus, reserved_level
from optimizer.engine.replay import replay_training
from optimizer.exporters.dispatcher_policy import mix_comment
from optimizer.plan.capacity import capacity_plan
from optimizer.plan.policy import Metrics, SeriesPlan, TrainingParams
from optimizer.search.settings import SearchSettings
from optimizer.search.space import TRAINING_GRID, training_space
from optimizer.search.tuning import PolicyReplay, SearchTask, search_one
from optimizer.training.committed import CAP_LEVELS, RATIO_LEVELS, committed_note
from tests.optimizer.engine.test_replay import _flat
from tests.optimizer.engine.test_replay import inp as replay_inp

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)
HALF = PRICE.model_copy(update={"spot_cap_share": 0.5})


def test_the_default_book_leaves_the_scan_as_it_was():
    plain = training_space()
    for price in [*default_price_book().values(), PRICE, PRICE.model_copy(update={"reserved_min_term_days": 30})]:
        s = training_space(None, price)
        assert s.grid == plain.grid == TRAINING_GRID and s.fixed == plain.fixed == {}
        assert s.grid_points() == plain.grid_points()
        assert [d.name for d in s.dims] == [d.name for d in plain.dims]


def test_a_capped_book_adds_reservation_levels_in_gpus_the_cap_refuses():
    s = training_space(None, HALF)
    assert s.grid["reservation_ratio"] == CAP_LEVELS and s.fixed == {"reservation_basis": "spot_cap"}
    assert len(s.grid_points()) == len(CAP_LEVELS) * len(training_space().grid_points())
    assert all(s.to_params(x).reservation_basis == "spot_cap" for x in s.grid_points()[:5])
    # a reservation cheaper than spot with its interruptions: ratios of the weekly level instead
    cheap = training_space(None, GpuPrice(on_demand=1.0, reserved=0.3, spot=0.4))
    assert cheap.grid["reservation_ratio"] == RATIO_LEVELS and cheap.fixed == {"reservation_basis": "forecast"}
    # the configured bounds hold: a ratio range of [0, 0.8] drops the levels above it
    assert max(training_space({"reservation_ratio": (0.0, 0.8)}, HALF).grid["reservation_ratio"]) <= 0.8


def test_refused_gpus_follow_the_cap_in_gpus_not_a_ratio():
    assert refused_gpus(40.0, HALF) == 20.0 and refused_gpus(41.0, HALF) == 21.0  # 41 - floor(20.5)
    by_count = PRICE.model_copy(update={"spot_cap_gpus": 30.0})
    assert refused_gpus(40.0, by_count) == 10.0 and refused_gpus(400.0, by_count) == 370.0
    assert refused_gpus(20.0, by_count) == 0.0 and refused_gpus(40.0, PRICE) == 0.0
    both = by_count.model_copy(update={"spot_cap_share": 0.5})
    assert list(refused_gpus(np.array([40.0, 100.0]), both)) == [20.0, 70.0]
    assert reserved_level(0.5, "spot_cap", 40.0, by_count) == 5 and reserved_level(0.5, "forecast", 40.0, None) == 20
    with pytest.raises(ValueError, match="spot_cap"):
        reserved_level(1.0, "spot_cap", 40.0, None)


def _pool(price, level=40.0):
    n = 7 * 288  # a week of 5-minute steps
    tune = _flat(replay_inp(np.full(n, level)), level, level, np.full(n, level))
    evalw = _flat(replay_inp(np.full(n, level), start="2024-01-08"), level, level, np.full(n, level))
    tune.price = evalw.price = price
    return tune, evalw


def test_a_capped_book_reserves_what_the_cap_refuses_and_it_beats_the_on_demand_fallback():
    tune, evalw = _pool(HALF)
    settings = SearchSettings(n_calls=4, random_search=False, interruption_rate=0.0)  # the limit has none either
    oc = search_one(SearchTask("train/flat", "training", tune, evalw, settings, 0, []))
    p = TrainingParams(**oc.params)
    assert p.reservation_basis == "spot_cap" and p.reservation_ratio > 0
    assert oc.recommended_policy == "searched" and oc.recommended.mix["reserved"]["gpu_hours"] > 0
    # the same policy without its reservation buys the GPUs the cap refuses on demand
    fallback, _ = replay_training(evalw, p.model_copy(update={"reservation_ratio": 0.0}), settings.interruption_rate,
                                  settings.recovery_s)
    assert fallback.spot_refused_gpu_hours > 0
    assert oc.recommended.cost_usd < fallback.cost_usd
    assert oc.recommended.cost_usd / oc.oracle.cost_usd < 1.05  # a flat pool: close to the limit under the same cap
    note = next(x for x in oc.notes if "are reserved" in x)
    assert "caps spot at 50%" in note and "reserved_min_term_days" in note
    # the exported plan reserves the same GPUs as the replay
    f = pd.DataFrame({"series_id": "train/flat", "issued_at": pd.Timestamp("2024-01-08", tz="UTC"),
                      "timestamp": pd.date_range("2024-01-08", periods=7 * 24, freq="1h", tz="UTC"),
                      **{q: 40.0 for q in ("p50", "p90", "p95", "p99")}})
    plan = capacity_plan("training", oc.params, f, f, spot_share=0.5, price=HALF)
    assert plan["reserved_gpus"] == reserved_level(p.reservation_ratio, "spot_cap", 40.0, HALF) > 0
    # a plan that asks for more spot than the cap sells plans the rest on demand, as the replay buys it
    unreserved = {**oc.params, "reservation_ratio": 0.0}
    asked = capacity_plan("training", unreserved, f, f, spot_share=0.5, price=PRICE)
    sold = capacity_plan("training", unreserved, f, f, spot_share=0.5, price=HALF)
    assert asked["spot_gpus"] > 20 and sold["spot_gpus"] == 20
    assert sold["spot_gpus"] + sold["on_demand_gpus"] == asked["spot_gpus"] + asked["on_demand_gpus"]


def test_an_uncapped_book_plans_the_same_pool_all_on_spot():
    tune, evalw = _pool(PRICE)
    oc = search_one(SearchTask("train/flat", "training", tune, evalw, SearchSettings(n_calls=4, random_search=False),
                               0, []))
    assert oc.params["reservation_ratio"] == 0.0 and oc.params["reservation_basis"] == "forecast"
    assert oc.recommended.mix["reserved"]["gpu_hours"] == 0.0
    assert not any("are reserved" in x for x in oc.notes)
    assert PolicyReplay("training", SearchSettings()).space(tune).grid == TRAINING_GRID


def test_the_note_names_a_term_longer_than_the_weekly_forecast():
    mix = {"reserved": {"gpu_hours": 10.0}, "spot": {"gpu_hours": 10.0}, "on_demand": {"gpu_hours": 0.0}}
    long = HALF.model_copy(update={"reserved_min_term_days": 30})
    note = committed_note(mix, long, {"reservation_basis": "spot_cap", "reservation_ratio": 1.0}, 0.01, 1800)
    assert note.startswith("purchase: 50% of the GPU-hours bought are reserved") and "30 days" in note
    assert "rest of the term" in note
    assert committed_note({**mix, "reserved": {"gpu_hours": 0.0}}, HALF, {}, 0.01, 1800) is None


def test_policy_yaml_says_a_reserving_pool_commits_for_the_minimum_term():
    mix = {"reserved": {"gpu_hours": 20.0, "cost_usd": 12.0}, "spot": {"gpu_hours": 20.0, "cost_usd": 8.0},
           "on_demand": {"gpu_hours": 0.0, "cost_usd": 0.0}}
    m = Metrics(cost_usd=20.0, coverage=1.0, idle_ratio=0.0, unmet=0.0, mix=mix, spot_refused_gpu_hours=0.0)
    plan = SeriesPlan(series_id="train/pool", kind="training", unit="gpu",
                      params={"reservation_ratio": 1.0, "reservation_basis": "spot_cap"},
                      plan={"reserved_gpus": 20, "on_demand_gpus": 0, "spot_gpus": 20, "capability_gpus": 40,
                            "valid_from": "2026-11-29T14:00:00+00:00"},
                      recommended=m, baseline=m, forecast_version="v1")
    line = mix_comment(plan)
    assert "reserved 50 %" in line and "reserved_min_term_days" in line and "planned 100 % on spot" not in line
    spot_only = {**mix, "reserved": {"gpu_hours": 0.0, "cost_usd": 0.0}}
    assert "reserved_min_term_days" not in mix_comment(plan.model_copy(update={
        "recommended": m.model_copy(update={"mix": spot_only})}))
