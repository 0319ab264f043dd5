"""The units of work the pipeline's stages hand to an executor (:mod:`capplan.executor`),
and the per-model forecasting steps they are made of. Every task is plain, picklable data in,
plain data out, so it runs the same in this process, a process pool or a Dask worker.

* stage 3 (forecast): :func:`forecast_one` (one series' per-series models,
  :class:`SeriesForecastTask`), :func:`global_one` (one fit of a global model, the LSTM:
  a rolling refit block, :func:`rolling_block`, or its plan fit, :func:`plan_forecast`;
  :class:`GlobalTask`), :func:`combine_one` (one series combined, calibrated and scored,
  :class:`CombineTask`); :func:`tier_forecasts` runs one model's rolling and plan
  forecasts in one call (the Airflow forecast jobs);
* stage 4 (backtest): :func:`score_series`;
* stage 5 (search): :func:`search_cached` (:class:`CachedSearch`, :func:`search_task`).

The order of the stages, and how their tasks are submitted and gathered, is
:mod:`capplan.pipeline`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from capplan.cache import RollingCache, SearchCache
from capplan.config import CapplanConfig
from capplan.containers import Prepared, Progress, TierResult, no_progress
from capplan.executor import private_keras_seeds, single_threaded_tensorflow
from forecasting import backtest as bt
from forecasting.assemble import ROLLING_MODELS, STEP, assemble
from forecasting.bounds import sanitise, sanitise_rolling, upper_by_series
from forecasting.metrics import seasonal_scale
from forecasting.registry import ModelRegistry
from forecasting.reuse import fit_final
from forecasting.tiers import make
from forecasting.types import SeriesMeta, empty_forecast
from optimizer.inputs import replay_input
from optimizer.tuning import SearchOutcome, SearchTask, evaluate_policy, search_one, tune_policy


def origin_map(prep: Prepared) -> dict[str, list[pd.Timestamp]]:
    """Rolling origins per series: hourly for inference (pre-scaling needs a fresh
    forecast every hour), every 4 hours for training pools."""
    return {sid: bt.origins(w, "1h" if prep.meta[sid].kind == "inference" else "4h")
            for sid, w in prep.windows.items()}


def tier_forecasts(prep: Prepared, cfg: CapplanConfig, name: str, seed: int = 0, final: bool = True,
                   registry: ModelRegistry | None = None, progress: Progress = no_progress,
                   cache_root: str | None = None) -> TierResult:
    """Rolling-origin forecasts of one model over the tuning and evaluation windows
    and, with ``final``, its plan forecast fitted on all history (reusing fresh
    registry models, :func:`forecasting.reuse.fit_final`). Every plan forecast counts
    as issued at the series' last observed point. Used by :func:`forecast_stage` and
    the Airflow forecast jobs.

    ``cache_root``: a store root whose rolling-block cache
    (:class:`capplan.cache.RollingCache`) supplies refit blocks whose inputs are
    unchanged; what was reused is in the result's ``reused``."""
    progress("forecast", f"rolling origins: {name}")
    res = rolling_result(prep, name, [rolling_block(prep, cfg, name, seed, origin_map(prep), cache_root)])
    if final:
        plan_forecast(prep, cfg, name, seed, registry or cfg.forecast.registry(cfg.models)).into(res)
    return res


@dataclass
class RollingBlock:
    """One call of :func:`forecasting.backtest.rolling_forecasts`: ``(forecasts, fallbacks,
    warnings)`` plus the cache's per-series ``stats`` and ``notes`` (:class:`capplan.cache.RollingCache`)."""

    forecasts: pd.DataFrame
    fallbacks: dict[str, str]
    warnings: dict[str, list[str]]
    stats: dict[str, dict[str, int]]
    notes: dict[str, list[str]]


