"""forecasting/calibration.py on small hand-made forecasts: split-conformal offsets per lead bucket,
their application, and the online calibration's use of realised errors only."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forecasting.combining.buckets import BUCKETS
from forecasting.combining.conformal import (
    apply_calibration,
    calibrate_online,
    first_in_band,
    lead_scale,
    learn_calibration,
)
from forecasting.types import QCOLS

T0 = pd.Timestamp("2024-01-01", tz="UTC")
STEP = pd.Timedelta("5min")
FIRST = BUCKETS[0][0]  # "1h:0min-15min"


def forecasts(n: int, lead: pd.Timedelta = STEP, p50: float = 10.0) -> pd.DataFrame:
    """``n`` origins 5 minutes apart, each forecasting one target ``lead`` ahead, every quantile at ``p50``."""
    issued = pd.date_range(T0, periods=n, freq=STEP)
    f = pd.DataFrame({"series_id": "s", "tier": "combined", "issued_at": issued, "timestamp": issued + lead})
    for q in QCOLS:
        f[q] = p50
    return f


def actuals(f: pd.DataFrame, resid) -> pd.Series:
    """Demand at each target of ``f``: its p50 plus ``resid`` (one per row)."""
    return pd.Series(f["p50"].to_numpy() + np.asarray(resid, float), index=pd.DatetimeIndex(f["timestamp"]))


def test_offsets_are_split_conformal_quantiles_of_the_residuals():
    f = forecasts(40)
    resid = np.random.default_rng(0).permutation(np.arange(1.0, 41.0))  # residuals 1..40 in any order
    off = learn_calibration(f, actuals(f, resid), borrow=None)
    assert list(off) == [FIRST]  # only the bucket that has rows
    c50, c90, c95, c99 = off[FIRST]
    assert c50 == 0.0  # the median is never moved
    # split conformal (Romano et al. 2019): at least the ceil((n + 1) q)-th smallest residual, so
    # p50 + c_q covers at least q of the calibration rows; 37th for 0.9, 39th for 0.95, the largest for 0.99
    assert 37 <= c90 <= 38 and 39 <= c95 <= 40 and c99 == 40
    for c, q in ((c90, 0.9), (c95, 0.95), (c99, 0.99)):
        assert np.mean(resid <= c) >= q


def test_too_few_rows_give_no_offsets_and_since_drops_older_rows():
    f = forecasts(24)
    a = actuals(f, np.full(24, 2.0))
    assert learn_calibration(f, a, borrow=None) == {FIRST: [0.0, 2.0, 2.0, 2.0]}
    assert learn_calibration(f.iloc[:23], a, borrow=None) == {}  # 23 < MIN_ROWS
    # rows whose target is not after `since` are left out: 20 remain, too few
    assert learn_calibration(f, a, since=f["timestamp"].iloc[3], borrow=None) == {}
    # targets not observed (NaN demand) are no rows either
    assert learn_calibration(f, a.where(a.index > f["timestamp"].iloc[0]), borrow=None) == {}


def test_apply_adds_each_buckets_offsets_to_p50_and_leaves_other_buckets():
    short = forecasts(3)
    long = forecasts(2, lead=pd.Timedelta("2h"), p50=20.0)  # bucket 24h:1h-3h, no offsets given
    long["p90"], long["p95"], long["p99"] = 25.0, 27.0, 30.0
    out = apply_calibration(pd.concat([short, long], ignore_index=True), {FIRST: [0.0, 1.5, 2.5, 4.0]})
    assert out.loc[:2, list(QCOLS)].to_numpy().tolist() == [[10.0, 11.5, 12.5, 14.0]] * 3
    assert out.loc[3:, list(QCOLS)].to_numpy().tolist() == [[20.0, 25.0, 27.0, 30.0]] * 2
    assert apply_calibration(short, {}) is short  # nothing to apply


def test_lead_scale_is_the_square_root_of_the_mid_lead_ratio():
    # 1h:15min-30min (mid 22.5 min) against 1h:0min-15min (mid 7.5 min): sqrt(3)
    assert lead_scale(1, 0) == pytest.approx(math.sqrt(3))
    assert lead_scale(4, 4) == 1.0
    assert [first_in_band(b) for b in range(len(BUCKETS))] == [0, 0, 0, 3, 3, 3, 3, 7, 7, 7, 7]


def test_online_calibration_waits_for_realised_errors_and_never_looks_ahead():
    n = 60
    f = forecasts(n)
    out = calibrate_online(f, actuals(f, np.full(n, 3.0)), borrow=None)
    # an origin sees the errors of targets at or before it: target i is at origin i + 1, so origin k
    # has k realised rows; below 24 the forecast is kept, from 24 on p90..p99 = p50 + 3 (every error is 3)
    assert (out.loc[:23, list(QCOLS)] == 10.0).all().all()
    assert (out.loc[24:, "p50"] == 10.0).all() and (out.loc[24:, ["p90", "p95", "p99"]] == 13.0).all().all()
    # demand after origin 40 changes: nothing issued at or before it may change
    resid = np.full(n, 3.0)
    resid[40:] = 50.0
    later = calibrate_online(f, actuals(f, resid), borrow=None)
    cut = f["issued_at"] <= f["timestamp"].iloc[39]
    pd.testing.assert_frame_equal(later[cut], out[cut])
    assert (later.loc[~cut, "p99"] > 13.0).any()  # and the new errors do reach the later origins
