"""Tier faults: every fallback is recorded, degenerate inputs give sane forecasts.

Each test forces one fallback path of one tier with a small input and finds the
stated reason in the tier's ``fallbacks`` (what the report's ``fallbacks`` is built from).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecasting.regularise import hourly_columns
from forecasting.tiers import hourly_ets, make
from forecasting.tiers.base import series_values
from forecasting.tiers.naive import naive_quantiles
from forecasting.types import QCOLS, SeriesMeta

DATA = Path(__file__).resolve().parents[1] / "data"
LSTM_OPTS = {"epochs": 1, "units": 4, "max_windows": 64}


def frame(values, step="5min", start="2024-03-04", sid="p") -> pd.DataFrame:
    ts = pd.date_range(start, periods=len(values), freq=step, tz="UTC")
    return pd.DataFrame({"series_id": sid, "timestamp": ts, "value": np.asarray(values, dtype="float64")})


def mult_pool() -> pd.DataFrame:
    d = pd.read_csv(DATA / "multiplicative_pool_5min.csv.gz")
    return frame(d["value"].to_numpy())


META = {"p": SeriesMeta(timezone="Asia/Shanghai")}


# -- hourly (ETS) -------------------------------------------------------------------------------
def test_hourly_ets_bands_are_its_own_and_free_of_the_seed():
    """The input that made the old level model pick a multiplicative ETS whose interval
    simulation raised and silently became naive: now the tier's own exact bands are used,
    with no fallback, and they are the same whatever the run's seed."""
    h = mult_pool()
    m = make("hourly", seed=3).fit(h, META)
    f = m.predict(h)
    assert m.fallbacks == {}
    naive = naive_quantiles(h["value"].to_numpy(), 12)
    assert not np.allclose(f[list(QCOLS)].to_numpy(), naive)
    other = make("hourly", seed=11).fit(h, META).predict(h)
    assert np.array_equal(f[list(QCOLS)].to_numpy(), other[list(QCOLS)].to_numpy())
    assert (np.diff(f[list(QCOLS)].to_numpy(), axis=1) > 0).all()  # p50 < p90 < p95 < p99


@pytest.mark.parametrize("on,seasonal", [("changes", False), ("changes", True), ("level", False)])
def test_hourly_ets_exact_bands_match_statsmodels_simulation(on, seasonal):
    """:func:`hourly_ets.change_sum_sd` and :func:`hourly_ets.level_sd` against statsmodels' own
    simulation of the same fitted model (60,000 paths, so the simulated sd's standard error is
    about 0.3 %; changes summed over the lead): within 1 % at every lead."""
    y = mult_pool()["value"].to_numpy()[-865:]
    spec = dict(error="add", trend=None, damped_trend=False, seasonal=None, on=on)
    if seasonal:
        spec.update(seasonal="add", seasonal_periods=hourly_ets.SEASON)
    res = hourly_ets._build(y, spec).fit(disp=False, maxiter=200)
    paths = np.asarray(res.simulate(12, anchor="end", repetitions=60_000, rng=np.random.default_rng(0)))
    paths = paths.reshape(12, -1)
    simulated = (np.cumsum(paths, axis=0) if on == "changes" else paths).std(axis=1)
    alpha = float(np.asarray(res.params)[res.model.param_names.index("smoothing_level")])
    sd = hourly_ets.change_sum_sd if on == "changes" else hourly_ets.level_sd
    assert np.allclose(sd(np.sqrt(res.scale), alpha, 12), simulated, rtol=0.01)


def test_hourly_ets_reads_a_noisy_steady_level_as_a_level_and_beats_naive():
    """Noise around a steady level (a web service's request rate): the level model wins the
    AICc, smooths the noise out (weight well below 1) and its 1-hour p50 beats the last value
    out of sample; on a step-shaped pool the tier forecasts the last value (whichever reading
    fits it), not a smoothed level that lags the steps."""
    rng = np.random.default_rng(1)
    y = 100.0 + rng.normal(0.0, 5.0, 864 + 600)
    h = frame(y[:864])
    m = make("hourly").fit(h, META)
    assert m.models["p"]["spec"]["on"] == "level"
    later = frame(y)
    origins = list(later["timestamp"].iloc[864:-12:12])
    f = m.predict(later, origins={"p": origins})
    actual = later.set_index("timestamp")["value"]
    err = np.abs(f["p50"].to_numpy() - actual.reindex(f["timestamp"]).to_numpy()).mean()
    last = actual.reindex(pd.DatetimeIndex(f["issued_at"])).to_numpy()
    naive_err = np.abs(last - actual.reindex(f["timestamp"]).to_numpy()).mean()
    assert err < 0.8 * naive_err
    steps = frame(np.repeat([10.0, 14.0, 12.0, 18.0, 16.0, 20.0], 150))
    stepped = make("hourly").fit(steps, META)
    assert stepped.fallbacks == {}
    np.testing.assert_allclose(stepped.predict(steps)["p50"], 20.0, atol=0.05)


