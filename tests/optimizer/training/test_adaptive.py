"""The adaptive calibrated top-up (optimizer.training.adaptive): it holds the coverage target, sees nothing ahead, and
counts the capacity held below it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.training.adaptive import INSURANCE_SHARE, adaptive_levels, hour_values, insured, smooth_coverage

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _hours(days=28, seed=0, burst=0.0):
    """Per hour: 12 five-minute steps of whole-GPU demand 20 + gamma noise (+ burst x a second gamma on
    one step in four); the p50 forecast 20, p90 30; errors ceil(hour max) - 20."""
    n = days * 24
    rng = np.random.default_rng(seed)
    steps = (20.0 + rng.gamma(1.5, 2.0, (n, 12)).round()
             + burst * (rng.random((n, 12)) < 0.25) * rng.gamma(2.0, 3.0, (n, 12)).round())
    p50, p90 = np.full(n, 20.0), np.full(n, 30.0)
    return p50, p90, np.ceil(steps.max(axis=1)) - p50, [row for row in steps]


def _coverage(level, values, first):
    return float(np.mean([(v <= np.ceil(lv - 1e-9)).mean() for lv, v in zip(level[first:], values[first:])]))


def test_the_share_of_covered_intervals_tends_to_the_target_on_flat_and_bursty_demand():
    for burst in (0.0, 1.0):
        p50, p90, err, values = _hours(burst=burst)
        for target in (0.9, 0.95):
            level, margin, beta = adaptive_levels(p50, p90, err, values, 168, 24, target)
            assert abs(_coverage(level, values, 168) - target) < 0.02, (burst, target)
            assert np.all(np.isnan(margin[:25])) and np.all(level[:25] == 30.0)  # under a day of errors: p90
    # the same fixed quantile of hour-maximum errors covers different shares of intervals on the two pools
    flat, bursty = _hours(burst=0.0), _hours(burst=1.0)
    assert adaptive_levels(*flat, 168, 24, 0.95)[2][-1] != adaptive_levels(*bursty, 168, 24, 0.95)[2][-1]


def test_no_level_sees_an_hour_that_ended_less_than_an_hour_before_it():
    p50, p90, err, values = _hours()
    a, _, _ = adaptive_levels(p50, p90, err, values, 168, 24, 0.95)
    later = [v.copy() for v in values]
    err2 = err.copy()
    for k in range(300, len(later)):
        later[k] += 40.0
        err2[k] += 40.0
    b, _, _ = adaptive_levels(p50, p90, err2, later, 168, 24, 0.95)
    assert np.array_equal(a[:302], b[:302]) and not np.array_equal(a[302:], b[302:])


def test_capacity_held_below_counts_as_covering():
    p50, p90, err, values = _hours()
    alone, _, _ = adaptive_levels(p50, p90, err, values, 168, 24, 0.95)
    floored, _, beta = adaptive_levels(p50, p90, err, values, 168, 24, 0.95, floor=np.full(len(p50), 28.0))
    assert np.nanmean(floored[200:]) < np.nanmean(alone[200:]) and beta[-1] < 0.5


def test_hour_values_groups_the_known_steps_of_each_hour():
    ts = pd.date_range(T0, periods=36, freq="5min")
    actual = pd.Series(np.arange(36.0), index=ts)
    actual.iloc[5] = np.nan
    vals = hour_values(actual, pd.date_range(T0, periods=4, freq="1h"))
    assert [len(v) for v in vals] == [11, 12, 12, 0] and vals[1][0] == 12.0


def test_cheap_cover_raises_only_hours_where_the_fixed_level_costs_little():
    """A 3,300-GPU hour whose c95 lies 6 GPUs above the adaptive level takes c95 (0.2 % of the level);
    a 50-GPU hour whose c95 lies 6 above does not (12 %); a fallback hour and an hour already above stay."""
    p50 = np.array([3300.0, 50.0, 3300.0, 3300.0])
    level = np.array([3303.0, 53.0, 3310.0, 3303.0])
    margin = np.array([3.0, 3.0, np.nan, 3.0])
    high = np.array([3309.0, 59.0, 3316.0, 3301.0])
    lv, mg, n = insured(level, margin, high, high - p50, p50)
    assert list(lv) == [3309.0, 53.0, 3310.0, 3303.0] and n == 1
    assert mg[0] == 9.0 and mg[1] == 3.0 and np.isnan(mg[2])
    # the bound is the share of the hour's p50 level, in GPUs
    edge = np.array([3300.0 * (1 + INSURANCE_SHARE) + 3.0])
    assert insured(level[:1], margin[:1], edge, edge - 3300.0, p50[:1])[2] == 1
    assert insured(level[:1], margin[:1], edge + 0.5, edge - 3299.5, p50[:1])[2] == 0


def test_smooth_coverage_is_a_ramp_centred_on_the_whole_gpu_jump():
    # ceil(level) >= 10 from level > 9: the ramp is 0.5 there, 1 from 9.5, 0 up to 8.5; the floor counts fully
    assert smooth_coverage(9.0, np.array([10.0])) == 0.5
    assert smooth_coverage(9.5, np.array([10.0])) == 1.0 and smooth_coverage(8.5, np.array([10.0])) == 0.0
    assert smooth_coverage(9.25, np.array([10.0])) == 0.75
    assert smooth_coverage(0.0, np.array([10.0, 3.0]), floor=10.0) == 1.0
    assert smooth_coverage(0.0, np.array([12.0, 3.0]), floor=10.0) == 0.5


def test_a_forecast_that_moves_a_little_moves_the_levels_a_little():
    # per-hour forecast noise of 0.02 GPUs: every hour's level moves by well under a GPU (with the
    # whole-GPU indicator and the order statistic, the bursty pool's levels jumped by 0.4 GPUs)
    for burst in (0.0, 1.0):
        p50, p90, err, values = _hours(burst=burst)
        jitter = np.random.default_rng(7).uniform(-0.5, 0.5, len(p50))
        p50, err = p50 + jitter, err - jitter
        d = np.random.default_rng(1).normal(0.0, 0.02, len(p50))
        a, _, _ = adaptive_levels(p50, p90, err, values, 168, 24, 0.95)
        b, _, _ = adaptive_levels(p50 + d, p90, err - d, values, 168, 24, 0.95)
        moved = np.abs(b - a)[25:]
        assert moved.max() < 0.15 and moved.mean() < 0.03, (burst, moved.max(), moved.mean())
