"""The forecast stage: every model's rolling-origin forecasts over the tuning and evaluation
windows (no look-ahead) and its 7-day plan forecast fitted on all history, and the tasks it
submits to the executor (:mod:`capplan.run.executor`). Every task is plain, picklable data in,
plain data out, so it runs the same in this process, a process pool or a Dask worker.

Tasks, submitted in this order: the fits of the global models (a tier that is not
``per_series``, the LSTM: one :class:`GlobalTask` per rolling refit block and one for the
plan fit, each training one network on every series' gathered windows, :func:`global_one`),
then one :class:`SeriesForecastTask` per series for the per-series models
(:func:`forecast_one`). :func:`tier_forecasts` runs one model's rolling and plan forecasts in
one call (the Airflow forecast jobs).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.errors import InputError
from capplan.run.cache import RollingCache
from capplan.run.executor import Executor, Failed, private_keras_seeds, single_threaded_tensorflow
from capplan.run.state import Ledger, PlanState, Prepared, Progress, TierResult, no_progress
from forecasting import backtest as bt
from forecasting.bounds import sanitise, sanitise_rolling, upper_by_series
from forecasting.combining.assemble import ROLLING_MODELS
from forecasting.registry import ModelRegistry
from forecasting.registry_fit import fit_final
from forecasting.tiers import is_global, make
from forecasting.types import STEP, empty_forecast

LOCAL = Executor()
"""The executor of a stage called without one: in this process."""


def forecast(state: PlanState) -> None:
    """Every model of :data:`forecasting.combining.assemble.ROLLING_MODELS` and ``state.extra_models``
    (benchmarks that are scored but never combined, e.g. ``prophet``) into ``state.results``,
    except those ``state.stored`` supplies (forecast elsewhere: the Airflow forecast jobs).

    A series whose task raises is failed in the ledger (stage ``forecast``) and dropped (the
    global fits are then redone without it, as a run without it would be). The ledger gets each
    series' model fallbacks (once each) and warnings, the registry's warnings and, with
    ``state.cache_root``, the refit blocks reused from the store's cache (:mod:`capplan.run.cache`).

    Raises InputError when every series failed, RuntimeError when a global fit failed.
    """
    prep, cfg, progress, ledger = state.prep, state.cfg, state.progress, state.ledger
    results = dict(state.stored(state) if state.stored is not None else {})
    wanted = [n for n in ROLLING_MODELS + tuple(state.extra_models) if n not in results]
    per_series = tuple(n for n in wanted if not is_global(n))
    global_models = [n for n in wanted if is_global(n)]
    ex = state.executor or LOCAL
    warns: dict[str, list[str]] = {}
    sids = list(prep.windows)
    # the global fits first: each is one of the longest tasks, and must not be the tail
    glob = _submit_global(ex, prep.global_view(), cfg, global_models, state.seed, state.cache_root, progress)
    if per_series:
        progress("forecast", f"{len(sids)} series x {', '.join(per_series)} on the {ex.name} executor")
        tasks = [SeriesForecastTask(prep.select([s]), cfg, per_series, state.seed, state.cache_root) for s in sids]
        out = ex.submit(forecast_one, tasks, sids, on_done(progress, "forecast"))()
        prep, ok, bad = split_failed(prep, sids, out, ledger)
        if bad:
            # without the failed series, as a run without them would be
            glob = _submit_global(ex, prep.global_view(), cfg, global_models, state.seed, state.cache_root, progress)
        for n in per_series:
            results[n] = _merge(n, [r[0][n] for _, r in ok])
        for s, r in ok:
            if r[1]:
                warns.setdefault(s, []).extend(r[1])
    glob_res, reg_warns = glob()
    results.update({n: _only(r, prep.windows) for n, r in glob_res.items()})
    order = [*ROLLING_MODELS, *state.extra_models]
    state.results = {n: results[n] for n in sorted(results, key=lambda n: order.index(n) if n in order else len(order))}
    state.prep = prep
    _to_ledger(ledger, state.results, warns, reg_warns, list(prep.windows))


def _to_ledger(ledger: Ledger, results: dict[str, TierResult], warns: dict[str, list[str]], reg_warns: list[str],
               sids: list[str]) -> None:
    """The models' messages per series: fallbacks (each once) and warnings of the combined
    models, in :data:`ROLLING_MODELS` order, then the registry's warnings; the reused refit blocks."""
    fallbacks: dict[str, list[str]] = {}
    model_warns: dict[str, list[str]] = {}
    for n in ROLLING_MODELS:
        for sid, msgs in results[n].fallbacks.items():
            for msg in msgs:
                if msg not in fallbacks.setdefault(sid, []):
                    fallbacks[sid].append(msg)
        for sid, w in results[n].warnings.items():
            model_warns.setdefault(sid, []).extend(w)
    for sid in sids:
        for msg in fallbacks.get(sid, []):
            ledger.note(sid, msg)
        for msg in model_warns.get(sid, []) + warns.get(sid, []) + reg_warns:
            ledger.warn(sid, msg)
        rolling = {n: r.reused[sid] for n, r in results.items() if sid in r.reused}
        if rolling:
            ledger.reuse(sid, "rolling", rolling)


