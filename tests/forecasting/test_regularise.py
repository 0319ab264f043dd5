"""Stage 1: grid, duplicates, short and long gaps, outages, negatives."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.regularise import regularise, to_hourly


def frame(sid, ts, vals):
    ts = pd.DatetimeIndex(ts)
    return pd.DataFrame({"series_id": sid, "timestamp": ts if ts.tz else ts.tz_localize("UTC"), "value": vals})


def test_duplicates_gaps_and_negatives():
    ts = pd.date_range("2024-01-01", periods=40, freq="5min", tz="UTC")
    vals = np.arange(40, dtype=float) * 2
    f = frame("a", ts, vals)
    f = pd.concat([f, f.iloc[[3]]])  # exact duplicate
    f = pd.concat([f, frame("a", [ts[5]], [100.0])])  # conflicting duplicate -> max
    f = f[~f["timestamp"].isin(ts[10:12])]  # short gap (2 points) -> interpolated
    f = f[~f["timestamp"].isin(ts[20:30])]  # long gap (10 points) -> missing
    f.loc[f["timestamp"] == ts[35], "value"] = -4.0
    out, rep = regularise(f.sample(frac=1, random_state=0))
    assert out["timestamp"].is_monotonic_increasing and len(out) == 40
    v = out["value"].to_numpy()
    assert rep.exact_duplicates == 1 and rep.conflicting_duplicates == {"a": 1}
    assert any("1 timestamps had several different values; the largest was kept" in n for n in rep.notes("a"))
    assert v[5] == 100.0
    assert v[10] == 20.0 and v[11] == 22.0
    assert np.isnan(v[20:30]).all()
    assert v[35] == 0.0 and rep.negatives_clipped == {"a": 1}
    assert any("missing" in n for n in rep.notes("a"))


def test_cluster_wide_zero_outage_is_missing_not_demand():
    ts = pd.date_range("2024-01-01", periods=30, freq="5min")
    parts = []
    for i, sid in enumerate(["a", "b", "c"]):
        v = np.full(30, 5.0 + i)
        v[10:14] = 0.0  # every series reads 0 at once
        parts.append(frame(sid, ts, v))
    single = np.full(30, 3.0)
    single[20:22] = 0.0  # one series idle alone: real demand
    parts.append(frame("d", ts, single))
    parts[3].loc[:, "value"] = single
    out, rep = regularise(pd.concat(parts))
    # d is not zero at 10:14, so that is not a cluster-wide outage ...
    assert rep.outage_points == 0
    out2, rep2 = regularise(pd.concat(parts[:3]))
    assert rep2.outage_points == 4
    assert out2.set_index(["series_id", "timestamp"])["value"].isna().sum() == 12


def test_hourly_is_peak_of_hour():
    ts = pd.date_range("2024-01-01", periods=24, freq="5min")
    out, _ = regularise(frame("a", ts, np.arange(24, dtype=float)))
    h = to_hourly(out)
    assert h["value"].tolist() == [11.0, 23.0]


def test_hourly_mean_and_last_reading_of_hour():
    # the tiers forecast the hour's mean from its last 5-minute reading (to_hourly's docstring)
    ts = pd.date_range("2024-01-01", periods=24, freq="5min", tz="UTC")
    y = np.arange(24, dtype=float)
    y[23] = np.nan  # a missing last point: the hour's last reading is the one before it
    h = to_hourly(frame("a", ts, y))
    assert h["value"].tolist() == [11.0, 22.0]
    assert np.allclose(h["mean"], [5.5, 17.0]) and h["last"].tolist() == [11.0, 22.0]


def test_a_selection_marks_the_same_cluster_outages_as_the_whole_source():
    """`capplan plan --series X` regularises X exactly as a run of every series does: the cluster-wide
    outage rule reads the source's other series (context), and the global models train on them all."""
    from capplan.config.settings import CapplanConfig
    from capplan.run.stages.load import prepare, select_series
    from capplan.run.state import Ledger

    cfg = CapplanConfig()
    fleet = prepare(select_series("sample", cfg), cfg, Ledger())
    sid = max(fleet.report.outage_by_series, key=fleet.report.outage_by_series.get)  # a series the rule hits
    alone = prepare(select_series("sample", cfg, [sid]), cfg, Ledger())
    assert alone.report.outage_by_series[sid] == fleet.report.outage_by_series[sid]
    assert list(alone.windows) == [sid] and set(alone.global_view().windows) == set(fleet.windows)
    pd.testing.assert_frame_equal(alone.h5, fleet.h5[fleet.h5["series_id"] == sid].reset_index(drop=True))
    pd.testing.assert_frame_equal(alone.h1, fleet.h1[fleet.h1["series_id"] == sid].reset_index(drop=True))
    assert alone.windows[sid] == fleet.windows[sid]


def test_all_series_at_once_equal_each_series_alone():
    """The vectorised grid, gap filling and hourly aggregates of many series at once equal each series
    regularised on its own (no outage coupling: outage_min_series above the number of series)."""
    rng = np.random.default_rng(7)
    parts = []
    for i in range(40):
        n = int(rng.integers(3, 60))
        start = pd.Timestamp("2024-01-01 22:00", tz="UTC") + pd.Timedelta(seconds=int(rng.integers(0, 20000)))
        ts = start + pd.to_timedelta(np.arange(n) * int(rng.choice([60, 300, 420])), unit="s")
        v = rng.choice([0.0, 1.0, 4.5, np.nan, -2.0], size=n)
        parts.append(frame(f"s{i:02d}", ts, v)[rng.random(n) > 0.3])
    whole = pd.concat(parts, ignore_index=True).sample(frac=1, random_state=3)
    together, rep = regularise(whole, outage_min_series=1000)
    hourly = to_hourly(together)
    for p in parts:
        if p.empty:
            continue
        sid = p["series_id"].iloc[0]
        alone, rep1 = regularise(p, outage_min_series=1000)
        mine = together[together["series_id"] == sid].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone, check_dtype=False)
        assert rep.notes(sid) == rep1.notes(sid)
        pd.testing.assert_frame_equal(hourly[hourly["series_id"] == sid].reset_index(drop=True), to_hourly(alone),
                                      check_dtype=False)


def test_time_grows_linearly_with_the_number_of_series():
    import time

    def many(k: int) -> pd.DataFrame:
        ts = pd.date_range("2024-01-01", periods=10, freq="5min", tz="UTC")
        return pd.DataFrame({"series_id": np.repeat([f"s{i:05d}" for i in range(k)], 10),
                             "timestamp": np.tile(ts, k), "value": 1.0})

    def took(k: int) -> float:
        f = many(k)
        t0 = time.perf_counter()
        to_hourly(regularise(f)[0])
        return time.perf_counter() - t0

    took(200)  # warm-up
    small, large = min(took(500) for _ in range(2)), min(took(5000) for _ in range(2))
    # 10x the series: about 10x the time, and 5,000 series well under a second or two (a pandas resample
    # and interpolation per series took about 5 ms each, 25 s here)
    assert large < 5.0 and large < 30 * small, (small, large)