def rolling_block(prep: Prepared, cfg: CapplanConfig, name: str, seed: int, origins: dict[str, list[pd.Timestamp]],
                  cache_root: str | None = None) -> RollingBlock:
    """One model's rolling-origin forecasts at ``origins`` (per series; all of them, or
    the origins of one refit block, :func:`refit_blocks`)."""
    opts = cfg.forecast.tier_options().get(name, {})
    cache = RollingCache(cache_root, name) if cache_root else None
    f, fb, wr = bt.rolling_forecasts(name, prep.h5, prep.h1, prep.meta, origins, seed, opts, cache=cache)
    return RollingBlock(f, fb, wr, cache.stats if cache else {}, cache.notes if cache else {})


def rolling_result(prep: Prepared, name: str, blocks: list[RollingBlock]) -> TierResult:
    """One model's :class:`TierResult` (rolling part) from its blocks, in block order:
    the same as one :func:`forecasting.backtest.rolling_forecasts` call over all of them."""
    fb: dict[str, str] = {}
    wr: dict[str, list[str]] = {}
    reused: dict[str, dict[str, int]] = {}
    for b in blocks:
        fb.update(b.fallbacks)
        for s, w in b.warnings.items():
            wr.setdefault(s, []).extend(w)
    for b in blocks:
        for sid, notes in b.notes.items():
            wr.setdefault(sid, []).extend(notes)
        for sid, st in b.stats.items():
            t = reused.setdefault(sid, {k: 0 for k in st})
            for k, v in st.items():
                t[k] = t.get(k, 0) + v
    f = (pd.concat([b.forecasts for b in blocks], ignore_index=True) if len(blocks) > 1 else blocks[0].forecasts
         if blocks else empty_forecast().assign(tier=name))
    return TierResult(name, sanitise_rolling(f, prep.h5), None, {s: [f"backtest: {m}"] for s, m in fb.items()},
                      wr, reused=reused)


def refit_blocks(prep: Prepared, name: str) -> list[dict[str, list[pd.Timestamp]]]:
    """The origins of each refit block of model ``name`` (its ``refit_every``), per series,
    in the order :func:`forecasting.backtest.rolling_forecasts` fits them: each block is
    one fit, so :func:`rolling_block` on each gives the same forecasts as one call on all."""
    return bt.refit_blocks(origin_map(prep), make(name).refit_every)


@dataclass
class PlanForecast:
    """One model's plan forecast (:func:`plan_forecast`): the forecast frame, the
    registry log (``fitted``/``reused``/``fallback``/``versions``), the plan fit's
    fallback notes per series and the registry's warnings."""

    final: pd.DataFrame
    models: dict
    fallbacks: dict[str, str]
    registry_warnings: list[str]

    def into(self, res: TierResult) -> TierResult:
        """Set ``res``'s plan forecast, models and plan fallbacks (the series the model fell
        back on are listed under ``fallback``, never as fitted or reused)."""
        res.final = self.final
        for sid, msg in self.fallbacks.items():
            res.fallbacks.setdefault(sid, []).append(f"plan: {msg}")
        res.models = self.models
        if res.models:
            res.models = {**res.models, "fallback": sorted(self.fallbacks),
                          **{k: [s for s in res.models.get(k, []) if s not in self.fallbacks]
                             for k in ("fitted", "reused")}}
        return res


def plan_forecast(prep: Prepared, cfg: CapplanConfig, name: str, seed: int, registry: ModelRegistry) -> PlanForecast:
    """Model ``name`` fitted on all history (or a fresh registry model,
    :func:`forecasting.reuse.fit_final`) and its 7-day plan forecast from each series'
    last point (an hourly model: complete hours only, expanded to the 5-minute grid)."""
    opts = cfg.forecast.tier_options().get(name, {})
    last5 = prep.h5.groupby("series_id")["timestamp"].max()
    m = make(name, seed=seed, **opts)
    data = prep.h1 if m.step == "1h" else prep.h5
    if m.step == "1h":
        # only complete hours: the bucket holding the last 5-minute point counts if it ends there
        cut = {sid: (t + STEP).floor("1h") - pd.Timedelta("1h") for sid, t in last5.items()}
        data = pd.concat([g[g["timestamp"] <= cut[sid]] for sid, g in data.groupby("series_id")], ignore_index=True)
    m, models = fit_final(name, m, data, prep.meta, registry)
    f = m.predict(data)
    if m.step == "1h":
        f = bt.expand_to_grid(f)
    f["issued_at"] = f["series_id"].map(last5)
    return PlanForecast(sanitise(f[f["timestamp"] > f["issued_at"]], upper_by_series(prep.h5)), models,
                        dict(m.fallbacks), list(registry.warnings))


