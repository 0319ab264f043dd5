"""The top-up's fresh forecast of the next hour (optimizer.training.fresh_hour): the latest forecast's first hour,
moved to the newest observation; nothing later than the hour's start is read."""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.training.fresh_hour import refreshed_hour_max

T0 = pd.Timestamp("2024-01-01", tz="UTC")
STEP = pd.Timedelta("5min")


def _forecasts(first_hour, later, actual, issued=pd.date_range(T0, periods=6, freq="4h")):
    """Forecasts issued every 4 h for the next 6 h: ``first_hour(k)`` gives the p50 of lead k
    (1..12 steps) as a change from the origin's observed value; ``later(k)`` that of leads
    13..72. Bands: p90 = p50 + 2, p95 = p50 + 3, p99 = p50 + 5."""
    rows = []
    for o in issued:
        k = np.arange(1, 73)
        p50 = actual[o] + np.where(k <= 12, [first_hour(i) for i in k], [later(i) for i in k]).astype(float)
        rows.append(pd.DataFrame({"issued_at": o, "timestamp": o + k * STEP, "p50": p50, "p90": p50 + 2,
                                  "p95": p50 + 3, "p99": p50 + 5}))
    return pd.concat(rows, ignore_index=True)


def _run(fc, actual, start, hours=4):
    times = pd.date_range(start, periods=hours * 12, freq=STEP)
    return times, refreshed_hour_max(fc, times, pd.date_range(start, periods=hours, freq="1h"), actual)


def _actual(values=None):
    ts = pd.date_range(T0, periods=24 * 12, freq=STEP)
    v = np.zeros(len(ts)) if values is None else values
    return pd.Series(v, index=ts)


def test_persistence_band_gives_the_newest_observation_whatever_the_later_rows_say():
    actual = _actual(np.arange(24 * 12) % 7.0)  # moves every step, so each hour has its own newest value
    start = T0 + pd.Timedelta("1h")  # hours 1-4: the 00:00 forecast is 1-4 h old
    times, a = _run(_forecasts(lambda k: 0.0, lambda k: 9.0, actual), actual, start)
    _, b = _run(_forecasts(lambda k: 0.0, lambda k: -3.0 + k / 10, actual), actual, start)
    for i, hs in enumerate(pd.date_range(start, periods=4, freq="1h")):
        newest = actual[actual.index <= hs - 2 * STEP].iloc[-1]
        m = (times >= hs) & (times < hs + pd.Timedelta("1h"))
        assert np.allclose(a["p50"][m], newest) and np.allclose(a["p90"][m], newest + 2)
        assert np.allclose(a["p99"][m], newest + 5)
    for q in a:  # the rows 1-5 h ahead (the day tier's shape, its seed) never reach the top-up
        assert np.array_equal(a[q], b[q])


def test_a_forecast_change_in_the_first_hour_is_kept_and_moved_to_the_newest_observation():
    actual = _actual(np.full(24 * 12, 4.0))
    actual[T0 + pd.Timedelta("2h"):] = 6.0  # the level rose after the 00:00 origin (value 4)
    times, out = _run(_forecasts(lambda k: 0.25 * k, lambda k: 0.0, actual), actual, T0 + pd.Timedelta("3h"), 1)
    assert np.allclose(out["p50"], 6.0 + 3.0)  # newest 6 + the band's largest rise from its origin (12 x 0.25)
    assert np.allclose(out["p95"], 6.0 + 3.0 + 3.0)


def test_no_look_ahead_and_clipped_at_zero_and_nan_before_any_forecast():
    actual = _actual(np.full(24 * 12, 5.0))
    fc = _forecasts(lambda k: -8.0, lambda k: 0.0, actual)  # a band far below the origin's value
    start = T0 + pd.Timedelta("1h")
    times, base = _run(fc, actual, start, 1)
    assert np.allclose(base["p50"], 0.0) and np.allclose(base["p99"], 2.0)  # max(0, 5 - 8), 5 - 8 + 5
    later = actual.copy()
    later[later.index >= start - STEP] = 50.0  # the step before the hour ends at its start: not yet known
    _, moved = _run(fc, later, start, 1)
    for q in base:
        assert np.array_equal(base[q], moved[q])
    _, early = _run(fc, actual, T0 - pd.Timedelta("1h"), 1)  # no forecast issued before this hour
    assert all(np.isnan(v).all() for v in early.values())
    unseen = actual.copy()
    unseen[unseen.index < T0 + pd.Timedelta("6h")] = np.nan  # nothing observed before the hour: the band as issued
    _, issued = _run(fc, unseen, T0 + pd.Timedelta("5h"), 1)
    assert np.allclose(issued["p50"], 0.0) and np.allclose(issued["p99"], 2.0)  # max(0, 5 - 8) and 5 - 8 + 5
