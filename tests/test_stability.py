"""Stable recommendations: the seed, and forecasts that differ slightly between runs (the global
LSTM sees other series in a fleet run), must not move a series' recommended plan by more than 3 %."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import backtest as bt
from forecasting.regularise import regularise, to_hourly
from forecasting.types import QCOLS, SeriesMeta
from optimizer.inputs import replay_input
from optimizer.prices import default_price_book
from optimizer.settings import SearchSettings
from optimizer.tuning import SearchTask, search_one

SERIES = ["train/vc6YE", "train/vcMod", "train/vcJLV"]  # forecasts for all three (one fleet)
# the layers bought and how each is sized; the quantile x headroom pair is one continuous daily size
# (p90 x 1.0 and p99 x 0.8 buy nearly the same), held to the 3 % cost bound instead
LAYERS = ("daily_rule", "daily_cap", "topup_quantile")


def _layers(params: dict) -> dict:
    return {**{k: params[k] for k in LAYERS}, "reserved": params["reservation_ratio"] > 0,
            "spot": params["spot_fraction"] > 0}


@pytest.fixture(scope="module")
def prepared():
    from capplan.sources import load_source

    loaded = load_source("sample")
    h5, _ = regularise(loaded.frame[loaded.frame["series_id"].isin(SERIES)])
    meta = {sid: loaded.meta.get(sid, SeriesMeta(kind="training")) for sid in SERIES}
    windows = {sid: bt.split_windows(pd.DatetimeIndex(g["timestamp"])) for sid, g in h5.groupby("series_id")}
    om = {sid: bt.origins(w, "4h") for sid, w in windows.items()}
    fc, _, _ = bt.rolling_forecasts("seasonal_naive", h5, to_hourly(h5), meta, om, 0, {})
    return h5, meta, windows, fc


def _task(prepared, sid, seed, scale=1.0):
    h5, meta, windows, fc = prepared
    g = h5[h5["series_id"] == sid]
    c = fc[fc["series_id"] == sid].copy()
    c[list(QCOLS)] = c[list(QCOLS)] * scale
    w = windows[sid]
    book = default_price_book()
    tune, notes = replay_input(g, c, meta[sid], book, w.tune_start, w.eval_start - pd.Timedelta("5min"))
    evalw, _ = replay_input(g, c, meta[sid], book, w.eval_start, w.end)
    return SearchTask(sid, "training", tune, evalw, SearchSettings(n_calls=8, random_search=False), seed, notes)


@pytest.mark.parametrize("sid", SERIES)
def test_recommended_cost_within_3_percent_over_seeds_and_runs(prepared, sid):
    out = [search_one(_task(prepared, sid, seed)) for seed in range(5)]
    costs = np.array([o.recommended.cost_usd for o in out])
    med = np.median(costs)
    assert np.all(np.abs(costs - med) <= 0.03 * med), costs
    # a fleet run's forecasts differ a little (here: 1 % higher everywhere): same layers, cost within 3 %
    alone, fleet = out[0], search_one(_task(prepared, sid, 0, scale=1.01))
    assert alone.recommended_policy == fleet.recommended_policy
    assert _layers(alone.params) == _layers(fleet.params)
    assert abs(fleet.recommended.cost_usd - alone.recommended.cost_usd) <= 0.03 * alone.recommended.cost_usd
