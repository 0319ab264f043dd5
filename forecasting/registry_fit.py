"""Plan-forecast fits that reuse the model registry: fit a tier on all history,
or load the model saved by an earlier run while it is fresh for the tier's cadence.

Cadences (the tier table of docs/method.md, "Vocabulary"): ``hourly`` refits every run (its parameters
are still saved, for the record); ``daily`` (the global LSTM) is reused for
24 h and ``weekly`` (Prophet, per series) for 7 d, when the saved model covers
the same series and no newer data than the registry's freshness rule allows
(:meth:`forecasting.registry.ModelRegistry.load_fresh`). A saved model that
cannot be loaded (:class:`forecasting.tiers.base.ModelFileError`) means a refit
and a registry warning, never a crash.

Nothing here knows a tier by name: a tier says whether it is one model per
series or one global model (``Forecaster.per_series``) and saves and loads
itself (``Forecaster.save`` / ``Forecaster.load``). Imports nothing of ``capplan``.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pandas as pd

from forecasting.registry import ModelRegistry
from forecasting.tiers.base import Forecaster, ModelFileError
from forecasting.types import SeriesMeta

GLOBAL_KEY = "_global"  # registry key of a global model (one for all series)


def _save(registry: ModelRegistry, m: Forecaster, key: str, series: list[str], rng) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        m.save(tmp, series)
        files = {p.name: p for p in Path(tmp).iterdir() if p.is_file()}
        return registry.save(m.name, key, files, rng, series, scores=m.scores)


def fit_final(name: str, m: Forecaster, data: pd.DataFrame, meta: dict[str, SeriesMeta], registry: ModelRegistry):
    """Fit a tier for the plan forecast, reusing registry models younger than the tier's
    cadence; save what was fitted (:meth:`Forecaster.save`, safe formats only).

    ``data``: history frame on the tier's grid. Returns ``(model, log)`` with
    ``log = {"reused": [...], "fitted": [...], "versions": {...}}``: ``reused`` and
    ``fitted`` list only series that have a model of the tier (a series the tier
    could not model is in neither, and in ``m.fallbacks``).
    """
    log: dict = {"reused": [], "fitted": [], "versions": {}}
    sids = sorted(data["series_id"].unique())
    if not sids:
        return m, log
    ends = data.dropna(subset=["value"]).groupby("series_id")["timestamp"].agg(["min", "max"])
    if not m.per_series:
        found = registry.load_fresh(name, GLOBAL_KEY, ends["max"].max(), sids)
        if found is not None:
            try:
                m.load(found[0])
                log["reused"], log["versions"][GLOBAL_KEY] = m.fitted_series(), found[1]["version"]
                return m, log
            except ModelFileError as exc:  # a broken or outdated file means a refit, never a crash
                registry.warnings.append(f"registry: {name} model could not be loaded ({exc}); refitted")
        m.fit(data, meta)
        if m.fitted_series():
            log["versions"][GLOBAL_KEY] = _save(registry, m, GLOBAL_KEY, sids,
                                                (ends["min"].min(), ends["max"].max()))
        log["fitted"] = m.fitted_series()
        return m, log
    todo = []
    for sid in sids:
        found = registry.load_fresh(name, sid, ends.loc[sid, "max"] if sid in ends.index else pd.Timestamp.max)
        if found is not None:
            try:
                m.load(found[0])
                if sid in m.fitted_series():
                    log["reused"].append(sid)
                    log["versions"][sid] = found[1]["version"]
                    continue
            except ModelFileError as exc:
                registry.warnings.append(f"registry: {name} model {found[0]} could not be loaded ({exc}); refitted")
        todo.append(sid)
    if todo:
        m.fit(data[data["series_id"].isin(todo)], meta)
        fitted = set(m.fitted_series())
        for sid in todo:
            if sid in fitted and sid in ends.index:
                log["versions"][sid] = _save(registry, m, sid, [sid], (ends.loc[sid, "min"], ends.loc[sid, "max"]))
                log["fitted"].append(sid)
    return m, log



#: the figures of a band (:func:`forecasting.backtest.score`) a saved model records
RECORDED_SCORES = ("mase", "pinball", "coverage_p95", "n")


def record_scores(registry: ModelRegistry, models: dict[str, dict], scores: dict[str, dict]) -> int:
    """Record in the registry, for every model fitted by this run's plan forecast, its tier's
    backtest scores on each series' evaluation window (:meth:`ModelRegistry.scores_update`).

    ``models``: tier -> the log of :func:`fit_final` (``fitted``, ``versions``; reused models
    keep the scores of the run that fitted them); ``scores``: series -> model -> band ->
    figures (the score stage, ``capplan.run.stages.score``). What is recorded, per saved version:
    ``{series_id: {band: {"mase", "pinball", "coverage_p95", "n"}}}`` (bands ``1h``, ``24h``,
    ``7d``, ``all``; non-finite figures as None) — one series for a per-series model, every
    fitted series for a global one. A version removed meanwhile (retention, a concurrent run)
    adds a registry warning. Returns the number of versions updated."""

    def figures(sid: str, tier: str) -> dict:
        return {band: {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                       for k, v in fig.items() if k in RECORDED_SCORES}
                for band, fig in scores.get(sid, {}).get(tier, {}).items()}

    n = 0
    for tier, log in models.items():
        fitted = list(log.get("fitted", []))
        for key, version in log.get("versions", {}).items():
            sids = fitted if key == GLOBAL_KEY and not log.get("reused") else [key] if key in fitted else []
            if not sids:
                continue
            try:
                registry.scores_update(tier, key, version, {sid: figures(sid, tier) for sid in sids})
                n += 1
            except FileNotFoundError:  # pruned meanwhile by a concurrent run's save: said, not hidden
                registry.warnings.append(f"registry: {tier} {key} version {version} was removed before its "
                                         "scores could be recorded")
    return n
