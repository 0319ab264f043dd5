"""The backtest's peers (forecasting.peers): the naive-conformal rule and statsforecast AutoETS."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from forecasting import peers
from tests.ci import unavailable

STEP = pd.Timedelta("5min")


def series(values, start="2024-01-01"):
    return pd.Series(np.asarray(values, float), index=pd.date_range(start, periods=len(values), freq=STEP, tz="UTC"))


def test_naive_conformal_is_the_last_value_plus_the_quantiles_of_the_change_and_never_looks_ahead():
    rng = np.random.default_rng(0)
    a = series(50 + rng.normal(0, 1, 288 * 10))
    origin = a.index[288 * 9 - 1] + pd.Timedelta(0)  # 23:55 UTC: a 4-hour boundary next, so 7 days of leads
    f = peers.naive_conformal(a, [origin], "s")
    assert len(f) == 2016 and (f["issued_at"] == origin).all()
    assert np.allclose(f["p50"], a[origin])
    # the change over k steps of iid N(0, 1) noise is N(0, 2): p95 ~ last + 1.645 * sqrt(2)
    assert f["p95"].iloc[:12].sub(f["p50"].iloc[:12]).mean() == pytest.approx(1.645 * np.sqrt(2), rel=0.1)
    assert (f["p99"] >= f["p95"]).all() and (f["p95"] >= f["p90"]).all()
    b = a.copy()
    b[b.index > origin] = 1000.0  # another future
    pd.testing.assert_frame_equal(f, peers.naive_conformal(b, [origin], "s"))
    other = peers.naive_conformal(a, [origin + STEP * 12], "s")  # 00:55 is not on a 4-hour boundary: 1 hour
    assert len(other) == 12


def test_autoets_peer_forecasts_from_the_origin_only():
    try:
        import statsforecast  # noqa: F401
    except ImportError:
        unavailable("statsforecast is not installed (bash scripts/setup.sh bench)")
    t = np.arange(288 * 6)
    a = series(40 + 10 * np.sin(2 * np.pi * t / 288) + np.random.default_rng(1).normal(0, 0.5, len(t)))
    origin = a.index[288 * 5 - 1]
    f = peers.autoets(a, [origin], "s")
    assert len(f) == 2016 and (f["tier"] == "autoets").all()
    assert (f["p95"] >= f["p50"]).all()
    truth = a[(a.index > origin)].to_numpy()
    assert np.abs(f["p50"].to_numpy()[:12] - truth[:12]).mean() < 3  # it starts from the state at the origin
    b = a.copy()
    b[b.index > origin] = 0.0
    pd.testing.assert_frame_equal(f, peers.autoets(b, [origin], "s"))


def test_a_missing_statsforecast_is_said_not_hidden(monkeypatch):
    monkeypatch.setitem(sys.modules, "statsforecast", None)  # import statsforecast now raises ImportError
    monkeypatch.setitem(sys.modules, "statsforecast.models", None)
    a = series(np.arange(288 * 9, dtype=float))
    h5 = pd.DataFrame({"series_id": "s", "timestamp": a.index, "value": a.to_numpy()})
    got, notes = peers.peer_forecasts(h5, {"s": [a.index[-289]]})
    assert set(got) == {"naive_conformal"}
    assert len(notes) == 1 and "autoets not scored" in notes[0] and "setup.sh bench" in notes[0]


def test_a_series_too_short_for_a_peer_gets_an_empty_typed_frame():
    a = series(np.arange(100, dtype=float))  # shorter than two seasons: AutoETS issues nothing
    h5 = pd.DataFrame({"series_id": "s", "timestamp": a.index, "value": a.to_numpy()})
    got, notes = peers.peer_forecasts(h5, {"s": [a.index[50]]})
    assert got["autoets"].empty and str(got["autoets"]["issued_at"].dtype) == "datetime64[ns, UTC]"
    assert notes == ["autoets not scored on s: less than two days (576 steps) of history before its origins"]


def test_nanquantile_columns_is_numpys_nanquantile_to_the_bit():
    rng = np.random.default_rng(3)
    for trial in range(60):
        x = rng.normal(size=(int(rng.integers(1, 80)), int(rng.integers(1, 40))))
        if trial % 2:
            x = np.round(x)  # ties, as step-shaped GPU counts have
        x[rng.random(x.shape) < rng.random() * 0.9] = np.nan
        x[0] = rng.normal(size=x.shape[1])  # every column holds a value
        for q in (np.array([0.9, 0.95, 0.99]), np.array([0.0, 0.5, 1.0]), rng.random(4)):
            assert np.array_equal(peers.nanquantile_columns(x, q), np.nanquantile(x, q, axis=0))


@pytest.mark.slow
def test_autoets_with_a_daily_season_selects_what_the_full_search_selects():
    """With a 288-step season statsforecast estimates no seasonal state, so leaving the seasonal
    candidates out (peers.ETS_MODEL) changes no forecast."""
    try:
        from statsforecast.models import AutoETS
    except ImportError:
        unavailable("statsforecast is not installed (bash scripts/setup.sh bench)")
    t = np.arange(288 * 4)
    y = 40 + 10 * np.sin(2 * np.pi * t / 288) + np.random.default_rng(2).normal(0, 0.5, len(t))
    full = AutoETS(season_length=288).fit(y)
    fast = AutoETS(season_length=288, model=peers.ETS_MODEL).fit(y)
    assert full.model_["method"] == fast.model_["method"] and full.model_["method"].endswith(",N)")
    np.testing.assert_array_equal(full.predict(h=48, level=[90])["hi-90"], fast.predict(h=48, level=[90])["hi-90"])
