"""Re-scoring the combination from saved member forecasts (benchmarks.frames)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.frames import load_frames, rescore, save_frames, window_bounds
from forecasting.backtest import Windows, summarise
from forecasting.types import QCOLS

STEP = pd.Timedelta("5min")


def _setup():
    """One series of 21 days (a daily cycle plus noise), naive and seasonal-naive rolling
    forecasts every 4 hours, 2 days ahead; windows: 7 training, 7 tuning, 7 evaluation days."""
    rng = np.random.default_rng(1)
    idx = pd.date_range("2024-01-01", periods=288 * 21, freq=STEP, tz="UTC")
    y = np.round(40 + 10 * np.sin(np.arange(len(idx)) * 2 * np.pi / 288) + rng.normal(0, 1, len(idx)))
    h5 = pd.DataFrame({"series_id": "s", "timestamp": idx, "value": y})
    w = Windows(idx[0], idx[0] + pd.Timedelta("7D"), idx[0] + pd.Timedelta("14D"), idx[-1], "days")
    frames = {"naive": [], "seasonal_naive": []}
    for o in range(288 * 7 - 1, len(idx) - 1, 48):
        k = min(576, len(idx) - 1 - o)
        ts = idx[o + 1:o + 1 + k]
        for name, p in (("naive", np.full(k, y[o])), ("seasonal_naive", y[o + 1 - 288 + np.arange(k) % 288])):
            frames[name].append(pd.DataFrame({"series_id": "s", "tier": name, "issued_at": idx[o], "timestamp": ts,
                                              **{c: p + j for j, c in enumerate(QCOLS)}}))
    return {n: pd.concat(v, ignore_index=True) for n, v in frames.items()}, h5, {"s": w}


def test_saved_frames_load_back_the_same(tmp_path):
    rolling, h5, windows = _setup()
    save_frames(tmp_path, rolling, h5, windows)
    r2, h2, w2 = load_frames(tmp_path)
    assert w2 == windows
    pd.testing.assert_frame_equal(h2, h5)
    for n in rolling:
        pd.testing.assert_frame_equal(r2[n], rolling[n])


def test_each_window_scores_only_its_own_targets():
    rolling, h5, windows = _setup()
    w = windows["s"]
    ev, tu = rescore(rolling, h5, windows, "eval"), rescore(rolling, h5, windows, "tune")
    # 7 days of targets each; 2-day forecasts every 4 hours: the same count of 1 h rows in both windows
    assert ev["s"]["naive"]["1h"]["n"] == tu["s"]["naive"]["1h"]["n"] == 42 * 12  # 42 origins x 12 steps
    assert set(tu["s"]) == {"combined", "naive", "seasonal_naive", "naive_conformal"}
    assert "naive_conformal" not in ev["s"]  # not in the saved frames: the evaluation window keeps what was saved
    assert window_bounds(w, "tune") == (w.tune_start, w.eval_start - STEP)
    # the daily cycle: the combination leaves naive for seasonal-naive at 24 h on both windows
    for sc in (ev, tu):
        assert sc["s"]["combined"]["24h"]["mase"] < sc["s"]["naive"]["24h"]["mase"]
    assert summarise(tu)["24h"]["median_idle_ratio_p95_naive_conformal"] is not None
    with pytest.raises(ValueError, match="expected one of"):
        window_bounds(w, "train")
