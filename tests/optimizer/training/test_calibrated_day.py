"""The calibrated daily level (optimizer.training.calibrated_day): the SAA newsvendor level, causal, scale-free, with a
stated fallback, and the plan's next day sized as the replay sizes a day."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.capacity import capacity_plan
from optimizer.training.calibrated_day import (
    MIN_ERRORS,
    calibrated_day_level,
    day_type_errors,
    next_day_errors,
    plan_level,
    pooled_level,
    weekend_days,
)

T0 = pd.Timestamp("2024-01-01", tz="UTC")
STEP = pd.Timedelta("5min")


def _setup(days=14, scale=1.0, seed=0):
    """Whole-GPU demand (20 + gamma noise, x scale) on 5-minute steps, and flat p50 = 20 / p90 = 26 (x scale)
    forecasts issued every 6 hours for the next two days."""
    n = days * 288
    ts = pd.date_range(T0, periods=n, freq=STEP)
    demand = pd.Series(scale * (20.0 + np.random.default_rng(seed).gamma(1.5, 2.0, n).round()), index=ts)
    rows = []
    for issued in pd.date_range(T0 - pd.Timedelta("6h"), ts[-1], freq="6h"):
        t = pd.date_range(issued + STEP, periods=2 * 288, freq=STEP)
        rows.append(pd.DataFrame({"issued_at": issued, "timestamp": t, "p50": 20.0 * scale, "p90": 26.0 * scale,
                                  "p95": 27.0 * scale, "p99": 30.0 * scale}))
    return demand, pd.concat(rows, ignore_index=True)


def test_pooled_level_is_the_share_quantile_of_every_hour_error_pair():
    # {10, 20} + {0, 5} = {10, 15, 20, 25}: at least half of them reach 20, at least a quarter 25
    assert pooled_level(np.array([10.0, 20.0]), np.array([0.0, 5.0]), 0.5) == 20.0
    assert pooled_level(np.array([10.0, 20.0]), np.array([0.0, 5.0]), 0.25) == 25.0
    assert pooled_level(np.array([10.0, np.nan]), np.array([-30.0, np.nan]), 0.5) == 0.0  # clipped at 0, NaN skipped
    assert np.isnan(pooled_level(np.array([np.nan]), np.array([1.0]), 0.5))


def test_levels_are_causal_and_sized_from_the_realised_errors():
    demand, fc = _setup()
    start, end = T0 + pd.Timedelta("7D"), demand.index[-1]
    times = demand.index[demand.index >= start]
    lv, n_fb, _, _ = calibrated_day_level(fc, demand, times, start, end, 0.4)
    assert n_fb == 0 and np.all(np.isfinite(lv))
    # the forecast is flat at 20, so the level is 20 + the 60 % quantile of ceil(hour max) - 20: an hour maximum
    peaks = np.ceil(demand.groupby((demand.index - T0) // pd.Timedelta("1h")).max().to_numpy())
    first = peaks[(7 * 24 - 168):(7 * 24 - 1)]
    assert lv[0] == sorted(first, reverse=True)[int(np.ceil(0.4 * len(first))) - 1]
    cut = start + pd.Timedelta("3D")  # a day boundary: days up to and including that day see nothing after it
    later = demand.copy()
    later[later.index >= cut] += 50.0
    lv2, _, _, _ = calibrated_day_level(fc, later, times, start, end, 0.4)
    assert np.array_equal(lv[times < cut + pd.Timedelta("1D")], lv2[times < cut + pd.Timedelta("1D")])
    assert np.all(lv2[times >= cut + pd.Timedelta("2D")] > lv[times >= cut + pd.Timedelta("2D")])


def test_the_level_scales_with_the_pool_and_falls_back_to_p90_without_a_day_of_errors():
    d1, f1 = _setup()
    d10, f10 = _setup(scale=10.0)
    start, end = T0 + pd.Timedelta("7D"), d1.index[-1]
    times = d1.index[d1.index >= start]
    a, _, _, _ = calibrated_day_level(f1, d1, times, start, end, 0.4)
    b, _, _, _ = calibrated_day_level(f10, d10, times, start, end, 0.4)
    assert np.allclose(b, 10 * a)  # no headroom: ten times the pool, ten times the level
    early = d1.index[d1.index < T0 + pd.Timedelta("2D")]
    lv, n_fb, _, _ = calibrated_day_level(f1, d1, early, T0, early[-1], 0.4)
    day2 = early >= T0 + pd.Timedelta("1D")
    # day 1 has no past errors (the p90 level); day 2 has the 23 that one day of forecasts yields, enough
    peaks = np.ceil(d1[d1.index < T0 + pd.Timedelta("23h")].resample("1h").max().to_numpy() - 1e-9)
    assert n_fb == 1 and np.all(lv[~day2] == 26.0)
    assert np.all(lv[day2] == pooled_level(np.full(24, 20.0), peaks - 20.0, 0.4))
    assert plan_level(np.full(24, 20.0), np.full(24, 26.0), [1.0] * (MIN_ERRORS - 1), 0.4) == 26.0


@pytest.mark.parametrize("timezone", [None, "UTC"])
def test_the_plans_next_day_pools_the_errors_the_replay_would_pool(timezone):
    # the day after the window is Saturday 13 January: under a timezone it is calibrated on the weekend's errors alone
    # (the 48 of Saturday 6 and Sunday 7; the hour before the day, a Friday's, is not known yet)
    demand, fc = _setup() if timezone is None else _weekly(days=14)
    start, end = T0 + pd.Timedelta("7D"), T0 + pd.Timedelta("12D") - STEP
    times = demand.index[(demand.index >= start) & (demand.index <= end)]
    _, _, nxt, _ = calibrated_day_level(fc, demand, times, start, end, 0.4, timezone)
    longer = demand.index[(demand.index >= start) & (demand.index < end + pd.Timedelta("1D"))]
    lv, _, _, _ = calibrated_day_level(fc, demand, longer, start, longer[-1], 0.4, timezone)
    inp = ReplayInput(times=times, demand=demand[times].to_numpy(), step_s=300, price=None)
    inp.day_errors = nxt
    errors = next_day_errors(inp)
    assert len(errors) == (167 if timezone is None else 48)
    final = fc[fc["issued_at"] == fc["issued_at"][fc["issued_at"] < end + STEP].max()]
    final = final.assign(issued_at=end + STEP)
    plan = capacity_plan("training", {"reservation_ratio": 0.0, "daily_rule": "calibrated", "spot_fraction": 1.0,
                                      "day_errors_gpus": errors}, final, pd.DataFrame(),
                         history=pd.DataFrame({"timestamp": times, "value": demand[times].to_numpy()}), spot_share=0.4)
    assert plan["spot_gpus"] == np.ceil(lv[-1] - 1e-9)  # the day after the window: the level the replay gives that day


def _weekly(days=21, weekend_drop=8.0, seed=1):
    """Demand of 30 GPUs (+ gamma noise) on weekdays and ``30 - weekend_drop`` on Saturdays and Sundays (UTC), with
    a flat p50 of 30 that knows nothing of the week: the forecast is too high on every weekend."""
    demand, fc = _setup(days=days, seed=seed)
    weekend = demand.index.dayofweek >= 5
    demand = demand + 10.0 - np.where(weekend, weekend_drop, 0.0)
    return demand, fc.assign(p50=30.0, p90=36.0, p95=37.0, p99=40.0)


def test_weekend_days_are_read_in_the_pools_timezone():
    starts = pd.date_range("2024-01-05 16:00", periods=3, freq="1D", tz="UTC")  # midpoints Sat 04:00 .. Mon 04:00 UTC
    assert weekend_days(starts, "UTC").tolist() == [True, True, False]
    assert weekend_days(starts, "Asia/Shanghai").tolist() == [True, True, False]  # 12:00 local, same days
    assert weekend_days(starts, "America/Los_Angeles").tolist() == [False, True, True]  # Fri 20:00 .. Sun 20:00 local


def test_a_day_is_calibrated_on_the_errors_of_its_own_type():
    rng = np.random.default_rng(3)
    wide, narrow = rng.normal(5.0, 6.0, 120), rng.normal(-3.0, 1.0, 48)  # weekdays miss by more than weekends
    e = np.concatenate([wide, narrow])
    wk = np.array([False] * 120 + [True] * 48)
    out, typed = day_type_errors(e, wk, True)
    assert typed and np.array_equal(out, narrow)  # the weekend's centre and its own, narrower spread
    out, typed = day_type_errors(e, wk, False)
    assert typed and np.array_equal(out, wide)
    out, typed = day_type_errors(e[:130], wk[:130], True)  # 10 weekend errors: less than a day, all of them kept
    assert not typed and np.array_equal(out, e[:130])


def test_a_forecast_that_misses_the_weekend_is_calibrated_by_day_type():
    demand, fc = _weekly()
    start, end = T0 + pd.Timedelta("14D"), demand.index[-1]
    times = demand.index[demand.index >= start]
    plain = calibrated_day_level(fc, demand, times, start, end, 0.4)
    typed = calibrated_day_level(fc, demand, times, start, end, 0.4, "UTC")
    assert typed.untyped == 0 and plain.untyped == len(np.unique((times - start) // pd.Timedelta("1D")))
    weekend = times.dayofweek >= 5
    # pooled, every day gets the week's mixed errors: weekends too high, weekdays too low; by type each day's
    # level sits near its own demand's upper quantiles
    peaks = demand.groupby(demand.index.floor("1h")).max().apply(np.ceil)
    for mask in (weekend, ~weekend):
        hours = peaks[peaks.index.isin(times[mask].floor("1h"))]
        want = np.quantile(hours, 0.6)
        assert abs(np.mean(typed.level[mask]) - want) < abs(np.mean(plain.level[mask]) - want)
    assert np.mean(typed.level[weekend]) < np.mean(plain.level[weekend]) - 4.0
    assert np.mean(typed.level[~weekend]) > np.mean(plain.level[~weekend])
    # a pool whose demand does not depend on the day type keeps its level within noise
    flat, ffc = _weekly(weekend_drop=0.0)
    a = calibrated_day_level(ffc, flat, times, start, end, 0.4)
    b = calibrated_day_level(ffc, flat, times, start, end, 0.4, "UTC")
    assert abs(np.mean(b.level) - np.mean(a.level)) < 1.0


def test_an_intermittent_week_is_pooled_without_the_day_type_split():
    demand, fc = _weekly()
    idle = demand.where(demand.index.hour == 3, 0.0)  # demand one hour a day: an intermittent week
    start, end = T0 + pd.Timedelta("14D"), demand.index[-1]
    times = demand.index[demand.index >= start]
    typed = calibrated_day_level(fc, idle, times, start, end, 0.4, "UTC")
    plain = calibrated_day_level(fc, idle, times, start, end, 0.4)
    assert typed.untyped == plain.untyped > 0
    assert np.array_equal(typed.level, plain.level)


def test_a_quiet_weekend_is_sized_from_its_own_spread_not_the_weeks():
    # weekdays at 30 GPUs with right-skewed noise of spread `wide`, weekends at 15 with narrow noise; a flat p50 of
    # 30 that knows nothing of the week. The weekend's level comes from the weekend's errors alone: the weekdays'
    # spread does not reach it (moved onto the weekend's median, their skewed errors raised it a GPU).
    rng = np.random.default_rng(5)
    demand, fc = _setup(days=21)
    weekend = demand.index.dayofweek >= 5
    n = len(demand) // 12
    weekday_noise = (rng.gamma(0.5, 2.0, n) - 0.7).repeat(12)
    weekend_noise = rng.normal(0.0, 1.0, n).repeat(12)
    fc = fc.assign(p50=30.0, p90=40.0, p95=42.0, p99=45.0)
    start, end = T0 + pd.Timedelta("14D"), demand.index[-1]
    times = demand.index[demand.index >= start]
    on_weekend = times.dayofweek >= 5
    levels = {}
    for wide in (8.0, 16.0):
        d = pd.Series(np.round(np.where(weekend, 15.0 + weekend_noise, 30.0 + wide * weekday_noise)).clip(0),
                      index=demand.index)
        levels[wide] = calibrated_day_level(fc, d, times, start, end, 0.4, "UTC").level
    assert np.array_equal(levels[8.0][on_weekend], levels[16.0][on_weekend])
    assert not np.array_equal(levels[8.0][~on_weekend], levels[16.0][~on_weekend])
    peaks = d.groupby(d.index.floor("1h")).max()
    for day in np.unique(times[on_weekend].floor("1D")):
        in_day = (times >= day) & (times < day + pd.Timedelta("1D"))
        own = peaks[(peaks.index >= day) & (peaks.index < day + pd.Timedelta("1D"))]
        assert np.all(levels[16.0][in_day] < own.max())  # below the day's busiest hour: the top-up takes the rest
        assert np.all(levels[16.0][in_day] >= np.quantile(own, 0.25))
        assert np.all(levels[16.0][in_day] <= np.quantile(own, 0.6))  # the share 0.4 reaches: the day's own level