def test_hourly_fallback_short_history():
    m = make("hourly").fit(frame([3.0] * 10 + [4.0] * 10), META)
    m.predict(frame([3.0] * 10 + [4.0] * 10))
    assert "20 points < 36" in m.fallbacks["p"]


def test_hourly_fallback_constant_history():
    m = make("hourly").fit(frame([16.0] * 300), META)
    f = m.predict(frame([16.0] * 300))
    assert "constant history" in m.fallbacks["p"]
    assert np.allclose(f[list(QCOLS)].to_numpy(), 16.0)


def test_hourly_fallback_non_finite_prediction():
    h = mult_pool()
    m = make("hourly").fit(h, META)
    later = pd.concat([h, frame([np.inf], start=h["timestamp"].iloc[-1] + pd.Timedelta("5min"))], ignore_index=True)
    f = m.predict(later)
    assert "non-finite" in m.fallbacks["p"]
    assert len(f) == 12


def test_hourly_fallback_no_candidate(monkeypatch):
    def broken(y, spec):
        raise ValueError("forced failure")

    monkeypatch.setattr(hourly_ets, "_build", broken)
    m = make("hourly").fit(mult_pool(), META)
    assert "no ETS candidate" in m.fallbacks["p"]
    assert any("forced failure" in w for w in m.warnings["p"])


# -- daily (LSTM) --------------------------------------------------------------------------------
def test_daily_constant_pool_is_its_level():
    h = frame([16.0] * 240, step="1h")
    m = make("daily", seed=1, **LSTM_OPTS).fit(h, META)
    f = m.predict(h)
    assert np.allclose(f[list(QCOLS)].to_numpy(), 16.0)
    assert "constant" in m.fallbacks["p"]


def test_daily_fallback_too_little_history():
    h = frame(np.arange(100.0) % 7, step="1h")
    m = make("daily", **LSTM_OPTS).fit(h, META)
    f = m.predict(h)
    assert m.model is None and "too little hourly history" in m.fallbacks["p"]
    assert len(f) == 24


@pytest.mark.slow  # fits LSTM networks
def test_daily_fallback_short_context_at_an_origin():
    rng = np.random.default_rng(0)
    h = frame(10 + rng.integers(0, 5, 240).astype(float), step="1h")
    m = make("daily", **LSTM_OPTS).fit(h, META)
    assert m.model is not None
    m.predict(h, {"p": [h["timestamp"].iloc[50]]})
    assert "hours of context" in m.fallbacks["p"]


@pytest.mark.slow  # fits LSTM networks
def test_daily_learns_a_daily_cycle_naive_cannot():
    # three pools with the same daily cycle at different sizes: the global model, even tiny and
    # briefly trained, forecasts the cycle (its skip path holds yesterday) better than the last value
    t = np.arange(480)
    rng = np.random.default_rng(2)
    parts = [frame(k * (30 + 8 * np.sin(2 * np.pi * (t % 24) / 24)) + rng.normal(0, 0.3 * k, 480), step="1h",
                   sid=f"p{k}") for k in (1, 2, 3)]
    h = pd.concat(parts, ignore_index=True)
    meta = {f"p{k}": SeriesMeta() for k in (1, 2, 3)}
    cut = h["timestamp"].iloc[455]
    m = make("daily", seed=1, epochs=8, units=4, max_windows=512).fit(h[h["timestamp"] <= cut], meta)
    f = m.predict(h, {s: [cut] for s in meta})
    truth = h[h["timestamp"] > cut].set_index(["series_id", "timestamp"])["value"]
    got = f.set_index(["series_id", "timestamp"])["p50"]
    last = h[h["timestamp"] == cut].set_index("series_id")["value"]
    err = (got - truth.reindex(got.index)).abs().mean()
    naive_err = (truth.reindex(got.index) - got.index.get_level_values(0).map(last).to_numpy()).abs().mean()
    assert err < 0.7 * naive_err, (err, naive_err)


