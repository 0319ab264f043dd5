"""The robust combination members (forecasting.tiers.robust): the recent median level, and
the last value reverting to it; their forecasts use only the history before each origin."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.combining.assemble import ROLLING_MODELS
from forecasting.tiers import make
from forecasting.tiers.robust import DAY_STEPS, LEVEL_DAYS, REVERT_TAU, profile_quantiles, robust_quantiles
from forecasting.types import QCOLS, SeriesMeta

META = {"p": SeriesMeta(timezone="UTC")}


def frame(values, start="2024-03-04") -> pd.DataFrame:
    ts = pd.date_range(start, periods=len(values), freq="5min", tz="UTC")
    return pd.DataFrame({"series_id": "p", "timestamp": ts, "value": np.asarray(values, dtype="float64")})


def spike_then_back() -> np.ndarray:
    """Four days at 10 GPUs, then the last hour at 40: a burst the median ignores."""
    return np.r_[np.full(4 * DAY_STEPS, 10.0), np.full(12, 40.0)]


def test_members_of_the_combination():
    assert {"level", "revert", "profile"} <= set(ROLLING_MODELS)


def test_level_is_the_recent_median_flat():
    f = make("level").fit(frame(spike_then_back()), META).predict(frame(spike_then_back()))
    assert len(f) == 2016
    assert np.allclose(f["p50"], 10.0)  # the 1-hour burst is 1/72 of the last 3 days: the median ignores it
    assert LEVEL_DAYS == 3.0


def test_revert_starts_at_the_last_value_and_decays_to_the_median():
    h = frame(spike_then_back())
    p50 = make("revert").fit(h, META).predict(h)["p50"].to_numpy()
    assert 39.0 < p50[0] <= 40.0  # one step on: still almost the last value
    assert np.all(np.diff(p50) <= 1e-12)  # monotone toward the level
    one_tau = int(REVERT_TAU * DAY_STEPS) - 1
    assert p50[one_tau] == pytest.approx(10.0 + 30.0 * np.exp(-1.0), rel=1e-6)  # e-folding after tau
    assert p50[-1] == pytest.approx(10.0, abs=0.05)


@pytest.mark.parametrize("name", ["level", "revert", "profile"])
def test_no_look_ahead(name):
    y = np.random.default_rng(3).integers(0, 30, 5 * DAY_STEPS).astype(float)
    h = frame(y)
    o = h["timestamp"].iloc[3 * DAY_STEPS]
    changed = h.copy()
    changed.loc[changed["timestamp"] > o, "value"] = 999.0
    m = make(name)
    a = m.predict(h, {"p": [o]})
    b = m.predict(changed, {"p": [o]})
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("case,y", [("constant", np.full(300, 16.0)), ("all_zero", np.zeros(300)),
                                    ("single_step", np.array([7.0])),
                                    ("gaps", np.r_[np.full(20, np.nan), 5.0, np.nan])])
def test_degenerate_inputs(case, y):
    q = robust_quantiles(y, 2016, LEVEL_DAYS, REVERT_TAU)
    assert q.shape == (2016, len(QCOLS)) and np.isfinite(q).all()
    last = y[np.isfinite(y)][-1]
    assert np.allclose(q[:, 0], last)  # nothing to revert to but the last value itself
    assert (np.diff(q, axis=1) >= -1e-9).all()


def test_no_observation_gives_zeros():
    assert np.allclose(robust_quantiles(np.full(10, np.nan), 12, LEVEL_DAYS, 0.0), 0.0)
    assert np.allclose(profile_quantiles(np.full(10, np.nan), 12), 0.0)


def test_profile_is_the_weekly_median_of_each_time_of_day():
    """A daily cycle (0 at night, 20 by day) with one odd day at 100: the profile keeps the
    cycle and ignores the odd day, where seasonal-naive (one day's lag) would copy it."""
    day = np.where((np.arange(DAY_STEPS) >= 96) & (np.arange(DAY_STEPS) < 216), 20.0, 0.0)
    y = np.tile(day, 8)
    y[-DAY_STEPS:] = 100.0  # the last day before the origin is odd
    h = frame(y)
    p50 = make("profile").predict(h)["p50"].to_numpy()
    assert len(p50) == 2016
    assert np.allclose(p50, np.tile(day, 7))
    # where the history is shorter than a week, the median of the days there are
    q = profile_quantiles(np.tile(day, 2)[: DAY_STEPS + 10], 24)
    assert np.allclose(q[:, 0], day[10:34])


def test_the_combination_moves_to_the_level_when_bursts_revert():
    """A pool at 10 GPUs with a 1-hour burst to 40 every 5 hours: a day ahead the last value is
    wrong whenever it was read in a burst, the 3-day median never is; the combination learns that
    (the reason the robust members exist)."""
    from forecasting.combining import weights as combination
    from tests.forecasting.combining.test_weights import actual_series, rolling

    t = np.arange(12 * DAY_STEPS)
    y = np.where(t % 60 < 12, 40.0, 10.0)
    a = actual_series(y)
    frames = {"naive": rolling(a, lambda h, o, k: robust_quantiles(h, k, LEVEL_DAYS, np.inf), name="naive"),
              "level": rolling(a, lambda h, o, k: robust_quantiles(h, k, LEVEL_DAYS, 0.0), name="level")}
    spec = combination.learn_combination(frames, a)
    day = spec["24h"]["24h:12h-24h"]["p50"]
    assert day["pinball"]["level"] < day["pinball"]["naive"]
    assert day["weights"]["level"] > 0.9, day
