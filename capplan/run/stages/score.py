"""The score stages: backtest scores per series, model and lead band on the evaluation window
(:func:`score`), and the peers that ``capplan backtest`` adds before scoring (:func:`peers`).
"""

from __future__ import annotations

import pandas as pd

from capplan.run.state import PlanState
from forecasting import backtest as bt
from forecasting.backtest import evaluation_origins
from forecasting.metrics import seasonal_scale
from forecasting.peers import peer_forecasts
from forecasting.registry_fit import record_scores
from forecasting.types import STEPS_PER_DAY


def score(state: PlanState) -> None:
    """``state.scores``: per series -> model -> band (``1h``, ``24h``, ``7d``, ``all``) on the
    evaluation window (forecasts issued in it, targets in it); the combination and calibration
    were fitted on the tuning window before it. A model scored where the series was combined
    (``fc.scores``, :func:`capplan.run.stages.combine.combine_one`) is taken from there; every other
    model of ``fc.rolling`` (e.g. the :func:`peers`) is scored here (:func:`score_series`).

    With ``state.record_scores`` each model this run fitted records its scores in the model
    registry (:func:`forecasting.registry_fit.record_scores`, docs/method.md, "Data contracts": models), and the
    registry's warnings go to every series' ledger."""
    prep, fc = state.prep, state.fc
    state.progress("backtest", "scoring rolling-origin forecasts")
    done = fc.scores or {}
    hist = by_series(prep.h5)
    out = {}
    for sid, w in prep.windows.items():
        have = done.get(sid, {})
        todo = {m: f[f["series_id"] == sid] for m, f in fc.rolling.items() if m not in have}
        out[sid] = {**have, **(score_series(hist[sid], w, todo) if todo else {})}
    state.scores = out
    if state.record_scores:
        registry = state.cfg.forecast.registry(state.cfg.models)
        record_scores(registry, fc.models, out)
        for w in registry.warnings:
            for sid in prep.windows:
                state.ledger.warn(sid, w)


def peers(state: PlanState) -> None:
    """The peers (:func:`forecasting.peers.peer_forecasts`: the naive-conformal rule, statsforecast
    AutoETS) at the evaluation window's origins, into ``state.fc.rolling``; a peer left out (a
    missing library) is said in ``state.run_notes``."""
    state.progress("backtest", "peers: naive-conformal rule, statsforecast AutoETS")
    peer_fc, notes = peer_forecasts(state.prep.h5, evaluation_origins(state.fc.rolling["naive"], state.prep.windows))
    state.fc.rolling.update(peer_fc)
    state.run_notes.extend(notes)


def by_series(f: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """A forecast frame split per series (each part as ``f[f["series_id"] == sid]`` would give it)."""
    if f is None:
        return {}
    return {sid: g for sid, g in f.groupby("series_id", sort=False)}


def score_series(history: pd.DataFrame, w: bt.Windows, rolling: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """One series' scores per model -> band (:func:`forecasting.backtest.score`) on its evaluation
    window. ``history``: its 5-minute rows; ``rolling``: model -> its rolling forecasts. MASE
    is scaled by the seasonal-naive (1 day) in-sample MAE of the training part only."""
    s = pd.Series(history["value"].to_numpy(), index=pd.DatetimeIndex(history["timestamp"]))
    scale = seasonal_scale(s[s.index < w.tune_start].to_numpy(), STEPS_PER_DAY)
    out = {}
    for model, f in rolling.items():
        sc = bt.score(s, f, scale, (w.eval_start, w.end))
        if sc:
            out[model] = sc
    return out
