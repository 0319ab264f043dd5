"""Multi-week selection (optimizer.search.multiweek, optimizer.search.selection): the tuning window's weeks, the
worst-week score, and the walk-forward check of the week-to-week ranks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.backtest import split_windows
from optimizer.book.prices import GpuPrice
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics
from optimizer.search.multiweek import (
    WeekEvidence,
    evidence_start,
    evidence_windows,
    walk_forward_check,
    week_bounds,
    week_evidence,
    week_regrets,
)
from optimizer.search.selection import WeeklyScore, selection_score
from optimizer.search.settings import SearchSettings, TrainingBounds
from optimizer.search.tuning import SearchTask, tune_policy
from tests.optimizer.engine.test_replay import _flat

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)
DAY = pd.Timedelta("1D")


def _window(days: float, gpus: float = 4.0, start: str = "2024-01-01") -> ReplayInput:
    n = int(days * 288)
    times = pd.date_range(start, periods=n, freq="300s", tz="UTC")
    return ReplayInput(times=times, demand=np.full(n, gpus), step_s=300, price=PRICE)


def test_the_tuning_window_holds_as_many_weeks_as_the_history_allows_after_training():
    idx = pd.date_range("2020-04-30 16:00", "2020-05-31 15:55", freq="5min", tz="UTC")  # 31 days, as the sample
    w = split_windows(idx)
    assert w.tune_start == w.eval_start - 7 * DAY
    two = evidence_windows(w, 2)
    assert two.tune_start == w.eval_start - 14 * DAY
    assert (two.start, two.eval_start, two.end) == (w.start, w.eval_start, w.end)
    # a third week would leave less than 7 days to train the forecasters on: two weeks it is
    assert evidence_windows(w, 4).tune_start == w.eval_start - 14 * DAY
    assert evidence_windows(w, 1) == w
    # 22 days: one week of training, one of tuning, one of evaluation: no room for more
    short = split_windows(idx[idx >= idx[-1] - 22 * DAY + pd.Timedelta("5min")])
    assert evidence_windows(short, 3) == short
    # a tuning window already longer than the weeks asked for is kept
    assert evidence_start(w.start, w.eval_start - 10 * DAY, w.eval_start, 1, 7 * DAY) == w.eval_start - 10 * DAY
    with pytest.raises(ValueError, match="evidence_weeks"):
        evidence_start(w.start, w.tune_start, w.eval_start, 0, 7 * DAY)


def test_weeks_are_counted_back_from_the_end_of_the_window():
    inp = _window(15)  # a leading part week of one day, then two complete weeks
    b = week_bounds(inp)
    assert [(s.start, s.stop) for s in b] == [(288, 288 * 8), (288 * 8, 288 * 15)]
    assert week_bounds(_window(6)) == []
    ev = week_evidence(inp)
    assert [list(r) for r in ev.days] == [list(range(1, 8)), list(range(8, 15))]
    # 4 GPUs all week, known in advance: the limit is 4 spot GPUs for 168 hours; the reference 4 on demand
    assert ev.limit_usd == pytest.approx([4 * 0.4 * 168] * 2)
    assert ev.reference_usd == pytest.approx([4 * 1.0 * 168] * 2)


def _metrics(week_costs: list[float], coverage: float = 1.0) -> Metrics:
    """A replay of two weeks whose days cost a seventh of each week's cost."""
    daily = [c / 7 for c in week_costs for _ in range(7)]
    return Metrics(cost_usd=sum(week_costs), coverage=coverage, idle_ratio=0.0, unmet=0.0,
                   daily_cost_usd=daily, daily_coverage=[coverage] * len(daily))


EV = WeekEvidence([range(0, 7), range(7, 14)], [100.0, 100.0], [250.0, 250.0])


def test_the_week_regret_adds_the_coverage_penalty_in_units_of_the_weeks_limit():
    assert week_regrets(_metrics([110.0, 130.0]), EV, 0.96, 0.5, "window") == pytest.approx([1.1, 1.3])
    # 1 point below the target: half the week's reference cost (125 USD) on top, over a limit of 100
    assert week_regrets(_metrics([110.0, 130.0], 0.95), EV, 0.96, 0.5, "window") == pytest.approx([2.35, 2.55])
    # a week without demand (limit 0) is not a scenario
    idle = WeekEvidence(EV.days, [0.0, 100.0], EV.reference_usd)
    r = week_regrets(_metrics([5.0, 120.0]), idle, 0.96, 0.5, "window")
    assert np.isnan(r[0]) and r[1] == pytest.approx(1.2)


