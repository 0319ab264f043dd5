"""benchmarks/earth_pool.py daily_layer_idle: the idle that each daily spot choice leaves under a perfect hourly layer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.earth_pool import daily_layer_idle
from optimizer.prices import GpuPrice
from optimizer.replay import ReplayInput


def test_a_fall_the_past_cannot_see_leaves_the_model_free_day_idle():
    before = np.full(7 * 288, 100.0)  # a flat week at 100 GPUs, then a day at 60
    d = np.full(288, 60.0)
    times = pd.date_range("2024-01-08", periods=len(d), freq="300s", tz="UTC")
    inp = ReplayInput(times=times, demand=d, step_s=300, price=GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4),
                      history_before=before, day_level={"p50": np.full(len(d), 60.0)})
    out = daily_layer_idle(inp, 0.4)
    assert out["idle_perfect_day"] == 0.0 and out["idle_p50_day"] == 0.0  # both buy the day's 60
    assert out["idle_empirical_day"] == pytest.approx(0.4)  # the last week's 100 for a demand of 60
