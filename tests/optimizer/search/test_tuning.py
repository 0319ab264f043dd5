"""optimizer/search/tuning.py on small hand-made windows: the reference cost, the short-window rule, the
selection score's dispatch, the policy warnings, and one series' search split into its tuning and
evaluation halves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optimizer.book.prices import GpuPrice
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics
from optimizer.search.objective import reference_cost
from optimizer.search.selection import selection_score
from optimizer.search.settings import SearchSettings
from optimizer.search.tuning import (
    SearchOutcome,
    SearchTask,
    evaluate_policy,
    policy_warnings,
    search_one,
    short_window,
    tune_key_parts,
    tune_policy,
)
from tests.optimizer.engine.test_replay import _flat

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)


def window(demand, start="2024-01-01", step_s=300, gpus_per_unit=1.0, before=None) -> ReplayInput:
    times = pd.date_range(start, periods=len(demand), freq=f"{step_s}s", tz="UTC")
    return ReplayInput(times=times, demand=np.asarray(demand, float), step_s=step_s, price=PRICE,
                       gpus_per_unit=gpus_per_unit,
                       history_before=None if before is None else np.asarray(before, float))


def test_reference_cost_serves_the_mean_known_demand_on_demand():
    # mean of the known steps 4 GPUs, for 4 steps of 5 minutes (1/3 h) at 1 USD per GPU-hour
    assert reference_cost(window([2.0, 4.0, np.nan, 6.0])) == pytest.approx(4 / 3)
    # replicas of 2 GPUs each cost twice as much
    assert reference_cost(window([2.0, 4.0, np.nan, 6.0], gpus_per_unit=2.0)) == pytest.approx(8 / 3)
    # an idle window still has a tiny positive reference (1e-6 units for the hour), so a shortfall is penalised
    assert reference_cost(window([0.0] * 12)) == pytest.approx(1e-6)


def test_a_window_shorter_than_a_day_is_short():
    assert short_window(window(np.ones(287)))
    assert not short_window(window(np.ones(288)))
    assert not short_window(window(np.ones(24), step_s=3600))


def test_selection_score_dispatch():
    tune = window(np.ones(288))
    assert selection_score("training", "cost", tune, 0.96, 1.0, 0.5, "window") is None
    assert selection_score("inference", "daily_regret_q75", tune, 0.96, 1.0, 0.5, "window") is None
    score = selection_score("training", "daily_regret_q75", tune, 0.96, 1.0, 0.5, "window")
    assert callable(score)
    with pytest.raises(ValueError, match="unknown selection score"):
        selection_score("training", "regret", tune, 0.96, 1.0, 0.5, "window")


def _outcome(rec: Metrics, base: Metrics) -> SearchOutcome:
    return SearchOutcome({}, rec, base, None, {}, [], pd.DataFrame(), [])


def test_policy_warnings_name_a_missed_coverage_and_a_cheaper_baseline():
    m = lambda cost, cov: Metrics(cost_usd=cost, coverage=cov, idle_ratio=0.0, unmet=0.0)  # noqa: E731
    assert policy_warnings(_outcome(m(90.0, 0.97), m(100.0, 0.99)), 0.95) == []
    low = policy_warnings(_outcome(m(90.0, 0.90), m(100.0, 0.99)), 0.95)
    assert len(low) == 1 and "coverage 0.900 is below the target 0.950" in low[0]
    # the target is min(0.95, the baseline's coverage): a baseline covering 0.85 asks for 0.85 only
    assert policy_warnings(_outcome(m(90.0, 0.90), m(100.0, 0.85)), 0.95) == []
    dear = policy_warnings(_outcome(m(110.0, 0.99), m(100.0, 0.99)), 0.95)
    assert len(dear) == 1 and "baseline is cheaper" in dear[0]


def _task() -> SearchTask:
    flat = np.full(288, 4.0)  # a day of 4 GPUs, forecast exactly, after a day of the same
    tune = _flat(window(flat, before=flat), 4.0, 4.0, flat)
    evalw = _flat(window(flat, start="2024-01-02", before=flat), 4.0, 4.0, flat)
    return SearchTask("train/flat", "training", tune, evalw, SearchSettings(n_calls=4, random_search=False,
                                                                           interruption_rate=0.0), 0, ["input note"])


def test_the_tuning_key_holds_the_tuning_window_not_the_evaluation_window_or_the_name():
    task = _task()
    kind, tune, settings, seed = tune_key_parts(task)
    assert (kind, seed, settings) == ("training", 0, task.settings) and tune is task.tune
    assert not any(part is task.evalw or part == task.series_id for part in tune_key_parts(task))


def test_search_on_a_flat_pool_with_perfect_forecasts():
    task = _task()
    tuned = tune_policy(task)
    oc = evaluate_policy(task, tuned)
    # the split halves give the whole search's outcome
    whole = search_one(task)
    assert oc.params == whole.params and oc.recommended == whole.recommended and oc.notes == whole.notes
    assert oc.notes[0] == "input note"
    # 4 GPUs known in advance: covered at every step, never below the perfect-foresight limit
    # (4 GPUs on spot for the day: 4 x 0.4 x 24 = 38.4 USD), cheaper than the baseline
    # (ceil(1.2 x 4) = 5 GPUs, 30 % of them reserved: 2 x 0.6 x 24 + 3 x 0.4 x 24 = 57.6 USD)
    assert oc.recommended.coverage == 1.0
    assert oc.oracle.cost_usd == pytest.approx(4 * 0.4 * 24)
    assert oc.regret()["recommended"] >= 1.0 - 1e-9
    assert oc.baseline.cost_usd == pytest.approx(57.6) and oc.recommended.cost_usd < oc.baseline.cost_usd
    assert tuned.tuning["grid_points"] > 0 and "refinement_kept" in tuned.tuning


def test_an_inference_window_shorter_than_a_day_searches_the_hpa_family_only():
    d = np.r_[np.full(60, 3.0), np.full(60, 6.0)]
    tune = _flat(window(d), 0.0, 0.0)
    evalw = _flat(window(d, start="2024-01-02"), 0.0, 0.0)
    task = SearchTask("infer/short", "inference", tune, evalw, SearchSettings(n_calls=4, random_search=False), 0, [])
    tuned = tune_policy(task)
    assert all(t["params"]["family"] == "hpa" for t in tuned.trials)
    assert any("only the HPA family was searched" in n for n in tuned.notes)