# -- weekly (Prophet) ----------------------------------------------------------------------------
def test_weekly_fallback_short_history():
    h = frame([5.0, 6.0] * 20, step="1h")
    m = make("weekly", uncertainty_samples=20).fit(h, META)
    f = m.predict(h)
    assert "40 hours < 72" in m.fallbacks["p"]
    assert len(f) == 168


def test_weekly_fallback_optimiser_fails_twice(monkeypatch):
    from prophet import Prophet

    def fail(self, df, **kw):
        raise RuntimeError("forced optimiser failure")

    monkeypatch.setattr(Prophet, "fit", fail)
    m = make("weekly", uncertainty_samples=20).fit(frame(np.arange(100.0) % 24, step="1h"), META)
    assert "failed twice" in m.fallbacks["p"]
    assert len(m.warnings["p"]) == 2


def _daily_cycle(n: int, noise: float, seed: int = 3) -> np.ndarray:
    t = np.arange(n)
    return 30 + 8 * np.sin(2 * np.pi * (t % 24) / 24) + np.random.default_rng(seed).normal(0, noise, n)


def test_weekly_keeps_an_informative_shape():
    # 21 days of a clean daily cycle: the holdout week shows Prophet's shape is worth keeping
    h = frame(_daily_cycle(504, 0.3), step="1h")
    m = make("weekly", uncertainty_samples=40).fit(h, META)
    assert sum(m.shrink["p"]) > 0.8, m.shrink
    f = m.predict(h)
    t = np.arange(504, 504 + 168)
    assert np.median(np.abs(f["p50"].to_numpy() - (30 + 8 * np.sin(2 * np.pi * (t % 24) / 24)))) < 1.5


def test_weekly_follows_level_shifts_that_do_not_revert():
    # a pool that steps up or down at random every half day (a random walk of levels): Prophet's
    # flat level (the history's mean) predicted nothing on the holdout, so the forecast starts
    # from the last reading instead
    rng = np.random.default_rng(11)
    y = np.repeat(50 + np.cumsum(rng.choice([-6.0, 6.0], 42)), 12)
    h = frame(y, step="1h")
    m = make("weekly", uncertainty_samples=40).fit(h, META)
    assert m.shrink["p"][1] < 0.5, m.shrink
    f = m.predict(h)
    assert abs(f["p50"].iloc[0] - y[-1]) < abs(np.mean(y) - y[-1]) / 2 + 1, (f["p50"].iloc[0], y[-1], np.mean(y))


def test_weekly_shrinks_a_shape_without_information():
    # independent noise around 10: Prophet's daily and weekly shapes carry nothing out of sample
    y = 10 + np.random.default_rng(7).normal(0, 1, 504)
    m = make("weekly", uncertainty_samples=40).fit(frame(y, step="1h"), META)
    assert m.shrink["p"][0] < 0.5, m.shrink
    f = m.predict(frame(y, step="1h"))
    assert np.abs(f["p50"].to_numpy() - 10).max() < np.abs(y[-1] - 10) + 1


def test_weekly_without_a_holdout_week_says_so():
    m = make("weekly", uncertainty_samples=20).fit(frame(_daily_cycle(120, 0.5), step="1h"), META)
    assert m.shrink["p"] == (1.0, 0.0)
    assert any("before the holdout week" in w for w in m.warnings["p"])


# -- degenerate inputs, every tier ---------------------------------------------------------------
DEGENERATE = {
    "constant": lambda n: np.full(n, 16.0),
    "all_zero": lambda n: np.zeros(n),
    "single_step": lambda n: np.array([7.0]),
    "very_short": lambda n: np.array([4.0, 5.0, 4.0]),
}


