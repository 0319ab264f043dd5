"""Bad and awkward input through the real forecasting stage: every case gives
finite, non-negative 7-day forecasts, and short series get a stated fallback."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capplan.config.settings import CapplanConfig
from capplan.run.stages.combine import combine
from capplan.run.stages.forecast import forecast
from capplan.run.stages.load import prepare
from capplan.run.state import PlanState
from capplan.sources import LoadedHistory
from forecasting.types import SeriesMeta

DAYS = 10
N = DAYS * 288


def _base(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(N)
    steps = np.repeat(rng.integers(20, 60, N // 144 + 1), 144)[:N].astype(float)  # jobs start and stop
    return steps + 8 * (np.sin(2 * np.pi * t / 288) > 0)


def _cases() -> dict[str, pd.DataFrame]:
    ts = pd.date_range("2024-04-01", periods=N, freq="5min", tz="UTC")
    out = {}

    def mk(sid, values, times=ts):
        out[sid] = pd.DataFrame({"series_id": sid, "timestamp": times, "value": np.asarray(values, float)})

    v = _base(1)
    dup = pd.DataFrame({"series_id": "dup", "timestamp": ts, "value": v})
    out["dup"] = pd.concat([dup, dup.iloc[::7], dup.iloc[::11].assign(value=lambda d: d["value"] + 3)])
    keep = np.random.default_rng(2).random(N) > 0.15  # irregular grid: missed scrapes, jittered times
    jitter = pd.to_timedelta(np.random.default_rng(3).integers(-40, 40, N), unit="s")
    mk("irregular", _base(2)[keep], (ts + jitter)[keep])
    v = _base(3)
    v[1000:1300] = np.nan  # a NaN run of 25 hours
    mk("nan_run", v)
    v = _base(4)
    v[-1000:] = v[-1001]  # exporter died: Prometheus repeats the last value
    mk("flat_tail", v)
    mk("short", _base(5)[:200], ts[:200])  # 16 hours: too short for the daily and weekly tiers
    mk("all_zero", np.zeros(N))
    mk("constant16", np.full(N, 16.0))  # a fixed pool of 16 GPUs for 10 days
    v = np.full(N, 10.0)
    v[N // 2] = 500.0  # a single spike
    mk("spike", v)
    return out


@pytest.fixture(scope="module")
def awkward():
    cases = _cases()
    frame = pd.concat(cases.values(), ignore_index=True)
    # a cluster-wide outage: every series reads 0 at once for 2 hours (an exporter or scrape failure)
    ts = pd.date_range("2024-04-01", periods=N, freq="5min", tz="UTC")
    for i in range(3):
        frame = pd.concat([frame, pd.DataFrame({"series_id": f"pool{i}", "timestamp": ts, "value": _base(10 + i)})])
    frame = frame.reset_index(drop=True)
    frame.loc[(frame["timestamp"] >= ts[2000]) & (frame["timestamp"] < ts[2024]), "value"] = 0.0
    meta = {sid: SeriesMeta(kind="training", unit="gpu") for sid in frame["series_id"].unique()}
    cfg = CapplanConfig()
    cfg.forecast.lstm_epochs = 1
    cfg.forecast.lstm_max_windows = 300
    cfg.forecast.prophet_samples = 50
    state = PlanState(cfg, seed=0)
    state.prep = prepare(LoadedHistory(frame, meta, []), cfg, state.ledger)
    forecast(state)
    combine(state)
    return state.prep, state.fc, state.ledger


@pytest.mark.parametrize("sid", ["dup", "irregular", "nan_run", "flat_tail", "short", "all_zero", "spike", "pool0"])
def test_forecast_is_finite_non_negative_and_bounded(awkward, sid):
    prep, fc, ledger = awkward
    f = fc.final[fc.final["series_id"] == sid]
    assert len(f) == 2016
    q = f[["p50", "p90", "p95", "p99"]].to_numpy()
    assert np.isfinite(q).all() and (q >= 0).all()
    hist_max = prep.h5.loc[prep.h5["series_id"] == sid, "value"].max()
    assert q.max() <= max(3 * hist_max, 1.0)


def test_duplicates_are_aggregated(awkward):
    prep, _, ledger = awkward
    g = prep.h5[prep.h5["series_id"] == "dup"]
    assert g["timestamp"].is_unique and len(g) == N
    assert prep.report.exact_duplicates > 0 and prep.report.conflicting_duplicates.get("dup", 0) > 0
    assert any("several different values" in n for n in ledger.notes("dup"))


def test_irregular_grid_is_regularised(awkward):
    prep, _, ledger = awkward
    g = prep.h5[prep.h5["series_id"] == "irregular"]
    assert g["timestamp"].diff().dropna().eq(pd.Timedelta("5min")).all()


def test_nan_run_stays_missing_and_is_stated(awkward):
    prep, _, ledger = awkward
    g = prep.h5[prep.h5["series_id"] == "nan_run"]
    assert g["value"].isna().sum() >= 290
    assert any("missing" in n for n in ledger.notes("nan_run"))


def test_cluster_outage_is_not_learned_as_demand(awkward):
    prep, _, ledger = awkward
    # outages are found on the readings, before short gaps are interpolated (which would invent demand)
    assert prep.report.outage_points == 24
    g = prep.h5[prep.h5["series_id"] == "pool0"]
    assert g["value"].iloc[2000:2024].isna().all() and g["value"].iloc[1990:2000].notna().all()
    assert all(f"{prep.report.outage_by_series[s]} points of a cluster-wide" in " ".join(ledger.notes(s))
               for s in ("pool0", "spike"))
    assert not any("cluster-wide" in n for n in ledger.notes("short"))  # the short series ends before it


def test_short_series_falls_back_and_says_so(awkward):
    prep, fc, ledger = awkward
    text = " ".join(ledger.notes("short"))
    assert "daily:" in text and "weekly:" in text and "thirds" in text


def test_all_zero_series_forecasts_zero(awkward):
    _, fc, _ = awkward
    f = fc.final[fc.final["series_id"] == "all_zero"]
    assert f["p50"].max() == 0.0


def test_single_spike_does_not_dominate(awkward):
    _, fc, _ = awkward
    f = fc.final[fc.final["series_id"] == "spike"]
    assert f["p50"].median() < 30  # the level is 10; one 500-GPU spike is not the new normal


def test_constant_pool_is_forecast_as_its_level_by_every_tier(awkward):
    _, fc, _ = awkward
    for tier, f in fc.final_tiers.items():
        g = f[f["series_id"] == "constant16"]
        assert len(g) and np.allclose(g["p50"], 16.0), tier
        assert g["p99"].max() <= 16.0 * 1.5, tier  # not the 3x cap


def test_report_says_which_model_made_each_plan_forecast(awkward):
    """A series is listed as fitted/reused by a tier exactly when the tier's plan forecast
    for it did not fall back; every plan fallback is stated."""
    prep, fc, ledger = awkward
    for tier in ("hourly", "daily", "weekly"):
        log = fc.models[tier]
        modelled = set(log["fitted"]) | set(log["reused"])
        for sid in prep.windows:
            plan_fb = [m for m in ledger.notes(sid) if m.startswith(f"plan: {tier}:")]
            assert (sid in modelled) != bool(plan_fb), (tier, sid, plan_fb)
            assert (sid in log["fallback"]) == bool(plan_fb), (tier, sid)
    assert any("constant" in m for m in ledger.notes("constant16") if m.startswith("plan: daily:"))
