"""benchmarks/persistence_bound.py: the figures say when the last value cannot be beaten at 1 h, and when it can."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.persistence_bound import bounds_table, series_bounds

DAYS = 22  # a training, a tuning and an evaluation week, and a day to spare


def _grid(values: np.ndarray) -> pd.Series:
    return pd.Series(values, index=pd.date_range("2024-03-01", periods=len(values), freq="5min", tz="UTC"))


def test_a_pool_that_moves_in_rare_steps_is_left_to_the_last_value():
    rng = np.random.default_rng(0)
    n = DAYS * 288
    steps = np.where(rng.random(n) < 0.01, rng.choice([-8.0, 8.0], n), 0.0)  # a job starts or ends ~3 times a day
    y = np.clip(200 + np.cumsum(steps), 0, None)
    out = series_bounds(_grid(y))
    assert out["unchanged"] > 0.8 and out["hours_over_half"] == 0
    assert out["lad_causal"] > 0.98  # nothing known at the origin predicts the next step
    assert out["lad_hindsight"] <= 1.0 + 1e-4  # naive is inside the regression (up to the solver's tolerance)


def test_a_service_with_a_daily_ramp_is_beaten_by_the_bounds():
    rng = np.random.default_rng(1)
    t = np.arange(DAYS * 288)
    y = 100 + 40 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 1.0, len(t))  # changes follow the clock
    out = series_bounds(_grid(y))
    assert out["unchanged"] < 0.05 and out["hours_over_half"] == 24
    assert out["lad_causal"] < 0.7 and out["lad_hindsight"] < 0.7


def test_the_table_puts_sources_on_the_grid_and_skips_short_series():
    long = _grid(np.full(DAYS * 288, 8.0))
    frame = pd.concat([
        pd.DataFrame({"series_id": "train/long", "timestamp": long.index, "value": long.to_numpy()}),
        pd.DataFrame({"series_id": "train/short", "timestamp": long.index[:288 * 3], "value": 1.0}),
    ])
    t = bounds_table(frame)
    assert list(t.index) == ["train/long"]
    assert t.loc["train/long", "unchanged"] == 1.0 and np.isnan(t.loc["train/long", "lad_causal"])  # flat: no ratio
