"""benchmarks/capacity.py: the spread over seeds (seed_spread, spread_table), the fleet regret, the recorded section."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchmarks.capacity import fleet_regret, forecast_set, record_as, seed_spread, spread_table


def test_seed_spread_is_the_largest_deviation_from_the_median_in_percent():
    costs = pd.DataFrame({0: [100.0, 10.0, 0.0], 1: [102.0, 10.0, 0.0], 2: [97.0, 10.0, 0.0]},
                         index=["train/a", "train/earth-x1", "train/idle"])
    out = seed_spread(costs)
    assert out.loc["train/a", "median_usd"] == 100.0
    assert out.loc["train/a", "max_dev_pct"] == pytest.approx(3.0)  # 97 is 3 % below the median 100
    assert out.loc["train/earth-x1", "max_dev_pct"] == 0.0
    assert math.isnan(out.loc["train/idle", "max_dev_pct"])  # no cost at all: no ratio to state


def test_spread_table_puts_each_seed_cost_beside_the_spread():
    costs = pd.DataFrame({0: [100.0, 50.0], 1: [110.0, 50.0], 3: [95.0, 51.0]}, index=["train/a", "infer/b"])
    out = spread_table(costs)
    assert list(out.columns) == ["seed 0", "seed 1", "seed 3", "median_usd", "max_dev_pct"]
    assert out.loc["train/a", "seed 1"] == 110.0
    assert out.loc["train/a", "max_dev_pct"] == pytest.approx(10.0)  # 110 is 10 % above the median 100
    assert out.loc["infer/b", "max_dev_pct"] == pytest.approx(2.0)  # 51 against the median 50


def test_fleet_regret_sums_cost_and_limits_of_the_recommended_rows_only():
    df = pd.DataFrame({"series": ["a", "a", "b", "b"], "policy": ["recommended", "baseline"] * 2,
                       "cost_usd": [120.0, 500.0, 30.0, 900.0], "limit_usd": [100.0, 100.0, 20.0, 20.0]})
    assert fleet_regret(df) == pytest.approx(150.0 / 120.0)  # not the mean of 1.2 and 1.5


def test_a_retrain_run_is_recorded_in_its_own_section():
    assert record_as(["--seeds", "0", "1", "--retrain"]) == "capacity-retrain"
    assert record_as(["--forecasts", "/plan", "--seeds", "0"]) == "capacity"
    assert record_as(["--forecast-sets", "/keep", "--seeds", "0", "1"]) == "capacity-sets"


def test_a_forecast_set_is_the_seeds_combined_rows_and_a_missing_seed_is_named(tmp_path):
    t = pd.Timestamp("2026-01-01", tz="UTC")
    rows = pd.DataFrame({"series_id": ["train/a"] * 2, "tier": ["combined", "daily"], "issued_at": [t, t],
                         "timestamp": [t + pd.Timedelta("1h")] * 2, "p50": [3.0, 9.0], "p90": [4.0, 9.0],
                         "p95": [5.0, 9.0], "p99": [6.0, 9.0]})
    rows.to_parquet(tmp_path / "seed-2.parquet")
    fc = forecast_set(tmp_path, 2).rolling["combined"]
    assert fc["p50"].tolist() == [3.0] and "tier" not in fc.columns  # the daily tier's row is not read
    with pytest.raises(SystemExit, match="no seed-3.parquet"):
        forecast_set(tmp_path, 3)
