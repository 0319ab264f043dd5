"""benchmarks/earth_pool.py daily_layer_idle: the idle that each daily spot choice leaves under a perfect hourly
layer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.earth_pool import daily_layer_idle
from optimizer.book.prices import GpuPrice
from optimizer.engine.replay_core import ReplayInput


def test_a_fall_the_past_cannot_see_leaves_the_model_free_day_idle():
    before = np.full(7 * 288, 100.0)  # a flat week at 100 GPUs, then a day at 60
    d = np.full(288, 60.0)
    times = pd.date_range("2024-01-08", periods=len(d), freq="300s", tz="UTC")
    inp = ReplayInput(times=times, demand=d, step_s=300, price=GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4),
                      history_before=before, day_level={"p50": np.full(len(d), 60.0)})
    out = daily_layer_idle(inp, 0.4)
    assert out["idle_perfect_day"] == 0.0 and out["idle_p50_day"] == 0.0  # both buy the day's 60
    assert out["idle_empirical_day"] == pytest.approx(0.4)  # the last week's 100 for a demand of 60


def test_the_hindsight_check_counts_policies_that_meet_regret_and_idle_at_the_coverage():
    from benchmarks.earth_pool import target_counts

    rows = [(1.10, 0.96, 0.10),   # meets all three (limit idle 0.074 + 0.03)
            (1.05, 0.96, 0.14),   # cheap but idle
            (1.30, 0.97, 0.08),   # lean but dear
            (1.00, 0.90, 0.05),   # covers too little: not counted
            (float("nan"), 0.99, 0.05)]
    out = target_counts(rows, 0.074)
    assert out["hindsight_feasible"] == 1
    assert out["hindsight_idle_at_regret"] == pytest.approx(0.10)
    assert out["hindsight_regret_at_idle"] == pytest.approx(1.10)
    out = target_counts(rows[1:], 0.074)
    assert out["hindsight_feasible"] == 0
    assert out["hindsight_idle_at_regret"] == pytest.approx(0.14)
    assert out["hindsight_regret_at_idle"] == pytest.approx(1.30)
    assert np.isnan(target_counts([], 0.074)["hindsight_idle_at_regret"])


def test_the_flat_pool_moves_within_its_amplitude_below_its_level():
    import pytest

    from benchmarks.earth_pool import flat_pool

    f = flat_pool(3300.0, 0.05)
    v = f["value"].dropna()
    assert f["series_id"].iloc[0] == "train/flat-3300"
    assert v.max() == 3300.0 and v.min() >= 3300.0 * 0.95 - 1
    assert (v == v.round()).all() and v.nunique() > 10  # whole GPUs, and it still moves
    with pytest.raises(ValueError, match="amplitude"):
        flat_pool(3300.0, 0.0)
