"""benchmarks/capacity.py seed_spread: each series' largest deviation from its median cost over the seeds."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchmarks.capacity import seed_spread


def test_seed_spread_is_the_largest_deviation_from_the_median_in_percent():
    costs = pd.DataFrame({0: [100.0, 10.0, 0.0], 1: [102.0, 10.0, 0.0], 2: [97.0, 10.0, 0.0]},
                         index=["train/a", "train/earth-x1", "train/idle"])
    out = seed_spread(costs)
    assert out.loc["train/a", "median_usd"] == 100.0
    assert out.loc["train/a", "max_dev_pct"] == pytest.approx(3.0)  # 97 is 3 % below the median 100
    assert out.loc["train/earth-x1", "max_dev_pct"] == 0.0
    assert math.isnan(out.loc["train/idle", "max_dev_pct"])  # no cost at all: no ratio to state
