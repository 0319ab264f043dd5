"""The calibrated incumbent (optimizer.incumbent): its top-up level, and the search replacing it only beyond noise."""

from __future__ import annotations

from optimizer.incumbent import challenge, incumbent_candidates, pick_level
from optimizer.policy import Metrics, TrainingParams


def _m(cost: float, coverage: float, daily: list[float]) -> Metrics:
    return Metrics(cost_usd=cost, coverage=coverage, idle_ratio=0.1, unmet=0.0, scale_events=0,
                   daily_cost_usd=daily)


def test_candidates_follow_the_bounds():
    assert [p.topup_quantile for p in incumbent_candidates({})] == ["c80", "c90", "c95"]
    assert all(p.daily_rule == "calibrated" and p.headroom == 1.0 for p in incumbent_candidates({}))
    assert [p.topup_quantile for p in incumbent_candidates({"topup_quantile": ["c95", "p90"]})] == ["c95"]
    assert incumbent_candidates({"daily_rule": ["newsvendor", "max"]}) == []


def test_the_lowest_level_that_covers_the_target_is_picked_else_the_cheapest_objective():
    cands = incumbent_candidates({})
    cov = {"c80": 0.93, "c90": 0.955, "c95": 0.99}
    ev = lambda p: _m(100.0, cov[p.topup_quantile], [10.0] * 7)  # noqa: E731
    assert pick_level(cands, ev, lambda m: m.cost_usd, 0.95)[0].topup_quantile == "c90"
    objective = {0.93: 300.0, 0.955: 200.0, 0.99: 250.0}
    cov.update(c90=0.94, c95=0.945)
    objective.update({0.94: 120.0, 0.945: 500.0})
    assert pick_level(cands, ev, lambda m: objective[m.coverage], 0.95)[0].topup_quantile == "c90"


def test_the_search_replaces_the_rule_only_beyond_the_days_noise():
    cands = incumbent_candidates({"topup_quantile": ["c80"]})
    rule = _m(700.0, 0.97, [100.0] * 7)
    searched = TrainingParams(reservation_ratio=0.0, quantile="p99", daily_rule="max", headroom=0.8)
    # 20 USD cheaper, all of it on one day: within the noise of the paired daily differences
    one_day = _m(680.0, 0.97, [100.0] * 6 + [80.0])
    ch = challenge(searched, 680.0, one_day, cands, lambda p: rule, lambda m: m.cost_usd, 0.95)
    assert ch.incumbent_kept and ch.params.daily_rule == "calibrated" and ch.objective == 700.0 and ch.margin > 20
    # 5 USD cheaper on every day: beyond it
    steady = _m(665.0, 0.97, [95.0] * 7)
    ch = challenge(searched, 665.0, steady, cands, lambda p: rule, lambda m: m.cost_usd, 0.95)
    assert not ch.incumbent_kept and ch.params == searched and ch.objective == 665.0