def test_a_one_week_winner_whose_rank_does_not_hold_loses_to_the_stable_policy():
    # "lucky" is the cheapest policy of week 1 and the dearest of week 2; "stable" is near the best in both
    policies = {"lucky": _metrics([102.0, 140.0]), "stable": _metrics([108.0, 112.0]),
                "middle": _metrics([105.0, 125.0]), "late": _metrics([130.0, 110.0])}
    score = WeeklyScore(EV, 0.96, 250.0, 0.5, "window")
    scores = {k: score(m) for k, m in policies.items()}
    assert min(scores, key=scores.get) == "stable" and scores["stable"] == pytest.approx(1.12)
    # what a one-week selection on week 1 would choose
    week1 = {k: m.daily_cost_usd[:7] for k, m in policies.items()}
    assert min(week1, key=lambda k: sum(week1[k])) == "lucky"
    check = score.report(policies["stable"])
    assert check["weeks"] == 2 and check["chosen_week_regret"] == pytest.approx([1.08, 1.12])
    assert check["spread"]["range"] == pytest.approx(0.04) and check["spread"]["max"] == pytest.approx(1.12)
    step = check["walk_forward"][0]
    # week 1's ranking reversed in week 2, and week 1's pick cost 140 where the best cost 110
    assert step["week"] == 2 and step["spearman"] < 0
    assert step["one_week_pick_next"] == pytest.approx(140 / 110)


def test_a_ranking_that_holds_is_reported_as_such():
    seen = {k: np.array([1.0 + k / 10, 1.05 + k / 10]) for k in range(5)}
    check = walk_forward_check(seen, 0)
    assert check["walk_forward"][0]["spearman"] == pytest.approx(1.0)
    assert check["walk_forward"][0]["one_week_pick_next"] == pytest.approx(1.0)
    assert walk_forward_check({0: np.array([1.2])}, 0)["walk_forward"] == []


def test_weekly_selection_applies_to_training_windows_with_a_complete_week():
    two = _window(14)
    assert isinstance(selection_score("training", "weekly", two, 0.96, 1.0, 0.5, "lcb"), WeeklyScore)
    assert selection_score("inference", "weekly", two, 0.96, 1.0, 0.5, "lcb") is None
    # a day-long window has no week to rank on: the cost objective
    assert selection_score("training", "weekly", _window(1), 0.96, 1.0, 0.5, "lcb") is None
    # without any week with demand the score is the cost objective over the reference cost
    score = WeeklyScore(WeekEvidence([range(0, 7)], [0.0], [1e-6]), 0.96, 10.0, 0.5, "window")
    assert score(_metrics([20.0, 0.0])) == pytest.approx(2.0)


def test_a_rivals_usd_margin_counts_against_the_smallest_weeks_limit():
    score = WeeklyScore(WeekEvidence(EV.days, [100.0, 50.0], EV.reference_usd), 0.96, 250.0, 0.5, "window")
    assert score.regret_margin(10.0) == pytest.approx(0.2)
    assert score.regret_margin(0.0) == 0.0


def test_tuning_on_two_weeks_reports_the_recommendations_week_to_week_spread():
    two = np.r_[np.full(7 * 288, 4.0), np.full(7 * 288, 8.0)]  # 4 GPUs one week, 8 the next, forecast exactly
    tune = _flat(_window(14), 6.0, 6.0, two)
    tune.demand = two
    for q in tune.day_max:
        tune.day_max[q] = tune.day_level[q] = tune.week_mean[q] = two.copy()
    evalw = _flat(_window(1, 8.0, start="2024-01-15"), 8.0, 8.0, np.full(288, 8.0))
    bounds = TrainingBounds(quantile=["p50"], topup_quantile=["none"])
    task = SearchTask("train/two", "training", tune, evalw,
                      SearchSettings(n_calls=4, random_search=False, interruption_rate=0.0, training_bounds=bounds,
                                     selection_score="weekly"),
                      0, [])
    tuned = tune_policy(task)
    weeks = tuned.tuning["weeks"]
    assert tuned.tuning["selection_score"] == "weekly"
    assert weeks["weeks"] == 2 and weeks["limit_usd"] == pytest.approx([4 * 0.4 * 168, 8 * 0.4 * 168])
    r = weeks["chosen_week_regret"]
    assert len(r) == 2 and all(x >= 1.0 - 1e-9 for x in r)
    assert weeks["spread"]["range"] == pytest.approx(abs(r[1] - r[0]))
    assert len(weeks["walk_forward"]) == 1