def on_done(progress: Progress, stage: str):
    """Executor progress as ``[done/total] series`` lines of ``stage``."""
    return lambda i, n, label: progress(stage, f"[{i}/{n}] {label}")


def split_failed(prep: Prepared, sids: list[str], out: list, ledger: Ledger) -> tuple[Prepared, list, dict]:
    """Per-series forecast-stage results ``out`` (in ``sids`` order) as ``(prep without the
    failed series, [(series, result)] of the others, {series: Failed})``; the failed are
    failed in ``ledger`` (stage ``forecast``). Raises InputError when every series failed."""
    bad = {s: r for s, r in zip(sids, out) if isinstance(r, Failed)}
    ok = [(s, r) for s, r in zip(sids, out) if not isinstance(r, Failed)]
    if bad:
        for s, f in bad.items():
            ledger.fail(s, "forecast", f.error, f.where)
        prep = prep.drop(bad)
        if not ok:
            raise InputError(f"every series failed in the forecast stage: {ledger.failures()}")
    return prep, ok, bad


def _submit_global(ex: Executor, prep: Prepared, cfg: CapplanConfig, names: list[str], seed: int,
                   cache_root: str | None, progress: Progress):
    """Submit every fit of the global models (:class:`GlobalTask`; each block and the plan fit
    are independent). Returns a function that waits for them and gives ``{name: TierResult}``
    and the registry warnings.

    Raises RuntimeError when a global fit raised (it concerns every series)."""
    tasks: list[GlobalTask] = []
    for n in names:
        blocks = refit_blocks(prep, n, cfg.forecast.training_origin_hours)
        tasks += [GlobalTask(prep, cfg, n, seed, b, cache_root) for b in blocks]
        if n in ROLLING_MODELS:
            tasks.append(GlobalTask(prep, cfg, n, seed, None, cache_root))
    if not tasks:
        return lambda: ({}, [])
    labels = [f"{t.name} {'plan fit' if t.origins is None else 'rolling block'}" for t in tasks]
    progress("forecast", f"{', '.join(names)}: {len(tasks)} global fits (rolling refit blocks, plan) "
                         f"on the {ex.name} executor")
    gather = ex.submit(global_one, tasks, labels, on_done(progress, "forecast"))

    def collect():
        out = gather()
        for t, r in zip(tasks, out):
            if isinstance(r, Failed):
                raise RuntimeError(f"the global {t.name} model failed ({r.where}): {r.error}")
        res, reg_warns = {}, []
        for n in names:
            mine = [r for t, r in zip(tasks, out) if t.name == n]
            res[n] = rolling_result(prep, n, [r for r in mine if isinstance(r, RollingBlock)])
            for r in mine:
                if isinstance(r, PlanForecast):
                    r.into(res[n])
                    reg_warns += r.registry_warnings
        return res, reg_warns

    return collect


def _only(res: TierResult, sids) -> TierResult:
    """``res`` restricted to the series ``sids`` (a global model's results on the whole source,
    :meth:`Prepared.global_view`, for the series this run plans)."""
    keep = set(sids)

    def rows(f):
        return f if f is None else f[f["series_id"].isin(keep)].reset_index(drop=True)

    models = {k: ([s for s in v if s in keep] if isinstance(v, list) else v) for k, v in res.models.items()}
    return TierResult(res.name, rows(res.rolling), rows(res.final),
                      {s: v for s, v in res.fallbacks.items() if s in keep},
                      {s: v for s, v in res.warnings.items() if s in keep}, models,
                      {s: v for s, v in res.reused.items() if s in keep})