@pytest.mark.parametrize("tier", ["hourly", "daily", "weekly"])
@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_degenerate_inputs_give_sane_forecasts(tier, case):
    step = "5min" if tier == "hourly" else "1h"
    n = 2880 if tier == "hourly" else 240  # 10 days
    y = DEGENERATE[case](n)
    h = frame(y, step=step)
    opts = LSTM_OPTS if tier == "daily" else ({"uncertainty_samples": 50} if tier == "weekly" else {})
    m = make(tier, seed=2, **opts).fit(h, META)
    f = m.predict(h)
    q = f[list(QCOLS)].to_numpy()
    assert len(f) == m.horizon and np.isfinite(q).all()
    # the median stays within the history's range (widened by 5 %), the bands within 3x its top (the plan's cap)
    lo, hi = y.min(), y.max()
    assert (q[:, 0] >= lo - 0.05 * max(hi, 1) - 1e-9).all() and (q[:, 0] <= hi + 0.05 * max(hi, 1) + 1e-9).all()
    assert (np.diff(q, axis=1) >= -1e-9).all()
    if case in ("single_step", "very_short"):  # too few points to know a spread: the median is the last value
        assert np.allclose(q[:, 0], y[-1])
    else:
        assert (q[:, 3] <= 3 * max(hi, 1)).all()
    # a degenerate input that a tier cannot model is a stated fallback, never silent
    # (Prophet fits a flat history as a flat trend: a model, no fallback)
    if tier != "weekly" or case in ("single_step", "very_short"):
        assert "p" in m.fallbacks, (tier, case)


# -- save / load (the tier interface; in the spirit of prophet's test_serialize.py) ----------------
def _hourly_data():
    rng = np.random.default_rng(5)
    t = np.arange(240)
    return frame(30 + 8 * np.sin(2 * np.pi * (t % 24) / 24) + rng.normal(0, 1, 240), step="1h")


