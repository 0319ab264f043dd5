"""Headroom in the forecast's error scale (optimizer.headroom): the same at any pool size."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.headroom import SPREAD_UNITS, with_headroom
from optimizer.policy import TrainingParams
from optimizer.replay import replay_training
from optimizer.space import training_space
from tests.optimizer.test_replay import _flat, inp


def test_a_spread_headroom_adds_the_same_gpus_at_any_level():
    assert with_headroom(10.0, 1.2, 1.0) == pytest.approx(12.0)
    assert with_headroom(10_000.0, 1.2, 1.0) == pytest.approx(12_000.0)  # x level: 2,000 GPUs more
    small = with_headroom(10.0, 1.1, 1.0, "spread")
    large = with_headroom(10_000.0, 1.1, 1.0, "spread")
    assert small - 10.0 == pytest.approx(large - 10_000.0) == pytest.approx(0.1 * SPREAD_UNITS)
    assert with_headroom(np.array([5.0]), 0.9, np.array([np.nan]), "spread")[0] == 5.0  # no spread known: the level
    assert with_headroom(5.0, 1.1, -3.0, "spread") == 5.0  # a crossed forecast adds nothing
    with pytest.raises(ValueError, match="headroom scale"):
        with_headroom(1.0, 1.0, 1.0, "ratio")


def test_the_replay_buys_the_level_plus_spreads_and_the_space_fixes_the_scale():
    n = 288
    i = _flat(inp(np.full(n, 100.0)), 100.0, 100.0, np.full(n, 100.0))
    i.day_max["p90"] = np.full(n, 104.0)  # the spread: p90 - p50 = 4 GPUs
    i.day_max["p50"] = np.full(n, 100.0)
    base = dict(reservation_ratio=0.0, quantile="p90", daily_rule="max", headroom=1.1, spot_fraction=1.0)
    _, lvl = replay_training(i, TrainingParams(**base), interruption_rate=0.0)
    _, spr = replay_training(i, TrainingParams(**base, headroom_scale="spread"), interruption_rate=0.0)
    assert lvl["spot"].max() == np.ceil(1.1 * 104.0 - 1e-9)
    assert spr["spot"].max() == 104.0 + 0.1 * SPREAD_UNITS * 4.0
    space = training_space({"headroom_scale": "spread"})
    assert {space.to_params(x).headroom_scale for x in space.grid_points()[:50]} == {"spread"}
    assert training_space().to_params(training_space().grid_points()[0]).headroom_scale == "level"
