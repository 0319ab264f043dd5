"""The perfect-foresight limit, the peers, and the invariant that no replayed policy beats the limit."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from forecasting.types import QCOLS
from optimizer.book.prices import GpuPrice
from optimizer.engine.replay import replay_inference, replay_training
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import InferenceParams, TrainingParams
from optimizer.rivals import baseline
from optimizer.rivals.peers import PEERS, conformal_offset, replay_peers
from optimizer.rivals.perfect_foresight import inference_oracle, level_steps, training_oracle
from optimizer.training.calibrated import LEVELS
from optimizer.training.newsvendor import critical_ratios, exceeded_level

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)


def inp(demand, step_s=300, before=None):
    times = pd.date_range("2024-01-01", periods=len(demand), freq=f"{step_s}s", tz="UTC")
    return ReplayInput(times=times, demand=np.asarray(demand, float), step_s=step_s, price=PRICE,
                       history_before=None if before is None else np.asarray(before, float))


def test_training_oracle_buys_spot_for_the_day_and_on_demand_for_a_short_spike():
    d = np.full(288, 10.0)
    d[12:24] = 15.0  # one hour of 5 more GPUs
    o = training_oracle(inp(d))
    # 10 GPUs on spot all day (0.4 x 10 x 24) + 5 on demand for one hour (1.0 x 5 x 1)
    assert o.cost_usd == pytest.approx(0.4 * 10 * 24 + 5.0)
    assert o.layers["spot"] == pytest.approx(240.0) and o.layers["on_demand_hourly"] == pytest.approx(5.0)
    # a spike lasting 10 of 24 hours: spot (0.4 x 24 = 9.6) beats on demand (10), so spot covers it
    d[: 12 * 10] = 15.0
    assert training_oracle(inp(d)).cost_usd == pytest.approx(0.4 * 15 * 24)
    # NaN intervals need nothing; an all-zero window costs nothing
    assert training_oracle(inp(np.full(288, np.nan))).cost_usd == 0.0
    assert training_oracle(inp(np.zeros(288))).cost_usd == 0.0


def test_training_oracle_pays_the_expected_redone_work_under_replacement():
    """Under ``spot_outage: replacement`` the limit's spot costs the effective spot price (spot +
    on-demand x expected redo per spot GPU-hour), which can also move a short block onto on demand."""
    d = np.full(288, 10.0)
    plain = training_oracle(inp(d))
    redo = inp(d)
    redo.spot_outage, redo.spot_redo = "replacement", 0.01 * 0.5  # 0.01 per GPU-hour x 30 min
    assert training_oracle(redo).cost_usd == pytest.approx(plain.cost_usd * (0.4 + 0.005) / 0.4)
    # 10 of 24 hours of 5 more GPUs: spot at 0.4 (9.6 per day) beats on demand (10); at 0.42 (10.08) it does not
    d[: 12 * 10] = 15.0
    dear = inp(d)
    dear.spot_outage, dear.spot_redo = "replacement", 0.02
    o = training_oracle(dear)
    assert o.layers["spot"] == pytest.approx(10 * 24) and o.layers["on_demand_hourly"] == pytest.approx(5 * 10)


def test_training_oracle_reserves_when_reserved_is_the_cheapest_layer():
    cheap = ReplayInput(times=pd.date_range("2024-01-01", periods=2016, freq="5min", tz="UTC"),
                        demand=np.full(2016, 7.0), step_s=300, price=GpuPrice(on_demand=1.0, reserved=0.3, spot=0.4))
    o = training_oracle(cheap)
    assert o.layers["reserved"] == pytest.approx(7 * 168) and o.cost_usd == pytest.approx(0.3 * 7 * 168)


def _brute_force_steps(need, cold):
    """Cheapest paid replica-steps by exhaustive search over which steps one replica is paid (small cases)."""
    best = None
    n = len(need)
    for paid in itertools.product((0, 1), repeat=n):
        ok = True
        for t in range(n):
            if need[t]:
                # ready at t: paid at t and at the cold steps before it (or since the window start)
                if not all(paid[k] for k in range(max(0, t - cold), t + 1)):
                    ok = False
                    break
        if ok:
            best = sum(paid) if best is None else min(best, sum(paid))
    return best


@pytest.mark.parametrize("cold", [0, 1, 2, 3])
def test_inference_oracle_matches_exhaustive_search_for_one_replica(cold):
    rng = np.random.default_rng(cold)
    for _ in range(40):
        need = rng.integers(0, 2, 10)
        assert level_steps(need, cold) == _brute_force_steps(need, cold)


def test_inference_oracle_pays_the_cold_start():
    d = [0.0] * 5 + [3.0] * 5 + [0.0] * 5
    o = inference_oracle(inp(d), cold_start_s=90)  # 1 step of cold start on a 5-minute grid
    assert o.layers["replicas"] == pytest.approx(3 * 6 * 300 / 3600)
    o1 = inference_oracle(inp(d, step_s=60), cold_start_s=90)  # 2 steps on a 1-minute grid
    assert o1.layers["replicas"] == pytest.approx(3 * 7 * 60 / 3600)


def test_newsvendor_ratio_prices_in_spot_interruptions():
    r = critical_ratios(PRICE, interruption_rate=0.0, recovery_s=1800)
    assert r["spot"] == pytest.approx(0.4) and r["reserved"] == 1.0  # reserved (0.6) never beats spot (0.4)
    risky = critical_ratios(PRICE, interruption_rate=0.2, recovery_s=1800)
    assert risky["spot"] == pytest.approx(0.5)  # 0.4 + 1.0 x 0.2 x 0.5 h lost per spot GPU-hour
    # a day with 10 of 24 hours at 15 GPUs and 14 at 10: 15 is reached in 10/24 >= 0.4 of the hours
    assert exceeded_level(np.r_[np.full(10, 15.0), np.full(14, 10.0)], 0.4) == 15.0
    assert exceeded_level(np.r_[np.full(9, 15.0), np.full(15, 10.0)], 0.4) == 10.0


def test_conformal_offset_uses_only_changes_already_observed():
    v = np.array([1.0, 1, 1, 1, 9, 1, 1, 1])
    q = conformal_offset(v, lead=1, window=100, level=1.0)
    # the jump 1 -> 9 (from step 3) is fully observed at step 4, not before
    assert q[3] == 0.0 and q[4] == 8.0


# ---- the invariant: no causally replayed policy meets every interval for less than the limit --------------------


def _sample(series, days=4):
    from capplan.sources import load_source
    from forecasting.regularise import regularise

    h5, _ = regularise(load_source("sample").frame.query("series_id == @series"))
    v = h5["value"].to_numpy()
    return v[-(days * 288):], v[-(days * 288) - 288:-(days * 288)]


ADVERSARIAL = {
    "step": np.r_[np.full(700, 3.0), np.full(740, 40.0)],
    "spike": np.r_[np.full(600, 5.0), [80.0], np.full(839, 5.0)],
    "zeros": np.zeros(1440),
    "zero_runs": np.r_[np.zeros(300), np.full(200, 12.0), np.zeros(500), np.full(440, 7.0)],
    "noise": np.random.default_rng(0).gamma(2.0, 6.0, 1440).round(),
}


def _perfect_training_lookups(i):
    """Lookups built from the demand itself (perfect foresight: the strongest inputs a policy could get)."""
    s = pd.Series(np.nan_to_num(i.demand), index=i.times)
    rel = i.times - i.times[0]
    for name, length, agg in (("week_mean", "7D", "mean"), ("day_max", "1D", "max"), ("hour_max", "1h", "max")):
        key = rel // pd.Timedelta(length)
        vals = s.groupby(np.asarray(key)).transform(agg).to_numpy()
        for q in QCOLS:
            getattr(i, name)[q] = vals
    for c in LEVELS:  # the calibrated top-up's levels, read like the quantiles
        i.hour_max[c] = i.hour_max["p50"]
    day = np.asarray(rel // pd.Timedelta("1D"))
    hour_max = s.groupby(np.asarray(rel // pd.Timedelta("1h"))).max().to_numpy()
    hour_day = np.asarray(pd.Series(day).groupby(np.asarray(rel // pd.Timedelta("1h"))).first())
    level = {d: exceeded_level(hour_max[hour_day == d], 0.4) for d in np.unique(day)}
    for q in QCOLS:
        i.day_level[q] = np.array([level[d] for d in day])


def _training_policies(rng, n=40):
    out = [TrainingParams(reservation_ratio=0.0, headroom=1.0, spot_fraction=1.0, topup_quantile="p50"),
           TrainingParams(reservation_ratio=1.0, headroom=1.0, spot_fraction=0.0)]
    for _ in range(n):
        out.append(TrainingParams(reservation_ratio=float(rng.uniform(0, 1.5)), headroom=float(rng.uniform(0.5, 1.5)),
                                  spot_fraction=float(rng.uniform(0, 1)),
                                  topup_quantile=rng.choice(["none", "p50", "c90"]),
                                  topup_headroom=float(rng.uniform(0.5, 1.5)), quantile="p50",
                                  daily_rule=rng.choice(["max", "newsvendor"])))
    return out


def _check_training(d, before=None):
    i = inp(d, before=before)
    limit = training_oracle(i).cost_usd
    _perfect_training_lookups(i)
    rng = np.random.default_rng(1)
    results = [replay_training(i, p, interruption_rate=0.0)[0] for p in _training_policies(rng)]
    results.append(baseline.training_baseline(i, interruption_rate=0.0)[0])
    results += [m for m, _ in replay_peers(i, "training", interruption_rate=0.0).values()]
    full = [m for m in results if m.coverage == 1.0]
    for m in full:
        assert m.cost_usd >= limit - 1e-6, (m, limit)
    return limit, full


def _check_inference(d, step_s=300, before=None):
    i = inp(d, step_s=step_s, before=before)
    i.fc_step_s = step_s
    limit = inference_oracle(i, 90).cost_usd
    # pre-scaling from a perfect forecast of the next hour, at every origin
    n = len(d)
    fut = np.r_[np.nan_to_num(np.asarray(d, float)), np.zeros(13)]
    for q in QCOLS:
        i.hourly_fc[q] = np.stack([fut[k + 1:k + 13] for k in range(n)])
    i.hourly_origin_idx = np.arange(n) - 1
    i.hourly_offset = np.ones(n, dtype=int)
    results = [baseline.inference_baseline(i, 90)[0]]
    results += [m for m, _ in replay_peers(i, "inference").values()]
    rng = np.random.default_rng(2)
    for _ in range(25):
        p = InferenceParams(target_utilization=float(rng.uniform(0.5, 1.0)), min_replicas=int(rng.integers(1, 4)),
                            max_replicas=500, scale_up_window_s=0, scale_down_window_s=int(rng.integers(0, 900)),
                            scale_up_percent=1000, scale_down_percent=100, period_s=15,
                            prescale_lead_s=int(rng.choice([0, 300, 600, 900])),
                            prescale_quantile=rng.choice(["none", "p50"]))
        for lag in (0, 60):
            results.append(replay_inference(i, p, 90, metrics_lag_s=lag)[0])
    for _ in range(8):  # the lookahead family (optimizer.inference.lookahead), with high quantiles that often cover all
        p = InferenceParams(target_utilization=float(rng.uniform(0.5, 1.0)), family="lookahead",
                            level_window_s=int(rng.choice([0, 900, 1800])),
                            headroom_quantile=float(rng.uniform(0.5, 0.999)), max_replicas=500,
                            scale_down_window_s=int(rng.choice([0, 300, 900])), scale_up_percent=1000, period_s=15)
        for lag in (0, 60):
            results.append(replay_inference(i, p, 90, metrics_lag_s=lag)[0])
    full = [m for m in results if m.coverage == 1.0]
    for m in full:
        assert m.cost_usd >= limit - 1e-6, (m, limit)
    return limit, full


@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
def test_no_policy_beats_the_limit_on_adversarial_inputs(case):
    d = ADVERSARIAL[case]
    _, full_t = _check_training(d)
    _, full_i = _check_inference(d)
    if case != "zeros":
        assert full_t  # the invariant was exercised: some policies met every interval


@pytest.mark.parametrize("series", ["train/vc6YE", "train/vcdI0", "infer/nasa-http"])
def test_no_policy_beats_the_limit_on_sample_series(series):
    d, before = _sample(series)
    if series.startswith("train/"):
        _, full = _check_training(d, before)
    else:
        _, full = _check_inference(d, before=before)
    assert full


def test_reactive_policy_misses_a_step_for_the_lag_and_cold_start_a_forecast_avoids_it():
    step_s, lag, cold = 60, 60, 90
    d = np.r_[np.full(120, 2.0), np.full(60, 20.0)]
    i = inp(d, step_s=step_s, before=np.full(60, 2.0))
    i.fc_step_s = step_s  # forecasts on the data's grid here
    m, s = PEERS["reactive"].inference(i, cold, lag)
    missed = np.flatnonzero(s["provisioned"][120:] < 20.0)
    # unmet from the step on, for at least lag + cold start (plus the step that must end before it is seen)
    assert missed[0] == 0 and len(missed) * step_s >= lag + cold
    assert m.unmet > 0
    # a pre-scaling HPA whose forecast (issued before each minute) saw the step coming
    n = len(d)
    fut = np.r_[d, np.full(13, 20.0)]
    for q in QCOLS:
        i.hourly_fc[q] = np.stack([fut[k + 1:k + 13] for k in range(n)])
    i.hourly_origin_idx = np.arange(n) - 1
    i.hourly_offset = np.ones(n, dtype=int)
    p = InferenceParams(target_utilization=1.0, min_replicas=2, max_replicas=50, scale_up_percent=1000,
                        period_s=15, prescale_lead_s=600, prescale_quantile="p90")
    mf, sf = replay_inference(i, p, cold, metrics_lag_s=lag)
    assert (sf["provisioned"][120:] >= 20.0).all() and mf.unmet == 0.0


def test_inference_is_replayed_at_the_native_one_minute_resolution():
    from forecasting.types import SeriesMeta
    from optimizer.book.prices import default_price_book
    from optimizer.engine.inputs import native_grid, replay_input

    ts = pd.date_range("2024-01-01", periods=600, freq="1min", tz="UTC")
    v = np.full(600, 4.0)
    v[300] = 30.0  # a one-minute burst
    frame = pd.DataFrame({"series_id": "infer/x", "timestamp": ts, "value": v})
    g = native_grid(frame)
    assert g is not None and (g["timestamp"].diff().dropna() == pd.Timedelta("1min")).all()
    assert native_grid(frame.iloc[::5]) is None  # 5-minute data is already native
    meta = SeriesMeta(kind="inference", unit="replica")
    empty = pd.DataFrame(columns=["series_id", "tier", "issued_at", "timestamp", *QCOLS])
    i, _ = replay_input(g, empty, meta, default_price_book(), ts[60], ts[-1])
    assert i.step_s == 60 and i.fc_step_s == 300 and len(i.times) == 540
    assert i.demand[240] == 30.0 and np.sum(i.demand > 4.0) == 1  # the burst is one step, not averaged away
    m, _ = PEERS["reactive"].inference(i, 90, 60)
    assert m.coverage < 1.0  # a one-minute burst no reactive rule can see coming


def test_training_limit_buys_whole_gpus_for_fractional_demand():
    # one hour at 2.3 GPUs: the limit buys 3 whole GPUs (spot for the hour is cheapest: 3 x 0.4)
    assert training_oracle(inp(np.full(12, 2.3))).cost_usd == pytest.approx(3 * 0.4)
    # a hair above a whole number (float arithmetic on summed fractional shares) still needs the
    # next whole GPU; the solver's feasibility tolerance (1e-6) would otherwise round it down to 2
    assert training_oracle(inp(np.full(12, 2 + 5e-7))).cost_usd == pytest.approx(3 * 0.4)
    # within 1e-9 of a whole number is that number
    assert training_oracle(inp(np.full(12, 2 + 1e-12))).cost_usd == pytest.approx(2 * 0.4)
