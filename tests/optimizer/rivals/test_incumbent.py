"""The calibrated incumbent (optimizer.rivals.incumbent): the rule, and the search replacing it only beyond the days'
noise."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.book.prices import GpuPrice
from optimizer.engine.replay import replay_training
from optimizer.plan.policy import Metrics, TrainingParams
from optimizer.rivals.incumbent import INCUMBENT_RULE, challenge, incumbent
from optimizer.search.objective import daily_objectives
from tests.optimizer.engine.test_replay import _flat
from tests.optimizer.engine.test_replay import inp as replay_inp


def _m(cost: float, coverage: float, daily: list[float], daily_coverage: list[float] | None = None) -> Metrics:
    return Metrics(cost_usd=cost, coverage=coverage, idle_ratio=0.1, unmet=0.0, scale_events=0,
                   daily_cost_usd=daily, daily_coverage=daily_coverage or [coverage] * len(daily))


def _days(m: Metrics):
    return daily_objectives(m, 0.95, 700.0, 0.5)


def test_the_rule_has_no_headroom_and_follows_the_bounds():
    rule = incumbent({})
    assert rule.daily_rule == "calibrated" and rule.topup_quantile == "a95" and rule.headroom == 1.0
    assert rule.reservation_ratio == 0.0 and rule.spot_fraction == 1.0 and rule.topup_headroom == 1.0
    assert incumbent({"topup_quantile": ["c95", "p90"]}) is None
    assert incumbent({"daily_rule": ["newsvendor", "max"]}) is None
    assert incumbent({"daily_rule": ["calibrated"], "topup_quantile": ["a95"]}) == rule


def test_the_search_replaces_the_rule_only_beyond_the_days_noise():
    rule = incumbent({})
    at_rule = _m(700.0, 0.97, [100.0] * 7)
    searched = TrainingParams(reservation_ratio=0.0, quantile="p99", daily_rule="max", headroom=0.8)
    # 20 USD cheaper, all of it on one day: within the noise of the paired daily differences
    one_day = _m(680.0, 0.97, [100.0] * 6 + [80.0])
    ch = challenge(searched, one_day, rule, lambda p: at_rule, _days)
    assert ch.incumbent_kept and ch.params == rule and ch.objective == 700.0 and ch.margin > 20
    # 5 USD cheaper on every day: beyond it
    steady = _m(665.0, 0.97, [95.0] * 7)
    ch = challenge(searched, steady, rule, lambda p: at_rule, _days)
    assert not ch.incumbent_kept and ch.params == searched and ch.objective == 665.0
    # a searched policy dearer than the rule never replaces it
    dearer = _m(760.0, 0.99, [700.0 / 7 + 60.0 / 7] * 7)
    assert challenge(searched, dearer, rule, lambda p: at_rule, _days).incumbent_kept


def test_one_day_of_misses_is_one_day_of_evidence():
    """The rule misses on one day of seven (coverage 0.60 that day, 0.893 over the week): the week's penalty
    falls mostly on that day, one scenario in seven, and a searched policy dearer on the other six does not
    win on it; misses on most days do let it win."""
    rule = incumbent({})
    searched = TrainingParams(reservation_ratio=0.0, quantile="p99", daily_rule="max", headroom=1.0)
    at_rule = _m(700.0, 0.893, [100.0] * 7, [0.6] + [0.95] * 6)
    covered = _m(770.0, 0.99, [110.0] * 7)
    d = np.subtract(_days(at_rule), _days(covered))
    assert d.sum() > 0 and d.argmax() == 0 and d[0] > 5 * d[1:].max()  # dearer in total, by what day 0 brought
    ch = challenge(searched, covered, rule, lambda p: at_rule, _days)
    assert ch.incumbent_kept and abs(ch.margin - 1.943 * np.sqrt(7) * d.std(ddof=1)) < 0.01 * ch.margin
    four_days = _m(700.0, 0.873, [100.0] * 7, [0.8] * 4 + [0.97] * 3)
    assert not challenge(searched, covered, rule, lambda p: four_days, _days).incumbent_kept
    # a day of misses every day is steady evidence: the searched policy replaces the rule
    poor = _m(700.0, 0.85, [100.0] * 7, [0.85] * 7)
    assert not challenge(searched, covered, rule, lambda p: poor, _days).incumbent_kept


def test_daily_objectives_share_the_week_penalty_by_the_days_misses():
    m = _m(700.0, 0.86, [100.0] * 7, [0.8] + [0.87] * 6)
    days = _days(m)
    ucb = 0.86 + np.std([0.8] + [0.87] * 6, ddof=1) / np.sqrt(7)
    assert abs(days.sum() - (700.0 + 0.5 * 100 * (0.95 - ucb) * 700.0)) < 1e-6
    pen = days - 100.0
    assert abs(pen[0] / pen[1] - 0.2 / 0.13) < 1e-9  # in proportion to each day's uncovered share
    # a week that meets the target carries no penalty, whatever its days
    assert np.allclose(_days(_m(700.0, 0.96, [100.0] * 7, [0.9] + [0.97] * 6)), 100.0)
    # nor one within a standard error of it: a policy aiming at the target is not charged by noise
    assert np.allclose(_days(_m(700.0, 0.945, [100.0] * 7, [0.99, 0.9, 0.99, 0.9, 0.99, 0.9, 0.945])), 100.0)
    assert daily_objectives(Metrics(cost_usd=1.0, coverage=1.0, idle_ratio=0.0, unmet=0.0, scale_events=0),
                            0.95, 1.0, 0.5) is None


def test_a_rule_left_out_says_why():
    from optimizer.rivals.incumbent import incumbent_for
    from optimizer.search.settings import SearchSettings

    rule, note = incumbent_for("training", SearchSettings(), True, True)
    assert rule == incumbent({}) and note is None
    narrowed = SearchSettings(training_bounds={"daily_rule": ["newsvendor", "max"]})
    rule, note = incumbent_for("training", narrowed, True, True)
    assert rule is None and "training_bounds exclude" in note
    rule, note = incumbent_for("training", SearchSettings(selection_score="daily_regret_q75"), False, True)
    assert rule is None and "daily_regret_q75" in note
    assert incumbent_for("training", SearchSettings(training_incumbent="none"), True, True) == (None, None)
    assert incumbent_for("inference", SearchSettings(), True, True) == (None, None)


def test_tables_name_a_kept_rule_rule():
    from optimizer.rivals.incumbent import recommended_name

    assert recommended_name("searched", {"incumbent_kept": True}) == "rule"
    assert recommended_name("searched", {"incumbent_kept": False}) == "searched"
    assert recommended_name("empirical", {"incumbent_kept": True}) == "empirical"  # a peer that beat the rule


def test_under_a_spot_cap_the_rule_reserves_what_the_cap_refuses():
    """A book that caps spot gives the rule a weekly reservation of the GPUs the cap refuses at the weekly median
    level; on a flat pool that replaces the refused GPUs bought on demand and costs less. Other books leave it out."""
    price = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)
    half = price.model_copy(update={"spot_cap_share": 0.5})
    rule = incumbent({}, half, 0.0, 1800)
    assert (rule.reservation_basis, rule.reservation_ratio, rule.quantile) == ("spot_cap", 1.0, "p50")
    assert rule.model_copy(update=INCUMBENT_RULE) == incumbent({})  # the rest of the rule is unchanged
    assert incumbent({"reservation_ratio": (0.0, 0.8)}, half, 0.0, 1800).reservation_ratio == 0.8
    assert incumbent({}, price, 0.0, 1800) == incumbent({})  # no cap: no reservation
    cheap = half.model_copy(update={"reserved": 0.3})  # cheaper than spot: the search's ratios, not the rule's
    assert incumbent({}, cheap, 0.0, 1800).reservation_ratio == 0.0
    n = 7 * 288
    i = _flat(replay_inp(np.full(n, 40.0)), 40.0, 40.0, np.full(n, 40.0))
    i.price, i.day_calibrated, i.hour_max["a95"] = half, np.full(n, 40.0), np.full(n, 40.0)
    reserved, s = replay_training(i, rule, 0.0)
    on_demand, _ = replay_training(i, incumbent({}), 0.0)
    assert set(s["reserved"]) == {20.0} and reserved.spot_refused_gpu_hours == 0 < on_demand.spot_refused_gpu_hours
    assert reserved.coverage == on_demand.coverage == 1.0
    assert reserved.cost_usd == pytest.approx(n / 12 * (20 * 0.6 + 20 * 0.4))
    assert on_demand.cost_usd == pytest.approx(n / 12 * (20 * 1.0 + 20 * 0.4))
