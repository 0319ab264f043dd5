"""The purchase book's limits in the replay (optimizer.purchase) and the mix in the exports."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from optimizer.exporters import write_all
from optimizer.exporters.dispatcher_policy import read_policy
from optimizer.exporters.validate import validate_dir
from optimizer.layers import critical_ratios
from optimizer.policy import Metrics, SeriesPlan
from optimizer.prices import GpuPrice
from optimizer.purchase import held_reservation, mix_note, purchase_mix, quota_need, sellable_layers, within_quota
from optimizer.replay import ReplayInput, account_training
from optimizer.search_settings import SearchSettings
from optimizer.tuning import SearchTask, search_one
from tests.optimizer.test_replay import _flat
from tests.optimizer.test_replay import inp as replay_inp

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)


def inp(demand, price=PRICE):
    times = pd.date_range("2024-01-01", periods=len(demand), freq="5min", tz="UTC")
    return ReplayInput(times=times, demand=np.asarray(demand, float), step_s=300, price=price)


def test_reservation_is_held_for_its_minimum_term():
    day = 288  # 5-minute steps
    r = np.concatenate([np.full(7 * day, 10.0), np.full(7 * day, 4.0)])
    # a weekly level with a 7-day term: each week's commitment ends when the next begins
    assert np.array_equal(held_reservation(r, 300, 7.0), r)
    # with a 10-day term the first week's 10 GPUs run 3 days into the second week
    held = held_reservation(r, 300, 10.0)
    assert (held[: 10 * day] == 10.0).all() and (held[10 * day:] == 4.0).all()
    # a rise within the term commits only the difference, which runs its own term: the first
    # 2 GPUs end after day 2, the 3 added on day 2 after day 3
    up = np.concatenate([np.full(day, 2.0), np.full(day, 5.0), np.zeros(3 * day)])
    h = held_reservation(up, 300, 2.0)
    assert (h[: day] == 2.0).all() and (h[day: 2 * day] == 5.0).all()
    assert (h[2 * day: 3 * day] == 3.0).all() and (h[3 * day:] == 0.0).all()


def test_spot_above_the_cap_is_bought_on_demand():
    n = 4
    r, od, sp, hourly = np.full(n, 2.0), np.full(n, 1.0), np.full(n, 7.0), np.zeros(n)
    capped = PRICE.model_copy(update={"spot_cap_gpus": 5.0})
    r2, od2, sp2, refused = sellable_layers(capped, 300, r, od, sp, hourly)
    assert (sp2 == 5.0).all() and (refused == 2.0).all() and (od2 == 3.0).all()
    assert np.allclose(r2 + od2 + sp2, r + od + sp)  # the same GPUs, bought differently
    share = PRICE.model_copy(update={"spot_cap_share": 0.5})
    _, od3, sp3, refused3 = sellable_layers(share, 300, r, od, sp, hourly)
    assert (sp3 == 5.0).all() and (refused3 == 2.0).all()  # floor(0.5 x 10 GPUs)
    _, _, sp4, refused4 = sellable_layers(PRICE, 300, r, od, sp, hourly)
    assert (sp4 == sp).all() and not refused4.any()


def test_capped_spot_costs_on_demand_and_the_mix_adds_up_to_the_cost():
    d = [10.0] * 12  # one hour
    r, od, sp = np.zeros(12), np.zeros(12), np.full(12, 10.0)
    free, _ = account_training(inp(d), r, od, sp, interruption_rate=0.0)
    capped, s = account_training(inp(d, PRICE.model_copy(update={"spot_cap_gpus": 4.0})), r, od, sp,
                                 interruption_rate=0.0)
    assert free.cost_usd == pytest.approx(10 * 0.4)
    assert capped.cost_usd == pytest.approx(4 * 0.4 + 6 * 1.0) and capped.coverage == 1.0
    mix = capped.mix
    assert mix["spot_gpu_hours"] == pytest.approx(4.0) and mix["on_demand_gpu_hours"] == pytest.approx(6.0)
    assert mix["spot_refused_gpu_hours"] == pytest.approx(6.0) and mix["spot_share"] == pytest.approx(0.4)
    assert mix["reserved_usd"] + mix["spot_usd"] + mix["on_demand_usd"] == pytest.approx(capped.cost_usd)
    assert purchase_mix(s, capped_price := PRICE, 300)["spot_usd"] == pytest.approx(4 * capped_price.spot)


def test_a_gpu_models_own_interruption_terms_win():
    p = PRICE.model_copy(update={"interruption_rate": 0.0})
    assert critical_ratios(p, interruption_rate=0.5, recovery_s=3600)["spot"] == pytest.approx(0.4)
    assert critical_ratios(PRICE, interruption_rate=0.5, recovery_s=3600)["spot"] == pytest.approx(0.9)
    d = [10.0] * 120
    sp = np.full(120, 10.0)
    z = np.zeros(120)
    lossy, _ = account_training(inp(d), z, z, sp, interruption_rate=5.0, recovery_s=1800)
    none, _ = account_training(inp(d, p), z, z, sp, interruption_rate=5.0, recovery_s=1800)
    assert lossy.coverage < 1.0 and none.coverage == 1.0


def test_policy_yaml_carries_the_mix_and_validates(tmp_path):
    mix = {"reserved_gpu_hours": 0.0, "reserved_usd": 0.0, "spot_gpu_hours": 4.0, "spot_usd": 1.6,
           "on_demand_gpu_hours": 6.0, "on_demand_usd": 6.0, "spot_share": 0.4, "spot_refused_gpu_hours": 6.0}
    m = Metrics(cost_usd=7.6, coverage=1.0, idle_ratio=0.0, unmet=0.0, mix=mix)
    plan = SeriesPlan(series_id="train/pool", kind="training", unit="gpu", params={"reservation_ratio": 0.0},
                      plan={"reserved_gpus": 0, "on_demand_gpus": 6, "spot_gpus": 4, "capability_gpus": 10,
                            "valid_from": "2026-11-29T14:00:00+00:00"},
                      recommended=m, baseline=m.model_copy(update={"mix": None}), forecast_version="v1")
    write_all([plan], tmp_path)
    assert not validate_dir(tmp_path)
    text = (tmp_path / "policy.yaml").read_text()
    assert "spotRefusedGpuHours: 6" in text and "onDemandUsd: 6" in text
    back = read_policy(tmp_path / "policy.yaml")[0]
    assert back.recommended.mix == mix and back.baseline.mix is None


def test_an_uncapped_spot_plan_says_so_and_a_capped_one_does_not():
    mix = {"reserved_gpu_hours": 0.0, "spot_gpu_hours": 90.0, "on_demand_gpu_hours": 10.0, "spot_share": 0.9}
    note = mix_note(mix, PRICE)
    assert note is not None and "90%" in note and "spot_cap_share" in note
    assert mix_note(mix, PRICE.model_copy(update={"spot_cap_share": 0.5})) is None
    assert mix_note({**mix, "spot_share": 0.0}, PRICE) is None and mix_note(None, PRICE) is None


def test_the_quota_caps_the_flexible_layers_first():
    n = 3
    r, od, sp, hr = np.full(n, 4.0), np.full(n, 3.0), np.full(n, 2.0), np.full(n, 2.0)
    r2, od2, sp2, hr2 = within_quota(6.0, r, od, sp, hr)  # 11 asked, 5 cut: the top-up, then 3 of on-demand
    assert (hr2 == 0).all() and (od2 == 0).all() and (sp2 == 2.0).all() and (r2 == 4.0).all()
    assert all(np.array_equal(a, b) for a, b in zip(within_quota(None, r, od, sp, hr), (r, od, sp, hr)))
    m, s = account_training(inp([10.0] * 12, PRICE), np.zeros(12), np.zeros(12), np.full(12, 10.0),
                            interruption_rate=0.0)
    assert quota_need(None, s) is None and quota_need(12, s) is None and quota_need(8, s) == 10
    capped_inp = inp([10.0] * 12)
    capped_inp.quota = 8.0
    c, cs = account_training(capped_inp, np.zeros(12), np.zeros(12), np.full(12, 10.0), interruption_rate=0.0)
    assert cs["provisioned"].max() == 8.0 and c.coverage == 0.0 and c.cost_usd == pytest.approx(8 * 0.4)
    assert quota_need(8.0, cs) == 10


def test_a_plan_above_its_quota_reports_both_figures_and_the_quota_to_ask_for():
    n = 2016  # a week of 5-minute steps at 6 GPUs, a pool whose quota is 4
    tune = _flat(replay_inp(np.full(n, 6.0)), 6.0, 6.0, np.full(n, 6.0))
    evalw = _flat(replay_inp(np.full(n, 6.0), start="2024-01-08"), 6.0, 6.0, np.full(n, 6.0))
    tune.quota = evalw.quota = 4.0
    oc = search_one(SearchTask("train/q", "training", tune, evalw, SearchSettings(n_calls=4, random_search=False),
                               0, []))
    assert oc.uncapped is not None and oc.uncapped.coverage > oc.recommended.coverage
    assert oc.replay["provisioned_recommended"].max() <= 4.0
    note = next(x for x in oc.notes if x.startswith("quota:"))
    need = int(note.split("raise the quota to ")[1].split(".")[0])
    assert need >= 6 and f"{oc.uncapped.cost_usd:,.2f}" in note
    free = search_one(SearchTask("train/q", "training", dataclasses.replace(tune, quota=None),
                                 dataclasses.replace(evalw, quota=None),
                                 SearchSettings(n_calls=4, random_search=False), 0, []))
    assert free.uncapped is None and not any(x.startswith("quota:") for x in free.notes)


def test_the_limit_honours_the_spot_cap_and_the_quota():
    from optimizer.oracle import training_oracle

    d = [10.0] * 288  # a day
    free = training_oracle(inp(d))
    assert free.cost_usd == pytest.approx(10 * 24 * 0.4)  # all spot
    half = training_oracle(inp(d, PRICE.model_copy(update={"spot_cap_share": 0.5})))
    assert half.layers["spot"] == pytest.approx(5 * 24) and half.cost_usd > free.cost_usd
    gpus = training_oracle(inp(d, PRICE.model_copy(update={"spot_cap_gpus": 3.0})))
    assert gpus.layers["spot"] == pytest.approx(3 * 24)
    q = inp(d)
    q.quota = 6.0
    assert training_oracle(q).cost_usd == pytest.approx(6 * 24 * 0.4)
