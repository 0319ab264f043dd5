"""Stable recommendations: the seed, and forecasts that differ slightly between runs (the global
LSTM sees other series in a fleet run), must not move a series' recommended plan by more than 3 %."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import backtest as bt
from forecasting.regularise import regularise, to_hourly
from forecasting.types import QCOLS, SeriesMeta
from optimizer.book.prices import default_price_book
from optimizer.engine.inputs import replay_input
from optimizer.rivals.expressed import expressible
from optimizer.search.settings import SearchSettings
from optimizer.search.tuning import SearchTask, search_one

#: several full searches and forecasts per test: end-to-end in all but name
pytestmark = pytest.mark.slow

SERIES = ["train/vc6YE", "train/vcMod", "train/vcJLV"]  # forecasts for all three (one fleet)
# the layers bought and how the hourly one is sized; the daily layer's rule, quantile, headroom and
# cap together set one daily size (p90 x 1.0 and p99 x 0.8 buy nearly the same, as do vc6YE's p50
# newsvendor x 1.2 and p90 max x 0.8, or vcMod's p50 x 1.2 capped at the last day's peak and p90 x 0.8
# uncapped), held to the 3 % cost bound instead
LAYERS = ("topup_quantile",)


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
    # one interruption scenario for every seed (optimizer.search.tuning.SCENARIO_STREAM): the baseline, which no seed
    # sizes, scores the same on every seed, and so does every recommendation the run seeds agree on
    assert len({(o.baseline.cost_usd, o.baseline.coverage) for o in out}) == 1
    for o in out:
        if o.params == out[0].params:
            assert (o.recommended.cost_usd, o.recommended.coverage) == (out[0].recommended.cost_usd,
                                                                          out[0].recommended.coverage)
    for o in out:  # report.json's day-by-day totals are the ones the decisions followed (optimizer.rivals.incumbent)
        dd = o.tuning["day_by_day"]
        assert o.tuning["incumbent_kept"] == (dd["searched"] >= dd["rule"] - dd["margin"])
        kept = dd["rule"] if o.tuning["incumbent_kept"] else dd["searched"]
        best = min(set(dd) - {"rule", "searched", "margin", "rival_margin", "target"}, key=lambda k: dd[k])
        lost = dd[best] >= kept - dd["rival_margin"] or not expressible(best, "training")  # never an unexported rival
        assert (o.recommended_policy == "searched") == lost and dd["target"] == 0.95
    # a fleet run's forecasts differ a little (here: 1 % higher everywhere): same layers, cost within 3 %
    alone, fleet = out[0], search_one(_task(prepared, sid, 0, scale=1.01))
    assert alone.recommended_policy == fleet.recommended_policy
    assert _layers(alone.params) == _layers(fleet.params)
    assert abs(fleet.recommended.cost_usd - alone.recommended.cost_usd) <= 0.03 * alone.recommended.cost_usd


def test_a_series_planned_alone_gets_the_plan_it_gets_beside_others(tmp_path):
    """Across runs: `--series X` and `--series X,Y,Z` give X the same forecasts and plan (the
    cluster-wide outage rule and the global LSTM read the whole source in both)."""
    import yaml

    from capplan.config.settings import CapplanConfig
    from capplan.run import pipeline
    from capplan.run.executor import Executor
    from tests.conftest import FAST_CONFIG

    sid = "train/vcTJs"  # the cluster-wide outage rule hits it in a fleet run
    reps = {}
    for name, ids in (("alone", [sid]), ("with", [sid, "train/vcJLV", "infer/azure-llm-conv"])):
        cfg = CapplanConfig.model_validate(yaml.safe_load(FAST_CONFIG))
        cfg.store, cfg.models = str(tmp_path / f"store-{name}"), str(tmp_path / f"models-{name}")
        reps[name] = pipeline.run_plan("sample", cfg, tmp_path / name, series=ids, seed=0, executor=Executor(),
                                       reuse=False)
    a, b = reps["alone"].series[sid], reps["with"].series[sid]
    assert a.recommended_policy == b.recommended_policy and a.recommended.params == b.recommended.params
    assert a.recommended.cost_usd == pytest.approx(b.recommended.cost_usd, rel=1e-9)
    fa, fb = (pd.read_parquet(tmp_path / n / "backtest.parquet") for n in ("alone", "with"))
    fb = fb[fb["series_id"] == sid].reset_index(drop=True)
    # ids are dictionary-encoded (capplan.store.retention.write_backtest): the dictionary holds the run's series
    fa, fb = (f.astype({c: str for c in f.columns if isinstance(f[c].dtype, pd.CategoricalDtype)}) for f in (fa, fb))
    pd.testing.assert_frame_equal(fa.sort_values(["tier", "issued_at", "timestamp"], ignore_index=True),
                                  fb.sort_values(["tier", "issued_at", "timestamp"], ignore_index=True))