@pytest.mark.parametrize("tier", ["hourly", "daily", "weekly"])
def test_save_load_round_trip(tier, tmp_path):
    import json

    from forecasting.tiers.base import ModelFileError

    h = mult_pool() if tier == "hourly" else _hourly_data()
    opts = LSTM_OPTS if tier == "daily" else ({"uncertainty_samples": 40} if tier == "weekly" else {})
    m = make(tier, seed=4, **opts).fit(h, META)
    m.scores = {"mase_24h": 0.9}
    assert m.fitted_series() == ["p"]
    path = m.save(tmp_path / "v1")
    doc = json.loads(path.read_text())
    assert doc["data_range"]["p"] == [h["timestamp"].iloc[0].isoformat(), h["timestamp"].iloc[-1].isoformat()]
    assert doc["scores"] == {"mase_24h": 0.9} and "pandas" in doc["versions"] and doc["series"] == ["p"]
    assert not any(p.suffix in (".pkl", ".pickle") for p in (tmp_path / "v1").iterdir())
    m2 = make(tier, seed=4, **opts).load(tmp_path / "v1")
    assert m2.fitted_series() == ["p"] and m2.data_range == m.data_range
    a, b = m.predict(h), m2.predict(h)
    assert np.allclose(a[list(QCOLS)].to_numpy(), b[list(QCOLS)].to_numpy(), rtol=1e-6)
    # a model fitted with another option or run seed is refused, so the configured ones apply (the caller refits)
    changed = {"daily": ("members", 2), "weekly": ("holdout", False), "hourly": ("fit_window", 500)}[tier]
    with pytest.raises(ModelFileError, match=f"other options: {changed[0]} "):
        make(tier, seed=4, **{**opts, changed[0]: changed[1]}).load(tmp_path / "v1")
    if tier != "hourly":  # the ETS fit draws nothing; the LSTM's weights and Prophet's samples do
        with pytest.raises(ModelFileError, match="seed 4 \\(now 5\\)"):
            make(tier, seed=5, **opts).load(tmp_path / "v1")
    unrecorded = json.loads(path.read_text())
    del unrecorded["fitted_with"]  # saved before the options were recorded: refitted once
    path.write_text(json.dumps(unrecorded))
    with pytest.raises(ModelFileError, match="unrecorded"):
        make(tier, seed=4, **opts).load(tmp_path / "v1")
    path.write_text(json.dumps({**unrecorded, "fitted_with": ["not", "a", "mapping"]}))  # a damaged record
    with pytest.raises(ModelFileError, match="unrecorded"):
        make(tier, seed=4, **opts).load(tmp_path / "v1")
    # a model saved by another tier, or a broken file, is refused with a reason (the caller refits)
    other = "weekly" if tier != "weekly" else "hourly"
    with pytest.raises(ModelFileError, match="tier/arch/format"):
        make(other).load(tmp_path / "v1")
    (tmp_path / "v1" / "forecaster.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="no readable"):
        make(tier, **opts).load(tmp_path / "v1")


@pytest.mark.slow  # fits the daily and weekly tiers twice
@pytest.mark.parametrize("tier", ["daily", "weekly"])
def test_fit_final_reuses_fresh_models_and_refits_broken_ones(tier, tmp_path):
    from forecasting.registry import ModelRegistry
    from forecasting.registry_fit import fit_final

    h = _hourly_data()
    opts = LSTM_OPTS if tier == "daily" else {"uncertainty_samples": 40}
    reg = ModelRegistry(tmp_path / "models")
    m1, log1 = fit_final(tier, make(tier, seed=1, **opts), h, META, reg)
    assert log1["fitted"] == ["p"] and log1["reused"] == []
    m2, log2 = fit_final(tier, make(tier, seed=1, **opts), h, META, reg)
    assert log2["reused"] == ["p"] and log2["fitted"] == [] and log2["versions"] == log1["versions"]
    assert np.allclose(m1.predict(h)[list(QCOLS)].to_numpy(), m2.predict(h)[list(QCOLS)].to_numpy(), rtol=1e-6)
    # another run seed (capplan plan --seed 2) refits instead of reusing seed 1's model, and says so
    _, log_s = fit_final(tier, make(tier, seed=2, **opts), h, META, reg)
    assert log_s["fitted"] == ["p"] and log_s["reused"] == []
    assert any("fitted with other options: seed 1 (now 2)" in w for w in reg.warnings)
    for f in (tmp_path / "models" / tier).rglob("forecaster.json"):
        f.write_text("{broken")
    _, log3 = fit_final(tier, make(tier, seed=2, **opts), h, META, reg)
    assert log3["fitted"] == ["p"] and any("could not be loaded" in w for w in reg.warnings)


def test_shrinkage_toward_naive_keeps_only_informative_changes():
    from forecasting.tiers.daily_lstm import lead_shrinkage
    from forecasting.tiers.hourly_ets import change_shrinkage

    rng = np.random.default_rng(0)
    actual = rng.normal(0, 1, (400, 24))
    ab = lead_shrinkage(actual.copy(), actual)  # perfect predictions are kept whole
    assert np.allclose(ab[:, 1], 1.0) and np.allclose(ab[:, 0], 0.0)
    noise = rng.normal(0, 1, (400, 24))  # predictions unrelated to what happened: mostly dropped
    assert lead_shrinkage(noise, actual)[:, 1].mean() < 0.15
    assert lead_shrinkage(-actual, actual)[:, 1].max() == 0.0  # wrong-way predictions: none kept
    z = rng.normal(0, 1, 500)
    assert change_shrinkage(z, z) == 1.0 and change_shrinkage(z, -z) == 0.0 and change_shrinkage(z, 0 * z) == 0.0


@pytest.mark.slow  # fits LSTM networks
def test_daily_ensemble_forecasts_the_mean_of_independent_members():
    # members start from their own weights, and the forecast is their mean quantile by quantile
    h = _hourly_data()
    m = make("daily", seed=5, members=3, **LSTM_OPTS).fit(h, META)
    lstms = [w for w in m.model.layers if w.__class__.__name__ == "LSTM"]
    assert len(lstms) == 3
    first = [w.get_weights()[0] for w in lstms]
    assert not np.allclose(first[0], first[1]) and not np.allclose(first[1], first[2])
    origin = h["timestamp"].iloc[-1]
    got = m.predict(h, {"p": [origin]})
    lev, ref = hourly_columns(h)
    x, f, _, last, sc = m._windows(series_values(h, "p", lev), series_values(h, "p", ref), META["p"].timezone,
                                   np.array([len(h) - 1]), False)
    raw = m.model.predict([x, f], verbose=0)
    assert raw.shape == (1, 24, len(QCOLS), 3)
    mean = raw.mean(axis=-1)[0]
    med = m.shrink[:, 0] + m.shrink[:, 1] * mean[:, 0]
    want = last[0] + (mean - mean[:, :1] + med[:, None]) * sc[0]
    assert np.allclose(got[list(QCOLS)].to_numpy(), want, rtol=1e-5, atol=1e-6)
    # a single member does not reproduce the mean: the members differ after training too
    assert not np.allclose(raw[0, :, :, 0], mean, atol=1e-4)
