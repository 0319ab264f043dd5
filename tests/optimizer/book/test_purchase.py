"""The purchase book's limits in the replay and the limit (optimizer.book.purchase), the mix in the
report's summary and in policy.yaml, and the quota check of a recommendation (optimizer.book.purchase_check)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from capplan.report.summary import fleet_summary, quota_note, summary_lines
from optimizer.book.prices import GpuPrice, default_price_book
from optimizer.book.purchase import held_reservation, mix_note, mix_total, sellable_layers, spot_share, within_quota
from optimizer.book.purchase_check import quota_check
from optimizer.engine.replay import account_training, replay_training
from optimizer.engine.replay_core import ReplayInput
from optimizer.exporters import write_all
from optimizer.exporters.checks.validate import validate_dir
from optimizer.exporters.dispatcher_policy import read_policy
from optimizer.plan.policy import Metrics, SeriesPlan, TrainingParams
from optimizer.rivals.perfect_foresight import training_oracle
from optimizer.search.settings import SearchSettings
from optimizer.search.tuning import SearchTask, search_one
from optimizer.training.newsvendor import critical_ratios
from tests.optimizer.engine.test_replay import _flat
from tests.optimizer.engine.test_replay import inp as replay_inp

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)


def inp(demand, price=PRICE):
    times = pd.date_range("2024-01-01", periods=len(demand), freq="5min", tz="UTC")
    return ReplayInput(times=times, demand=np.asarray(demand, float), step_s=300, price=price)


def test_reservation_is_held_for_its_minimum_term():
    day = 288  # 5-minute steps
    r = np.concatenate([np.full(7 * day, 10.0), np.full(7 * day, 4.0)])
    # a weekly level with the default 7-day term: each week's commitment ends when the next begins
    assert np.array_equal(held_reservation(r, 300, 7.0), r)
    # with a 10-day term the first week's 10 GPUs run 3 days into the second week
    held = held_reservation(r, 300, 10.0)
    assert (held[: 10 * day] == 10.0).all() and (held[10 * day:] == 4.0).all()
    # a rise within the term commits only the difference, which runs its own term
    up = np.concatenate([np.full(day, 2.0), np.full(day, 5.0), np.zeros(3 * day)])
    h = held_reservation(up, 300, 2.0)
    assert (h[: day] == 2.0).all() and (h[day: 2 * day] == 5.0).all()
    assert (h[2 * day: 3 * day] == 3.0).all() and (h[3 * day:] == 0.0).all()


def test_spot_above_the_cap_is_bought_on_demand():
    n = 4
    r, od, sp, hourly = np.full(n, 2.0), np.full(n, 1.0), np.full(n, 7.0), np.zeros(n)
    r2, od2, sp2, refused = sellable_layers(PRICE.model_copy(update={"spot_cap_gpus": 5.0}), 300, r, od, sp, hourly)
    assert (sp2 == 5.0).all() and (refused == 2.0).all() and (od2 == 3.0).all()
    assert np.allclose(r2 + od2 + sp2, r + od + sp)  # the same GPUs, bought differently
    _, _, sp3, refused3 = sellable_layers(PRICE.model_copy(update={"spot_cap_share": 0.5}), 300, r, od, sp, hourly)
    assert (sp3 == 5.0).all() and (refused3 == 2.0).all()  # floor(0.5 x 10 GPUs)
    _, _, sp4, refused4 = sellable_layers(PRICE, 300, r, od, sp, hourly)
    assert (sp4 == sp).all() and not refused4.any()


def test_capped_spot_costs_on_demand_and_the_mix_adds_up_to_the_cost():
    d = [10.0] * 12  # one hour
    r, od, sp = np.zeros(12), np.zeros(12), np.full(12, 10.0)
    free, _ = account_training(inp(d), r, od, sp, interruption_rate=0.0)
    capped, _ = account_training(inp(d, PRICE.model_copy(update={"spot_cap_gpus": 4.0})), r, od, sp,
                                 interruption_rate=0.0)
    assert free.cost_usd == pytest.approx(10 * 0.4) and free.spot_refused_gpu_hours == 0.0
    assert capped.cost_usd == pytest.approx(4 * 0.4 + 6 * 1.0) and capped.coverage == 1.0
    mix = capped.mix
    assert set(mix) == {"reserved", "spot", "on_demand"}
    assert mix["spot"]["gpu_hours"] == pytest.approx(4.0) and mix["on_demand"]["gpu_hours"] == pytest.approx(6.0)
    assert capped.spot_refused_gpu_hours == pytest.approx(6.0) and spot_share(mix) == pytest.approx(0.4)
    assert sum(v["cost_usd"] for v in mix.values()) == pytest.approx(capped.cost_usd)


def test_the_default_book_leaves_a_replay_as_it_was():
    # no spot cap, a 7-day term and the plan's interruption terms: the layers come back as asked
    book = default_price_book()
    assert all(p.spot_cap_gpus is None and p.spot_cap_share is None and p.reserved_min_term_days == 7.0
               and p.interruption_rate is None and p.recovery_s is None for p in book.values())
    n = 2 * 2016  # two weeks
    i = _flat(replay_inp(np.linspace(5, 15, n)), 8, 12, np.full(n, 14.0))
    i.price = book["V100-32GB"]
    m, s = replay_training(i, TrainingParams(reservation_ratio=0.5, spot_fraction=0.5, topup_quantile="p90"))
    step_h = 300 / 3600
    hand = (s["reserved"] * i.price.reserved + (s["on_demand"] + s["on_demand_hourly"]) * i.price.on_demand
            + s["spot"] * i.price.spot).sum() * step_h
    assert m.cost_usd == pytest.approx(hand) and not s["spot_refused"].any()
    assert np.array_equal(s["reserved"], np.full(n, 4.0))


def test_a_gpu_models_own_interruption_terms_win():
    p = PRICE.model_copy(update={"interruption_rate": 0.0})
    assert critical_ratios(p, interruption_rate=0.5, recovery_s=3600)["spot"] == pytest.approx(0.4)
    assert critical_ratios(PRICE, interruption_rate=0.5, recovery_s=3600)["spot"] == pytest.approx(0.9)
    d = [10.0] * 120
    sp, z = np.full(120, 10.0), np.zeros(120)
    lossy, _ = account_training(inp(d), z, z, sp, interruption_rate=5.0, recovery_s=1800)
    none, _ = account_training(inp(d, p), z, z, sp, interruption_rate=5.0, recovery_s=1800)
    assert lossy.coverage < 1.0 and none.coverage == 1.0


def test_an_all_spot_plan_says_so_and_why():
    mix = {"reserved": {"gpu_hours": 0.0, "cost_usd": 0.0}, "spot": {"gpu_hours": 100.0, "cost_usd": 40.0},
           "on_demand": {"gpu_hours": 0.0, "cost_usd": 0.0}}
    note = mix_note(mix, PRICE, 0.0, 0.45, 0.01, 1800)
    assert note is not None and "100%" in note and "spot_cap_share" in note and "0.45" in note
    capped = mix_note(mix, PRICE.model_copy(update={"spot_cap_share": 0.5}), 30.0, 0.45, 0.01, 1800)
    assert "moved 30 GPU-hours on demand" in capped and "spot_cap_share or" not in capped
    none = {**mix, "spot": {"gpu_hours": 0.0, "cost_usd": 0.0}, "on_demand": {"gpu_hours": 5.0, "cost_usd": 5.0}}
    assert mix_note(none, PRICE, 0.0, 0.45, 0.01, 1800) is None and mix_note(None, PRICE, 0.0, 0.45, 0.01, 1800) is None


def test_the_fleet_mix_sums_the_recommended_mixes_and_tolerates_old_runs():
    a = {"reserved": {"gpu_hours": 10.0, "cost_usd": 6.0}, "spot": {"gpu_hours": 30.0, "cost_usd": 12.0},
         "on_demand": {"gpu_hours": 0.0, "cost_usd": 0.0}}
    b = {"reserved": {"gpu_hours": 0.0, "cost_usd": 0.0}, "spot": {"gpu_hours": 0.0, "cost_usd": 0.0},
         "on_demand": {"gpu_hours": 60.0, "cost_usd": 60.0}}
    assert mix_total([a, b, None])["on_demand"] == {"gpu_hours": 60.0, "cost_usd": 60.0}
    assert mix_total([None]) is None
    m = {"cost_usd": 1.0, "coverage": 1.0}
    rep = {"run": {"coverage_target": 0.95}, "series": {
        "train/a": {"recommended": {**m, "mix": a}, "baseline": m,
                    "quota": {"quota_gpus": 8, "need_gpus": 12, "capped": {**m, "coverage": 0.5, "cost_usd": 0.5}}},
        "train/b": {"recommended": {**m, "mix": b}, "baseline": m}}}
    s = fleet_summary(rep)
    assert s.mix["spot"]["gpu_hours"] == 30.0 and s.mix_series == 2
    assert "capped" not in s.cost_usd  # the quota block is not a policy
    assert s.quota[0].need_gpus == 12
    lines = summary_lines(s)
    assert any("spot 30 %" in x for x in lines) and "train/a 8 -> 12 GPUs: coverage 50.0 % -> 100.0 %" in quota_note(s)
    old = fleet_summary({"run": {}, "series": {"train/a": {"recommended": m, "baseline": m}}})
    assert old.mix is None and any("mix not recorded" in x for x in summary_lines(old))
    # the line under the table shows a coverage as the table does (0.94948: 94.9 %, not 95.0 % of a rounded 0.9495)
    near = {"train/a": {"recommended": {**m, "coverage": 0.94948}, "baseline": m}}
    near = fleet_summary({"run": {"coverage_target": 0.95}, "series": near})
    assert any("train/a (94.9 %)" in x for x in summary_lines(near))


def test_policy_yaml_carries_the_mix_and_says_which_pool_is_all_spot(tmp_path):
    mix = {"reserved": {"gpu_hours": 0.0, "cost_usd": 0.0}, "spot": {"gpu_hours": 4.0, "cost_usd": 1.6},
           "on_demand": {"gpu_hours": 0.0, "cost_usd": 0.0}}
    m = Metrics(cost_usd=1.6, coverage=1.0, idle_ratio=0.0, unmet=0.0, mix=mix, spot_refused_gpu_hours=0.0)
    plan = SeriesPlan(series_id="train/pool", kind="training", unit="gpu", params={"reservation_ratio": 0.0},
                      plan={"reserved_gpus": 0, "on_demand_gpus": 0, "spot_gpus": 4, "capability_gpus": 4,
                            "valid_from": "2026-11-29T14:00:00+00:00"},
                      recommended=m, baseline=m.model_copy(update={"mix": None, "spot_refused_gpu_hours": None}),
                      forecast_version="v1")
    write_all([plan], tmp_path)
    assert not validate_dir(tmp_path)
    text = (tmp_path / "policy.yaml").read_text()
    assert "onDemand:" in text and "gpuHours: 4" in text
    assert "# train/pool: reserved 0 % (0 USD), spot 100 % (2 USD)" in text and "planned 100 % on spot" in text
    back = read_policy(tmp_path / "policy.yaml")[0]
    assert back.recommended.mix == mix and back.baseline.mix is None


def test_the_quota_cuts_the_flexible_layers_first():
    n = 3
    r, od, sp, hr = np.full(n, 4.0), np.full(n, 3.0), np.full(n, 2.0), np.full(n, 2.0)
    r2, od2, sp2, hr2 = within_quota(6.0, r, od, sp, hr)  # 11 asked, 5 cut: the top-up, then 3 of on-demand
    assert (hr2 == 0).all() and (od2 == 0).all() and (sp2 == 2.0).all() and (r2 == 4.0).all()
    assert all(np.array_equal(a, b) for a, b in zip(within_quota(None, r, od, sp, hr), (r, od, sp, hr)))
    i = inp([10.0] * 12)
    i.quota = 8.0
    z, ten = np.zeros(12), np.full(12, 10.0)
    m, s = account_training(i, z, z, ten, interruption_rate=0.0)  # a known quota alone caps nothing
    assert m.coverage == 1.0 and s["asked"].max() == 10.0
    c, cs = account_training(dataclasses.replace(i, hold_to_quota=True), z, z, ten, interruption_rate=0.0)
    assert cs["provisioned"].max() == 8.0 and c.coverage == 0.0 and c.cost_usd == pytest.approx(8 * 0.4)
    replay = lambda x: account_training(x, z, z, ten, interruption_rate=0.0)  # noqa: E731
    q = quota_check(i, s, replay)
    assert q.need_gpus == 10 and q.quota_gpus == 8.0 and q.capped.coverage == 0.0
    assert quota_check(dataclasses.replace(i, quota=12.0), s, replay) is None
    assert quota_check(dataclasses.replace(i, quota=None), s, replay) is None


def test_a_plan_above_its_quota_is_scored_uncapped_and_says_what_to_ask_for():
    n = 2016  # a week of 5-minute steps at 6 GPUs, a pool whose quota is 4
    tune = _flat(replay_inp(np.full(n, 6.0)), 6.0, 6.0, np.full(n, 6.0))
    evalw = _flat(replay_inp(np.full(n, 6.0), start="2024-01-08"), 6.0, 6.0, np.full(n, 6.0))
    settings = SearchSettings(n_calls=4, random_search=False)
    free = search_one(SearchTask("train/q", "training", tune, evalw, settings, 0, []))
    tune.quota = evalw.quota = 4.0
    oc = search_one(SearchTask("train/q", "training", tune, evalw, settings, 0, []))
    # the headline is the uncapped plan: a quota never changes what is tuned or scored
    assert oc.recommended.cost_usd == pytest.approx(free.recommended.cost_usd) and oc.params == free.params
    assert free.quota is None and not any(x.startswith("quota:") for x in free.notes)
    assert oc.quota is not None and oc.quota.need_gpus >= 6 and oc.quota.quota_gpus == 4.0
    assert oc.quota.capped.coverage < oc.recommended.coverage
    note = next(x for x in oc.notes if x.startswith("quota:"))
    assert f"raise the quota to {oc.quota.need_gpus}" in note and f"{oc.quota.capped.cost_usd:,.2f}" in note


def test_the_limit_honours_the_spot_cap():
    d = [10.0] * 288  # a day
    free = training_oracle(inp(d))
    assert free.cost_usd == pytest.approx(10 * 24 * 0.4)  # all spot
    half = training_oracle(inp(d, PRICE.model_copy(update={"spot_cap_share": 0.5})))
    assert half.layers["spot"] == pytest.approx(5 * 24) and half.cost_usd > free.cost_usd
    gpus = training_oracle(inp(d, PRICE.model_copy(update={"spot_cap_gpus": 3.0})))
    assert gpus.layers["spot"] == pytest.approx(3 * 24)


def test_a_misspelt_price_key_or_model_is_not_ignored():
    """An unknown key in a price entry is refused; a configured book that misses a series' GPU model says so."""
    from pydantic import ValidationError

    from optimizer.book.prices import built_in_note

    with pytest.raises(ValidationError, match="spot_cap_shares"):
        GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4, spot_cap_shares=0.5)
    capped = {"V100": GpuPrice(on_demand=3.9, reserved=2.34, spot=1.56, spot_cap_share=0.5)}
    note = built_in_note(capped, "V100-32GB")
    assert "V100-32GB" in note and "prices.V100-32GB" in note and "no spot cap" in note
    assert built_in_note({}, "V100-32GB") is None and built_in_note(capped, "V100") is None
    assert built_in_note(capped, "no-such-model") is None  # price_for's 'default' note covers it
