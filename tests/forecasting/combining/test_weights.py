"""Combination per lead bucket and quantile (exponentially weighted losses), conformal calibration,
the peers, and the cross-series summary."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

from forecasting.backtest import summarise
from forecasting.combining import conformal
from forecasting.combining import weights as combination
from forecasting.combining.weights import hedge_weights
from forecasting.types import QCOLS, sanitise_quantiles

STEP = pd.Timedelta("5min")


def actual_series(values, start="2024-01-01"):
    return pd.Series(np.asarray(values, float), index=pd.date_range(start, periods=len(values), freq=STEP, tz="UTC"))


def rolling(actual: pd.Series, model, every="4h", lead_steps=288, name="m") -> pd.DataFrame:
    """Rolling forecasts of ``model(history_values, origin_pos, k)`` -> (k, 4) quantiles."""
    y = actual.to_numpy()
    rows = []
    step_every = int(pd.Timedelta(every) / STEP)
    for o in range(288, len(y) - 1, step_every):
        k = min(lead_steps, len(y) - 1 - o)
        q = model(y[: o + 1], o, k)
        ts = actual.index[o + 1:o + 1 + k]
        rows.append(pd.DataFrame({"series_id": "s", "tier": name, "issued_at": actual.index[o], "timestamp": ts,
                                  **{c: q[:, j] for j, c in enumerate(QCOLS)}}))
    return pd.concat(rows, ignore_index=True)


def naive(y, o, k):
    return np.tile([y[-1], y[-1] + 1, y[-1] + 2, y[-1] + 3], (k, 1)).astype(float)


def seasonal(y, o, k):
    v = np.array([y[len(y) - 288 + (i % 288)] for i in range(k)], float)
    return np.column_stack([v, v + 1, v + 2, v + 3])


def biased(y, o, k):
    """A model that forecasts the last value + 5: always worse than naive on a level series."""
    return naive(y, o, k) + 5.0


def test_persistence_wins_on_steps_and_seasonal_wins_on_a_daily_cycle():
    rng = np.random.default_rng(0)
    steps = np.repeat(rng.integers(0, 50, 60), 100)[:5760].astype(float)  # step-shaped demand, no cycle
    a = actual_series(steps)
    frames = {"naive": rolling(a, naive, name="naive"), "seasonal_naive": rolling(a, seasonal, name="seasonal_naive"),
              "biased": rolling(a, biased, name="biased")}
    spec = combination.learn_combination(frames, a)
    assert spec["24h"]["24h:1h-3h"]["p50"]["weights"]["naive"] > 0.9, spec["24h"]["24h:1h-3h"]
    # with an equal prior, in every bucket the member with the lowest loss carries the most weight
    for s in combination.learn_combination(frames, a, prior_naive=1 / 3)["24h"].values():
        best = min(s["p50"]["pinball"], key=s["p50"]["pinball"].get)
        assert max(s["p50"]["weights"], key=s["p50"]["weights"].get) == best

    t = np.arange(5760)
    cycle = 40 + 30 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 0.5, len(t))
    a2 = actual_series(np.round(cycle))
    frames2 = {"naive": rolling(a2, naive, name="naive"),
               "seasonal_naive": rolling(a2, seasonal, name="seasonal_naive")}
    spec2 = combination.learn_combination(frames2, a2)
    long = spec2["24h"]["24h:12h-24h"]["p50"]
    assert long["weights"]["seasonal_naive"] > 0.9, long
    assert combination.members(spec2)["24h:12h-24h"] == {"seasonal_naive": 1.0}


def test_weights_leave_the_prior_continuously_as_evidence_accumulates():
    hedge = functools.partial(hedge_weights, prior_naive=0.5)  # the mechanism, with half the prior on naive
    names = ["hourly", "naive", "seasonal_naive"]
    loss = np.array([0.8, 1.0, 1.3])  # hourly 20 % better than naive, seasonal-naive 30 % worse
    none = hedge(loss, 0.0, names)
    np.testing.assert_allclose(none, [0.25, 0.5, 0.25])  # no evidence: the prior, half on naive
    ws = [hedge(loss, d, names)[0] for d in (0.25, 0.5, 1, 2, 4, 8, 50)]
    assert all(b > a for a, b in zip(ws, ws[1:])), ws  # more days of the same record: more weight
    assert ws[0] < 0.5 < ws[-1] and ws[-1] > 0.95
    steps = np.diff([hedge(loss, d, names)[0] for d in np.linspace(0, 2, 41)])
    assert steps.max() < 0.05  # no jump: evidence is weighed, not tested
    # equal losses keep the prior; a member with no score gets no weight
    np.testing.assert_allclose(hedge(np.ones(3), 10.0, names), [0.25, 0.5, 0.25])
    assert hedge(np.array([np.nan, 1.0, 1.0]), 5.0, names)[0] == 0.0


def test_a_better_tier_takes_over_online_after_a_few_days():
    """Naive is kept while there is no record; a member that is steadily better gains weight day
    by day, and the combined p50 beats naive once the evidence is there."""
    rng = np.random.default_rng(6)
    t = np.arange(288 * 14)
    y = np.round(40 + 30 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 1, len(t)))
    a = actual_series(y)
    frames = {"naive": rolling(a, naive, name="naive"), "seasonal_naive": rolling(a, seasonal, name="seasonal_naive")}
    c, mean_w = combination.combine_online(frames, a, "s")
    lead = c["timestamp"] - c["issued_at"]
    day = (c["issued_at"] - a.index[0]) // pd.Timedelta("1D")
    f = frames["seasonal_naive"].set_index(["issued_at", "timestamp"])["p50"]
    n = frames["naive"].set_index(["issued_at", "timestamp"])["p50"]
    key = list(zip(c["issued_at"], c["timestamp"]))
    gap = f.loc[key].to_numpy() - n.loc[key].to_numpy()
    late = (lead > pd.Timedelta("12h")).to_numpy() & (np.abs(gap) > 5)
    share = (c["p50"].to_numpy()[late] - n.loc[key].to_numpy()[late]) / gap[late]  # weight on seasonal-naive
    d = day.to_numpy()[late]
    first = (c["issued_at"] == c["issued_at"].min()).to_numpy()[late]
    # the prior: no 12-24 h target realised yet
    assert np.median(share[first]) == pytest.approx(1 - combination.PRIOR_NAIVE["24h"], abs=0.01)
    assert np.median(share[d >= 8]) > 0.95
    assert mean_w["24h"]["seasonal_naive"] > 0.5


def test_online_combination_and_calibration_never_look_ahead():
    rng = np.random.default_rng(1)
    t = np.arange(288 * 16)
    y = np.round(40 + 30 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 3, len(t)))
    a = actual_series(y)
    cut = a.index[288 * 11]  # a midnight UTC
    y2 = y.copy()
    y2[288 * 11:] = y2[288 * 11:][::-1] * 3  # the future changes completely
    a2 = actual_series(y2)

    def run(series):
        frames = {"naive": rolling(series, naive, name="naive"),
                  "seasonal_naive": rolling(series, seasonal, name="seasonal_naive")}
        c, _ = combination.combine_online(frames, series, "s")
        return c, conformal.calibrate_online(c, series)

    c1, k1 = run(a)
    c2, k2 = run(a2)
    before1, before2 = c1[c1["issued_at"] < cut], c2[c2["issued_at"] < cut]
    # forecasts issued before the cut only use data before it (their model inputs and the
    # realised errors behind their combination and calibration)
    pd.testing.assert_frame_equal(before1.reset_index(drop=True), before2.reset_index(drop=True))
    kb1, kb2 = k1[k1["issued_at"] < cut], k2[k2["issued_at"] < cut]
    pd.testing.assert_frame_equal(kb1.reset_index(drop=True), kb2.reset_index(drop=True))
    # and the changed future does change what is issued after it
    after1, after2 = k1[k1["issued_at"] >= cut + pd.Timedelta("1D")], k2[k2["issued_at"] >= cut + pd.Timedelta("1D")]
    assert not np.allclose(after1["p95"].to_numpy(), after2["p95"].to_numpy())


def test_conformal_calibration_reaches_nominal_coverage_out_of_sample_and_keeps_p50():
    rng = np.random.default_rng(2)
    n = 288 * 21
    y = np.round(50 + rng.normal(0, 5, n))
    a = actual_series(y)

    def overconfident(hist, o, k):  # quantiles far too narrow: p95 = mean + 1
        return np.tile([50.0, 50.5, 51.0, 51.5], (k, 1))

    f = rolling(a, overconfident, every="1h", lead_steps=12)
    raw_cov = float((a.reindex(pd.DatetimeIndex(f["timestamp"])).to_numpy() <= f["p95"].to_numpy()).mean())
    cal = conformal.calibrate_online(f, a)
    later = cal[cal["issued_at"] >= a.index[0] + pd.Timedelta("15D")]
    yy = a.reindex(pd.DatetimeIndex(later["timestamp"])).to_numpy()
    cov = float((yy <= later["p95"].to_numpy()).mean())
    assert raw_cov < 0.7
    assert 0.92 <= cov <= 0.98, cov
    np.testing.assert_array_equal(cal["p50"].to_numpy(), f["p50"].to_numpy())
    # the same offsets, learned once, for a plan forecast
    offs = conformal.learn_calibration(f, a)
    assert set(offs) == {"1h:0min-15min", "1h:15min-30min", "1h:30min-1h"}
    assert all(o[0] == 0.0 and o[2] > 5 for o in offs.values())


def test_a_too_good_narrow_forecast_is_narrowed_back():
    """Offsets may narrow as well as widen: too-wide upper quantiles come down."""
    rng = np.random.default_rng(3)
    a = actual_series(np.round(50 + rng.normal(0, 2, 288 * 20)))

    def too_wide(hist, o, k):
        return np.tile([50.0, 80.0, 90.0, 100.0], (k, 1))

    f = rolling(a, too_wide, every="1h", lead_steps=12)
    cal = conformal.calibrate_online(f, a)
    late = cal[cal["issued_at"] >= a.index[0] + pd.Timedelta("16D")]
    assert late["p95"].max() < 60


def test_sanitise_keeps_p50_when_an_upper_quantile_falls_below_it():
    q = pd.DataFrame({"p50": [10.0, np.nan, -1.0], "p90": [8.0, 3.0, 2.0], "p95": [12.0, 2.0, 1.0],
                      "p99": [11.0, 5.0, 100.0]})
    out = sanitise_quantiles(q, upper=50.0)
    assert out["p50"].tolist() == [10.0, 0.0, 0.0]
    arr = out[list(QCOLS)].to_numpy()
    assert (np.diff(arr, axis=1) >= 0).all()
    assert arr.max() <= 50.0 and arr.min() >= 0.0


def test_summary_counts_and_relative_mase():
    scores = {
        "a": {"combined": {"1h": {"mase": 1.0, "coverage_p95": 0.95, "idle_ratio_p95": 0.2}},
              "naive": {"1h": {"mase": 2.0, "coverage_p95": 0.9}}},
        "b": {"combined": {"1h": {"mase": 2.0, "coverage_p95": 0.99, "idle_ratio_p95": 0.4}},
              "naive": {"1h": {"mase": 1.0, "coverage_p95": 0.9}}},
    }
    s = summarise(scores)["1h"]
    assert s["series"] == 2 and s["best_or_tied"] == 1 and s["strictly_best"] == 1
    assert s["geomean_relative_mase"]["naive"] == pytest.approx(1.0)
    assert s["coverage_p95_in_093_097"] == 1
    assert s["median_idle_ratio_p95"] == pytest.approx(0.3)


def test_adaptive_level_recovers_coverage_after_the_noise_grows():
    """After a shift the trailing window still holds calm errors; the adaptive level
    (Gibbs & Candès 2021) asks for a higher quantile of them, plain split conformal does not."""
    rng = np.random.default_rng(4)
    n = 288 * 24
    noise = np.where(np.arange(n) < 288 * 14, 2.0, 6.0)
    a = actual_series(np.round(50 + rng.normal(0, 1, n) * noise))

    def flat(hist, o, k):
        return np.tile([50.0, 52.0, 53.0, 55.0], (k, 1))

    f = rolling(a, flat, every="1h", lead_steps=12)
    shift = a.index[0] + pd.Timedelta("14D")

    def cov_after(cal):
        late = cal[(cal["issued_at"] >= shift + pd.Timedelta("2D")) & (cal["issued_at"] < shift + pd.Timedelta("7D"))]
        return float((a.reindex(pd.DatetimeIndex(late["timestamp"])).to_numpy() <= late["p95"].to_numpy()).mean())

    plain = cov_after(conformal.calibrate_online(f, a, gamma=0.0, borrow=None))
    adaptive = cov_after(conformal.calibrate_online(f, a, borrow=None))
    assert plain < 0.9
    assert adaptive > plain + 0.03
    # the first bucket's recent errors, scaled by lead time, reach the longer buckets sooner
    borrowed = cov_after(conformal.calibrate_online(f, a, gamma=0.0))
    assert borrowed > plain + 0.01


def test_short_lead_errors_are_scaled_by_the_square_root_of_the_lead_ratio():
    from forecasting.combining.buckets import BUCKETS

    label = [b[0] for b in BUCKETS]
    first, last = label.index("7d:1D-2D"), label.index("7d:5D-7D")
    assert conformal.first_in_band(last) == first and conformal.first_in_band(first) == first
    assert conformal.lead_scale(last, first) == pytest.approx(np.sqrt(6 / 1.5))


def test_a_member_missing_from_the_plan_is_dropped_and_the_weights_renormalised():
    a = actual_series(np.round(40 + 10 * np.sin(np.arange(288 * 6) * 2 * np.pi / 288)))
    frames = {"naive": rolling(a, naive, name="naive"), "seasonal_naive": rolling(a, seasonal, name="seasonal_naive")}
    spec = {"24h": {"24h:12h-24h": {q: {"weights": {"seasonal_naive": 1.0}} for q in QCOLS}}}
    got = combination.apply_combination({"naive": frames["naive"], "seasonal_naive": frames["seasonal_naive"].iloc[:0]},
                                        spec, "s")
    lead = got["timestamp"] - got["issued_at"]
    assert len(got) and (lead > pd.Timedelta("12h")).all()
    ref = frames["naive"].set_index(["issued_at", "timestamp"]).loc[list(zip(got["issued_at"], got["timestamp"]))]
    np.testing.assert_allclose(got["p50"].to_numpy(), ref["p50"].to_numpy())


def test_actuals_with_duplicate_timestamps_are_refused():
    a = actual_series(np.arange(288 * 3, dtype=float))
    dup = pd.concat([a, a.iloc[:1]])
    with pytest.raises(ValueError, match="duplicate timestamps"):
        combination.combine_online({"naive": rolling(a, naive, name="naive")}, dup, "s")


def test_strict_json_turns_non_finite_numbers_into_null():
    import json

    from capplan.report import jsonout
    text = jsonout.dumps({"coverage": float("nan"), "x": [np.float64("inf"), 1.5, np.int64(2)],
                          "t": pd.Timestamp("2024-01-01", tz="UTC")})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}")) == \
        {"coverage": None, "x": [None, 1.5, 2], "t": "2024-01-01T00:00:00+00:00"}


def test_rolling_forecasts_are_bounded_by_the_history_known_at_their_origin():
    from forecasting.bounds import sanitise_rolling

    a = actual_series(np.r_[np.zeros(288 * 2), np.full(288 * 2, 40.0)])
    h5 = pd.DataFrame({"series_id": "s", "timestamp": a.index, "value": a.to_numpy()})

    def big(hist, o, k):
        return np.tile([500.0, 600.0, 700.0, 800.0], (k, 1))

    out = sanitise_rolling(rolling(a, big, every="4h", lead_steps=12), h5)
    before = out[out["issued_at"] < a.index[288 * 2]]
    after = out[out["issued_at"] >= a.index[288 * 2]]
    assert len(before) and (before[list(QCOLS)].to_numpy() == 0).all()  # nothing seen yet: nothing forecast
    assert len(after) and after[list(QCOLS)].to_numpy().max() == 120.0  # 3 x the 40 GPUs seen so far


def test_the_learning_rate_is_set_per_lead_band():
    from forecasting.combining.weights import ETA, band_eta

    assert band_eta(ETA, "1h") > band_eta(ETA, "7d") > band_eta(ETA, "24h")
    assert band_eta(3.0, "7d") == 3.0  # one rate for every band
    names = ["hourly", "naive"]
    loss = np.array([0.9, 1.0])  # 10 % better than naive for one day
    fast = hedge_weights(loss, 1.0, names, band_eta(ETA, "1h"), prior_naive=0.5)[0]
    slow = hedge_weights(loss, 1.0, names, band_eta(ETA, "24h"), prior_naive=0.5)[0]
    assert fast > 0.85 > 0.6 > slow > 0.5


def test_the_adaptive_level_stops_at_its_floor_after_a_run_of_misses():
    """Demand that keeps rising past a flat forecast misses every band the trailing errors
    give, so the adaptive level (Gibbs & Candès 2021) runs past 1, where the offset is the
    largest error in the window; the floor keeps the miscoverage at or above ``floor`` x
    nominal, so the p95 level stays <= 1 - floor x 0.05."""
    n = 288 * 10
    a = actual_series(np.round(50 + np.arange(n) / 10))

    def flat(hist, o, k):
        return np.tile([50.0, 52.0, 53.0, 55.0], (k, 1))

    f = rolling(a, flat, every="1h", lead_steps=12)
    free, floored = {}, {}
    conformal.calibrate_online(f, a, gamma=0.05, borrow=None, floor=None, levels_out=free)
    conformal.calibrate_online(f, a, gamma=0.05, borrow=None, floor=0.2, levels_out=floored)
    p95 = QCOLS.index("p95")
    assert max(v[p95] for v in free.values()) > 1.0
    assert max(v[p95] for v in floored.values()) == pytest.approx(1 - 0.2 * 0.05)


def test_a_prior_of_one_on_naive_keeps_the_band_at_naive_whatever_the_evidence():
    import warnings

    from forecasting.combining.weights import PRIOR_NAIVE, band_eta

    names = ["hourly", "naive"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log(0) of the zero prior weights must not warn
        w = hedge_weights(np.array([0.5, 1.0]), 10.0, names, 20.0, prior_naive=1.0)
    np.testing.assert_array_equal(w, [0.0, 1.0])
    assert band_eta(PRIOR_NAIVE, "24h") < 1.0  # the longer bands still learn from the record


def test_at_one_hour_the_prior_is_shared_by_naive_and_the_hourly_tier_alone():
    from forecasting.combining.weights import ETA, PRIOR_MEMBERS, PRIOR_NAIVE, band_eta, prior

    names = ["hourly", "daily", "seasonal_naive", "naive"]
    p = prior(names, PRIOR_NAIVE["1h"], PRIOR_MEMBERS["1h"])
    np.testing.assert_allclose(p, [1 - PRIOR_NAIVE["1h"], 0.0, 0.0, PRIOR_NAIVE["1h"]])
    np.testing.assert_allclose(prior(names, 0.4), [0.2, 0.2, 0.2, 0.4])  # other bands: every member
    # a better hourly tier takes the band within a day of evidence; a better member with no prior cannot
    loss = np.array([0.8, 0.5, 2.0, 1.0])
    w = hedge_weights(loss, 1.0, names, band_eta(ETA, "1h"), PRIOR_NAIVE["1h"], PRIOR_MEMBERS["1h"])
    assert w[0] > 0.95 and w[1] == 0.0
    # no members named present: the rest goes to every other member, as before
    np.testing.assert_allclose(prior(["daily", "naive"], 0.5, ("hourly",)), [0.5, 0.5])