def by_series(f: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """A forecast frame split per series (each part as ``f[f["series_id"] == sid]`` would give it)."""
    if f is None:
        return {}
    return {sid: g for sid, g in f.groupby("series_id", sort=False)}


@dataclass
class CombineTask:
    """One series' inputs to :func:`combine_one` (picklable, for the executor): its 5-minute
    history, windows, every model's rolling forecasts (benchmarks too) and the plan
    forecasts of :data:`forecasting.assemble.ROLLING_MODELS`."""

    series_id: str
    history: pd.DataFrame
    windows: bt.Windows
    rolling: dict[str, pd.DataFrame]
    finals: dict[str, pd.DataFrame]


def combine_one(task: CombineTask):
    """One series combined and calibrated (:func:`forecasting.assemble.assemble`, which
    works series by series) and every model's backtest scores, the combined one's
    included (:func:`score_series`): ``(Assembled, scores)``."""
    a = assemble(task.history, [task.series_id], task.rolling, task.finals)
    return a, score_series(task.history, task.windows, {**task.rolling, "combined": a.rolling})


GLOBAL_MODELS = ("daily",)  # trained once on every series' windows (the LSTM), never split per series


@dataclass
class SeriesForecastTask:
    """One series' per-series models (picklable, for the executor)."""

    prep: Prepared
    cfg: CapplanConfig
    models: tuple[str, ...]
    seed: int
    cache_root: str | None = None


def forecast_one(task: SeriesForecastTask) -> tuple[dict[str, TierResult], list[str]]:
    """Every per-series model of one series (:func:`tier_forecasts`): ``(results, registry warnings)``."""
    registry = task.cfg.forecast.registry(task.cfg.models)
    res = {n: tier_forecasts(task.prep, task.cfg, n, task.seed, n in ROLLING_MODELS, registry,
                             cache_root=task.cache_root)
           for n in task.models}
    return res, list(registry.warnings)


@dataclass
class GlobalTask:
    """One fit of a global model (:data:`GLOBAL_MODELS`) on every series' gathered windows,
    and its forecasts (picklable, for the executor): with ``origins`` one refit block of its
    rolling origins (:func:`refit_blocks`), without them its plan fit on all history."""

    prep: Prepared
    cfg: CapplanConfig
    name: str
    seed: int
    origins: dict[str, list[pd.Timestamp]] | None = None
    cache_root: str | None = None


def global_one(task: GlobalTask) -> "RollingBlock | PlanForecast":
    """Run one :class:`GlobalTask` (:func:`rolling_block` or :func:`plan_forecast`) with
    TensorFlow's thread pools of one thread (:func:`capplan.executor.single_threaded_tensorflow`)
    and Keras' seed draws of its own (:func:`capplan.executor.private_keras_seeds`), wherever
    it runs, so every executor trains the same network with the same arithmetic."""
    single_threaded_tensorflow()
    with private_keras_seeds(task.seed):
        if task.origins is None:
            return plan_forecast(task.prep, task.cfg, task.name, task.seed,
                                 task.cfg.forecast.registry(task.cfg.models))
        return rolling_block(task.prep, task.cfg, task.name, task.seed, task.origins, task.cache_root)


def score_series(history: pd.DataFrame, w: bt.Windows, rolling: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """One series' scores per model -> band (:func:`forecasting.backtest.score`) on its evaluation
    window. ``history``: its 5-minute rows; ``rolling``: model -> its rolling forecasts. MASE
    is scaled by the seasonal-naive (1 day) in-sample MAE of the training part only."""
    s = pd.Series(history["value"].to_numpy(), index=pd.DatetimeIndex(history["timestamp"]))
    scale = seasonal_scale(s[s.index < w.tune_start].to_numpy(), 288)
    out = {}
    for model, f in rolling.items():
        sc = bt.score(s, f, scale, (w.eval_start, w.end))
        if sc:
            out[model] = sc
    return out


def search_task(sid: str, w: bt.Windows, history: pd.DataFrame, combined: pd.DataFrame, meta: SeriesMeta,
                cfg: CapplanConfig, seed: int = 0, book: dict | None = None) -> SearchTask:
    """One series' :class:`optimizer.tuning.SearchTask`: replay inputs on its tuning and
    evaluation windows (:func:`optimizer.inputs.replay_input`) from its history (5-minute,
    or its native grid for a finer inference series) and its combined rolling forecasts.
    ``book``: GPU prices (default ``cfg.price_book()``)."""
    book = cfg.price_book() if book is None else book
    rk = {"interruption_rate": cfg.plan.interruption_rate, "recovery_s": cfg.plan.recovery_s,
          "hold_to_quota": cfg.export.capability_limit == "quota"}  # what the Volcano Queue allows
    # every point before the evaluation window: a 1-minute inference series' last 4 minutes too (not eval_start - STEP)
    tune, tnotes = replay_input(history, combined, meta, book, w.tune_start, w.eval_start - pd.Timedelta(1, "ns"),
                                **rk)
    evalw, _ = replay_input(history, combined, meta, book, w.eval_start, w.end, **rk)
    return SearchTask(sid, meta.kind, tune, evalw, cfg.plan.search_settings(), seed, tnotes)


@dataclass
class CachedSearch:
    """One series' search inputs (built into a :class:`optimizer.tuning.SearchTask` where it
    runs, so the replay inputs are built in parallel) and the store root whose cache may
    already hold its outcome."""

    series_id: str
    windows: bt.Windows
    history: pd.DataFrame
    combined: pd.DataFrame
    meta: SeriesMeta
    cfg: CapplanConfig
    seed: int
    book: dict
    cache_root: str | None = None

    def task(self) -> SearchTask:
        return search_task(self.series_id, self.windows, self.history, self.combined, self.meta, self.cfg,
                           self.seed, self.book)


def search_cached(item: CachedSearch) -> tuple[SearchOutcome, str, str]:
    """``(outcome, status, note)`` of one series' search with the store's cache
    (:class:`capplan.cache.SearchCache`): ``status`` is ``reused`` (the stored outcome of an
    identical search task), ``tuning_reused`` (the stored tuned policy of an identical tuning
    window, :func:`optimizer.tuning.tune_policy`, replayed on the new evaluation window by
    :func:`optimizer.tuning.evaluate_policy`: the hourly case) or ``computed``
    (:func:`optimizer.tuning.search_one`); what is computed is stored for the next run.
    ``note`` says when a stored entry was not trusted."""
    task = item.task()
    if not item.cache_root:
        return search_one(task), "computed", ""
    cache = SearchCache(item.cache_root)
    key = cache.key(task)
    oc, why = cache.get(key)
    if oc is not None:
        return oc, "reused", ""
    tkey = cache.tuned_key(task)
    tuned, twhy = cache.get_tuned(tkey)
    status = "tuning_reused"
    if tuned is None:
        tuned, status = tune_policy(task), "computed"
        cache.put_tuned(tkey, tuned)
    oc = evaluate_policy(task, tuned)
    cache.put(key, oc)
    notes = [f"cache: {what} entry not trusted ({r}); recomputed" for what, r in (("search", why), ("tuning", twhy))
             if r]
    return oc, status, "; ".join(notes)