def _merge(name: str, parts: list[TierResult]) -> TierResult:
    """One model's results of several series as one :class:`TierResult`."""
    models: dict = {}
    for p in parts:
        for k, v in p.models.items():
            if isinstance(v, dict):
                models.setdefault(k, {}).update(v)
            else:
                models.setdefault(k, []).extend(v)
    finals = [p.final for p in parts if p.final is not None]
    return TierResult(name, pd.concat([p.rolling for p in parts], ignore_index=True),
                      pd.concat(finals, ignore_index=True) if finals else None,
                      {k: v for p in parts for k, v in p.fallbacks.items()},
                      {k: v for p in parts for k, v in p.warnings.items()}, models,
                      {k: v for p in parts for k, v in p.reused.items()})


def origin_map(prep: Prepared, training_hours: int = 4) -> dict[str, list[pd.Timestamp]]:
    """Rolling origins per series: hourly for inference (pre-scaling needs a fresh
    forecast every hour), every ``training_hours`` (``forecast.training_origin_hours``) for training pools."""
    return {sid: bt.origins(w, "1h" if prep.meta[sid].kind == "inference" else f"{training_hours}h")
            for sid, w in prep.windows.items()}


def tier_forecasts(prep: Prepared, cfg: CapplanConfig, name: str, seed: int = 0, final: bool = True,
                   registry: ModelRegistry | None = None, progress: Progress = no_progress,
                   cache_root: str | None = None) -> TierResult:
    """Rolling-origin forecasts of one model over the tuning and evaluation windows
    and, with ``final``, its plan forecast fitted on all history (reusing fresh
    registry models, :func:`forecasting.registry_fit.fit_final`). Every plan forecast counts
    as issued at the series' last observed point. Used by :func:`forecast` and
    the Airflow forecast jobs.

    ``cache_root``: a store root whose rolling-block cache
    (:class:`capplan.run.cache.RollingCache`) supplies refit blocks whose inputs are
    unchanged; what was reused is in the result's ``reused``."""
    progress("forecast", f"rolling origins: {name}")
    ors = origin_map(prep, cfg.forecast.training_origin_hours)
    res = rolling_result(prep, name, [rolling_block(prep, cfg, name, seed, ors, cache_root)])
    if final:
        plan_forecast(prep, cfg, name, seed, registry or cfg.forecast.registry(cfg.models)).into(res)
    return res


@dataclass
class RollingBlock:
    """One call of :func:`forecasting.backtest.rolling_forecasts`: ``(forecasts, fallbacks,
    warnings)`` plus the cache's per-series ``stats`` and ``notes`` (:class:`capplan.run.cache.RollingCache`)."""

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


def refit_blocks(prep: Prepared, name: str, training_hours: int = 4) -> list[dict[str, list[pd.Timestamp]]]:
    """The origins of each refit block of model ``name`` (its ``refit_every``), per series,
    in the order :func:`forecasting.backtest.rolling_forecasts` fits them: each block is
    one fit, so :func:`rolling_block` on each gives the same forecasts as one call on all."""
    return bt.refit_blocks(origin_map(prep, training_hours), make(name).refit_every)


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
    :func:`forecasting.registry_fit.fit_final`) and its 7-day plan forecast from each series'
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
    """One fit of a global model (:func:`forecasting.tiers.is_global`) on every series' gathered windows,
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
    TensorFlow's thread pools of one thread (:func:`capplan.run.executor.single_threaded_tensorflow`)
    and Keras' seed draws of its own (:func:`capplan.run.executor.private_keras_seeds`), wherever
    it runs, so every executor trains the same network with the same arithmetic."""
    single_threaded_tensorflow()
    with private_keras_seeds(task.seed):
        if task.origins is None:
            return plan_forecast(task.prep, task.cfg, task.name, task.seed,
                                 task.cfg.forecast.registry(task.cfg.models))
        return rolling_block(task.prep, task.cfg, task.name, task.seed, task.origins, task.cache_root)

