"""benchmarks.fresh_hour: both readings of the next hour scored against the realised hour maxima."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.fresh_hour import shifted_hour_max, window_errors

T0 = pd.Timestamp("2024-01-01", tz="UTC")
STEP = pd.Timedelta("5min")


def _case(later_offset: float):
    """Demand 5 GPUs; forecasts every 4 h: persistence for the first hour, ``5 + later_offset`` after it."""
    actual = pd.Series(5.0, index=pd.date_range(T0, periods=2 * 288, freq=STEP))
    rows = []
    for o in pd.date_range(T0, periods=12, freq="4h"):
        k = np.arange(1, 73)
        p50 = np.where(k <= 12, 5.0, 5.0 + later_offset)
        rows.append(pd.DataFrame({"issued_at": o, "timestamp": o + k * STEP, "p50": p50, "p90": p50 + 1,
                                  "p95": p50 + 2, "p99": p50 + 3}))
    return actual, pd.concat(rows, ignore_index=True)


def test_the_shifted_reading_carries_the_later_rows_and_the_fresh_one_does_not():
    actual, fc = _case(3.0)
    r = window_errors(fc, actual, T0 + pd.Timedelta("1D"), T0 + pd.Timedelta("2D"))
    assert r["hours"] == 24 and r["fresh_1h"] == 0.0 and r["ratio"] == np.inf
    assert 0 < r["shifted_24h"] <= 3.0  # the hours 1-4 h after each origin read 5 + 3; hours right after, 5
    hours = pd.date_range(T0 + pd.Timedelta("1D"), periods=24, freq="1h")
    shifted = shifted_hour_max(fc, hours, actual)
    assert set(np.unique(shifted)) == {5.0, 8.0}


def test_equal_readings_tie():
    actual, fc = _case(0.0)
    r = window_errors(fc, actual, T0 + pd.Timedelta("1D"), T0 + pd.Timedelta("2D"))
    assert r["fresh_1h"] == r["shifted_24h"] == 0.0 and r["ratio"] == 1.0
