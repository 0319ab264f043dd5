"""The stage functions every entry point calls (CLI, DAGs, dashboard), and their order.

1. :func:`load_stage` — a source (:mod:`capplan.sources`) -> tidy history.
2. :func:`regularise_stage` — :mod:`forecasting.regularise`, plus the
   training | tuning | evaluation windows (:func:`forecasting.backtest.split_windows`).
3. :func:`forecast_stage` — every model rolling over the tuning and evaluation
   windows (no look-ahead) and fitted on all history for the 7-day plan
   forecast (:func:`tier_forecasts`, :mod:`forecasting.reuse`), then combined
   (:mod:`forecasting.assemble`).
4. :func:`backtest_stage` — MASE, sMAPE, pinball and coverage per model and lead band.
5. :func:`search_stage` — per series, replay inputs (:mod:`optimizer.inputs`) and
   :func:`optimizer.tuning.search_one`, both in the series' task on :mod:`capplan.executor`.
6. :func:`plans_stage` — capacity per lead time (:mod:`optimizer.plan`).
7. :func:`export_stage` — dispatcher policy and manifests (:mod:`optimizer.exporters`),
   ``forecasts.parquet`` and ``report.json`` (:mod:`capplan.report`), written atomically.

:func:`plan_from_forecasts` runs 4–7 (shared by :func:`run_plan` and the
Airflow plan job, :func:`capplan.jobs.plan`); :func:`run_plan` runs them all.
``progress`` is any callable taking ``(stage, message)``. The data handed
between stages is in :mod:`capplan.containers`; the units of work each stage
submits to its executor are in :mod:`capplan.tasks`.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pandas as pd

from capplan import atomic
from capplan.cache import prune
from capplan.config import CapplanConfig
from capplan.containers import Forecasts, Prepared, Progress, TierResult, no_progress
from capplan.errors import InputError
from capplan.executor import Executor, Failed, make_executor
from capplan.report import Report, RunInfo, build_report, versions
from capplan.retention import folder_bytes, write_backtest
from capplan.runs import new_run_id, should_publish
from capplan.sources import LoadedHistory, load_source
from capplan.store import Store
from capplan.summary import fleet_summary
from capplan.tasks import (GLOBAL_MODELS, CachedSearch, CombineTask, GlobalTask, PlanForecast, RollingBlock,
                           SeriesForecastTask, by_series, combine_one, forecast_one, global_one, refit_blocks,
                           rolling_result, score_series, search_cached, search_task)
from capplan.tasks import origin_map, tier_forecasts  # noqa: F401  (re-used: the Airflow forecast jobs)
from forecasting import backtest as bt
from forecasting.assemble import PLAN_STEPS, ROLLING_MODELS  # noqa: F401  (PLAN_STEPS: re-used)
from forecasting.regularise import regularise, to_hourly
from forecasting.reuse import record_scores
from forecasting.tiers import TIER_NAMES
from forecasting.types import SeriesMeta
from optimizer.inputs import STEP, median_spacing, native_grid
from optimizer.layers import critical_ratios
from optimizer.plan import capacity_plan
from optimizer.policy import SeriesPlan
from optimizer.prices import price_for
from optimizer.tuning import SearchOutcome, SearchTask

# 1 ------------------------------------------------------------------------------
def load_stage(source: str, cfg: CapplanConfig, series: list[str] | None = None, timezone: str = "UTC") -> LoadedHistory:
    """Load a source and keep the requested series; the others stay in ``context``, which
    the cluster-wide outage rule and the global models read (:func:`regularise_stage`), so a
    series' data and forecasts do not depend on the selection.

    Raises InputError for an unknown ``--series`` id (listing the known ones).
    """
    loaded = load_source(source, timezone=timezone, config=cfg)
    known = sorted(loaded.frame["series_id"].unique())
    if series:
        unknown = [s for s in series if s not in known]
        if unknown:
            shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
            raise InputError(f"--series {', '.join(unknown)}: not in {loaded.label or source}; known: {shown}")
        keep = loaded.frame["series_id"].isin(series)
        loaded.context = loaded.frame[~keep].reset_index(drop=True)  # for the cluster-wide outage rule only
        loaded.frame = loaded.frame[keep].reset_index(drop=True)
    if loaded.frame.empty:
        raise InputError(f"{loaded.label or source}: no data")
    for sid in loaded.frame["series_id"].unique():
        loaded.meta.setdefault(sid, SeriesMeta())
    return loaded


# 2 ------------------------------------------------------------------------------
def regularise_stage(loaded: LoadedHistory, cfg: CapplanConfig) -> Prepared:
    """Regularise to 5 minutes, aggregate to hours, split windows per series. A series with
    no observed value at all is listed in ``failed`` (stage ``regularise``) and left out.

    When ``--series`` chose some of the source's series (``loaded.context`` holds the others),
    every series is regularised together, so the cluster-wide outage rule sees the same
    cluster, and the usable ones become :attr:`Prepared.fleet`, on which the global models
    train: a series' data and forecasts do not depend on the selection. A context series
    that cannot be used (too short, nothing observed) is left out of the fleet.

    A chosen series too short to split into windows is listed in ``failed`` too.

    Raises InputError when no chosen series has an observed value, every chosen series is
    too short to split, or one is sampled at 10 minutes or more (its median spacing,
    :func:`optimizer.inputs.median_spacing`: every other 5-minute point would be a gap;
    jittered 5-minute samples pass)."""
    ctx = loaded.context if loaded.context is not None and len(loaded.context) else None
    frame = loaded.frame if ctx is None else pd.concat([loaded.frame, ctx], ignore_index=True)
    chosen = set(loaded.frame["series_id"].unique())
    for sid, g in loaded.frame.groupby("series_id"):
        step = median_spacing(g)
        if step is not None and step >= 2 * STEP:  # every other grid point empty: not jitter
            raise InputError(f"series {sid}: sampled every {step.total_seconds():g} s (median spacing); capplan forecasts and replays "
                             f"on a {STEP.total_seconds() / 60:g}-minute grid, so coarser data would read as gaps: "
                             f"give samples every 5 minutes or finer (e.g. a Prometheus pull with step 5m)")
    h5, rep = regularise(frame)
    h1 = to_hourly(h5)
    windows, notes, short = {}, {}, {}
    for sid, g in h5.groupby("series_id"):
        notes[sid] = rep.notes(sid)
        idx = pd.DatetimeIndex(g["timestamp"])
        try:
            w = bt.split_windows(idx, cfg.plan.tune_days, cfg.plan.eval_days)
        except ValueError as exc:
            if sid in chosen:  # left out like a series with no observed value (a context one: not in the fleet)
                raw = loaded.frame.loc[loaded.frame["series_id"] == sid, "timestamp"]
                short[sid] = Failed(f"InputError: series {sid}: {len(raw)} row(s) in {loaded.label or 'the source'} "
                                    f"from {raw.min().isoformat()} to {raw.max().isoformat()} make {len(idx)} "
                                    f"point(s) on the 5-minute grid; splitting windows needs more ({exc}); give "
                                    "it a longer history")
            continue
        if w.rule != "days":
            notes[sid].append(f"windows: {w.rule}; tuning and evaluation use thirds of the history")
        windows[sid] = w
    native = {sid: native_grid(loaded.frame[loaded.frame["series_id"] == sid])
              for sid in windows if sid in chosen and loaded.meta.get(sid, SeriesMeta()).kind == "inference"}
    meta = {sid: loaded.meta.get(sid, SeriesMeta()) for sid in windows}
    everything = Prepared(h5, h1, meta, windows, rep, notes, {k: v for k, v in native.items() if v is not None})
    observed = h5.groupby("series_id")["value"].count()
    prep = everything if ctx is None else everything.select([s for s in windows if s in chosen])
    if ctx is not None:
        prep.fleet = everything.select([s for s in windows if observed.get(s, 0) > 0])
    empty = {sid: Failed(f"InputError: series {sid}: every value is missing (no observed demand); check its "
                         "query or file") for sid in prep.windows if observed.get(sid, 0) == 0}
    if short and not prep.windows:
        raise InputError("; ".join(f.error.removeprefix("InputError: ") for f in short.values()))
    if empty and len(empty) == len(prep.windows):
        raise InputError(f"{loaded.label or 'source'}: every value of every series is missing (no observed demand)")
    return prep.drop("regularise", {**short, **empty}) if empty or short else prep


# 3 ------------------------------------------------------------------------------
def combine_stage(prep: Prepared, results: dict[str, TierResult], progress: Progress = no_progress,
                  executor: Executor | None = None) -> tuple[Prepared, Forecasts]:
    """Combine and calibrate per lead bucket and quantile (:func:`forecasting.assemble.assemble`),
    one task per series on ``executor`` (:func:`combine_one`, which also scores the series'
    backtests: ``Forecasts.scores``), and gather every model's fallbacks and warnings.
    ``results`` must hold every model of :data:`forecasting.assemble.ROLLING_MODELS`
    (more are scored, never combined). A series whose combination raises is dropped and
    recorded in ``prep.failed``. Returns ``(prepared series still in play, forecasts)``."""
    ex = executor or _LOCAL
    progress("forecast", f"combining and calibrating per lead bucket on the {ex.name} executor")
    fallbacks: dict[str, list[str]] = {}
    warns: dict[str, list[str]] = {}
    for n in ROLLING_MODELS:
        for sid, msgs in results[n].fallbacks.items():
            for msg in msgs:
                if msg not in fallbacks.setdefault(sid, []):
                    fallbacks[sid].append(msg)
        for sid, w in results[n].warnings.items():
            warns.setdefault(sid, []).extend(w)
    rolling = {n: r.rolling for n, r in results.items()}
    roll_parts = {n: by_series(f) for n, f in rolling.items()}
    final_parts = {n: by_series(results[n].final) for n in ROLLING_MODELS}
    hist = by_series(prep.h5)
    sids = list(prep.windows)
    tasks = [CombineTask(sid, hist[sid], prep.windows[sid],
                         {n: p.get(sid, rolling[n].iloc[:0]) for n, p in roll_parts.items()},
                         {n: p.get(sid, results[n].final.iloc[:0]) for n, p in final_parts.items()})
             for sid in sids]
    prep, ok, bad = _split_failed(prep, sids, ex.map(combine_one, tasks, sids, _on_done(progress, "combine")))
    if bad:
        keep = set(prep.windows)
        rolling = {n: f[f["series_id"].isin(keep)].reset_index(drop=True) for n, f in rolling.items()}
    rolling["combined"] = pd.concat([r[0].rolling for _, r in ok], ignore_index=True)
    final = pd.concat([r[0].final for _, r in ok], ignore_index=True)
    combination = {s: c for _, r in ok for s, c in r[0].combination.items()}
    final_tiers = {n: results[n].final for n in TIER_NAMES}
    models = {n: r.models for n, r in results.items() if r.models}
    return prep, Forecasts(rolling, final, final_tiers, fallbacks, warns, combination, models,
                           scores={s: r[1] for s, r in ok})


def _submit_global(ex: Executor, prep: Prepared, cfg: CapplanConfig, names: list[str], seed: int,
                   cache_root: str | None, progress: Progress):
    """Submit every fit of the global models (:class:`GlobalTask`; each block and the plan fit
    are independent). Returns a function that waits for them and gives ``{name: TierResult}``
    and the registry warnings.

    Raises RuntimeError when a global fit raised (it concerns every series)."""
    tasks: list[GlobalTask] = []
    for n in names:
        tasks += [GlobalTask(prep, cfg, n, seed, b, cache_root) for b in refit_blocks(prep, n)]
        if n in ROLLING_MODELS:
            tasks.append(GlobalTask(prep, cfg, n, seed, None, cache_root))
    if not tasks:
        return lambda: ({}, [])
    labels = [f"{t.name} {'plan fit' if t.origins is None else 'rolling block'}" for t in tasks]
    progress("forecast", f"{', '.join(names)}: {len(tasks)} global fits (rolling refit blocks, plan) "
                         f"on the {ex.name} executor")
    gather = ex.submit(global_one, tasks, labels, _on_done(progress, "forecast"))

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


def forecast_stage(prep: Prepared, cfg: CapplanConfig, seed: int = 0, progress: Progress = no_progress,
                   extra_models: tuple[str, ...] = (), done: dict[str, TierResult] | None = None,
                   executor: Executor | None = None, cache_root: str | None = None) -> tuple[Prepared, Forecasts]:
    """Every tier and benchmark (:func:`tier_forecasts`), then :func:`combine_stage`, all on ``executor``.

    Tasks, submitted in this order: the fits of :data:`GLOBAL_MODELS` (the LSTM:
    one task per rolling refit block and one for the plan fit, each training one
    network on every series' gathered windows, :class:`GlobalTask`), then one task
    per series for the per-series models (:func:`forecast_one`), then one per series
    for the combination and the backtest scores (:func:`combine_one`). The driver only
    orchestrates. A series whose task raises is dropped and recorded in
    ``prep.failed`` (the global fits are then redone without it, as a run without it
    would be). ``extra_models`` adds benchmarks that are scored but never combined
    (e.g. ``prophet``); ``done`` holds models already forecast elsewhere (the Airflow
    forecast jobs' stored results), which are not recomputed. ``cache_root``: a store
    root whose cache supplies unchanged rolling-origin blocks (:mod:`capplan.cache`);
    ``Forecasts.reused`` says what was reused.
    Returns ``(prepared series still in play, forecasts)``.

    Raises InputError when every series failed, RuntimeError when a global fit failed.
    """
    results = dict(done or {})
    wanted = [n for n in ROLLING_MODELS + tuple(extra_models) if n not in results]
    per_series = tuple(n for n in wanted if n not in GLOBAL_MODELS)
    global_models = [n for n in wanted if n in GLOBAL_MODELS]
    ex = executor or _LOCAL
    warns: dict[str, list[str]] = {}
    gather = None
    sids = list(prep.windows)
    # the global fits first: each is one of the longest tasks, and must not be the tail
    glob = _submit_global(ex, prep.global_view(), cfg, global_models, seed, cache_root, progress)
    if per_series:
        progress("forecast", f"{len(sids)} series x {', '.join(per_series)} on the {ex.name} executor")
        tasks = [SeriesForecastTask(prep.select([s]), cfg, per_series, seed, cache_root) for s in sids]
        gather = ex.submit(forecast_one, tasks, sids, _on_done(progress, "forecast"))
    if gather is not None:
        prep, ok, bad = _split_failed(prep, sids, gather())
        if bad:
            # without the failed series, as a run without them would be
            glob = _submit_global(ex, prep.global_view(), cfg, global_models, seed, cache_root, progress)
        for n in per_series:
            results[n] = _merge(n, [r[0][n] for _, r in ok])
        for s, r in ok:
            if r[1]:
                warns.setdefault(s, []).extend(r[1])
    glob_res, reg_warns = glob()
    results.update({n: _only(r, prep.windows) for n, r in glob_res.items()})
    order = [*ROLLING_MODELS, *extra_models]
    results = {n: results[n] for n in sorted(results, key=lambda n: order.index(n) if n in order else len(order))}
    prep, fc = combine_stage(prep, results, progress, ex)
    for n, r in results.items():
        for sid, st in r.reused.items():
            if sid in prep.windows:
                fc.reused.setdefault(sid, {}).setdefault("rolling", {})[n] = st
    for s, w in warns.items():
        fc.warnings.setdefault(s, []).extend(w)
    for w in reg_warns:
        for sid in prep.windows:
            fc.warnings.setdefault(sid, []).append(w)
    return prep, fc


def _on_done(progress: Progress, stage: str):
    """Executor progress as ``[done/total] series`` lines of ``stage``."""
    return lambda i, n, label: progress(stage, f"[{i}/{n}] {label}")


def _split_failed(prep: Prepared, sids: list[str], out: list) -> tuple[Prepared, list, dict]:
    """Per-series forecast-stage results ``out`` (in ``sids`` order) as ``(prep without the
    failed series, [(series, result)] of the others, {series: Failed})``; the failed are
    recorded in ``prep.failed``. Raises InputError when every series failed."""
    bad = {s: r for s, r in zip(sids, out) if isinstance(r, Failed)}
    ok = [(s, r) for s, r in zip(sids, out) if not isinstance(r, Failed)]
    if bad:
        prep = prep.drop("forecast", bad)
        if not ok:
            raise InputError(f"every series failed in the forecast stage: {_failures(prep)}")
    return prep, ok, bad


def _failures(prep: Prepared) -> str:
    return "; ".join(f"{s}: {f['error']}" for s, f in prep.failed.items())


_LOCAL = Executor()


# 4 ------------------------------------------------------------------------------
def backtest_stage(prep: Prepared, fc: Forecasts) -> dict[str, dict]:
    """Scores per series -> model -> band (``1h``, ``24h``, ``7d``, ``all``) on the
    evaluation window (forecasts issued in it, targets in it); the combination
    and calibration were fitted on the tuning window before it (:func:`score_series`).
    A model scored where the series was combined (``fc.scores``, :func:`combine_one`) is taken
    from there; every other model of ``fc.rolling`` (e.g. the peers that ``capplan backtest``
    adds after the forecast stage, :func:`forecasting.peers.peer_forecasts`) is scored here."""
    done = fc.scores or {}
    hist = by_series(prep.h5)
    out = {}
    for sid, w in prep.windows.items():
        have = done.get(sid, {})
        todo = {m: f[f["series_id"] == sid] for m, f in fc.rolling.items() if m not in have}
        out[sid] = {**have, **(score_series(hist[sid], w, todo) if todo else {})}
    return out


# 5 ------------------------------------------------------------------------------
def _search_inputs(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int, cache_root: str | None = None
                   ) -> list["CachedSearch"]:
    """Per series (sorted by id), what :func:`search_task` needs, as plain data for a worker."""
    book = cfg.price_book()
    comb = fc.rolling["combined"]
    return [CachedSearch(sid, w, prep.native.get(sid, prep.h5[prep.h5["series_id"] == sid]),
                         comb[comb["series_id"] == sid], prep.meta[sid], cfg, seed, book, cache_root)
            for sid, w in sorted(prep.windows.items())]


def search_tasks(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int = 0) -> list[SearchTask]:
    """One :class:`optimizer.tuning.SearchTask` per series (sorted by id) (:func:`search_task`)."""
    return [x.task() for x in _search_inputs(prep, fc, cfg, seed)]


def search_stage(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int = 0,
                 progress: Progress = no_progress, executor: Executor | None = None,
                 cache_root: str | None = None) -> dict[str, SearchOutcome]:
    """Tune each series on its tuning window; score tuned, random-search and
    baseline policies on the evaluation window, which the search never saw.
    One :func:`optimizer.tuning.search_one` task per series on ``executor``; a
    series whose search raises is left out and recorded in ``prep.failed``.
    With ``cache_root`` an identical task's stored outcome, or else an identical
    tuning window's tuned policy, is reused (:func:`search_cached`) and
    ``fc.reused[series]["search"]`` says which (``reused``, ``tuning_reused``, ``computed``)."""
    tasks = _search_inputs(prep, fc, cfg, seed, cache_root)
    ex = executor or _LOCAL
    progress("search", f"{len(tasks)} series, {cfg.plan.n_calls} evaluations each (Bayesian + random) on the "
                       f"{ex.name} executor")
    results = ex.map(search_cached, tasks, [t.series_id for t in tasks], _on_done(progress, "search"))
    for t, r in zip(tasks, results):
        if isinstance(r, Failed):
            prep.failed[t.series_id] = {"stage": "search", "error": r.error, "where": r.where}
        elif cache_root:
            fc.reused.setdefault(t.series_id, {})["search"] = r[1]
            if r[2]:
                fc.warnings.setdefault(t.series_id, []).append(r[2])
    out = {t.series_id: r[0] for t, r in zip(tasks, results) if not isinstance(r, Failed)}
    if not out:
        raise InputError(f"every series failed: {_failures(prep)}")
    return out


# 6 ------------------------------------------------------------------------------
def plans_stage(prep: Prepared, fc: Forecasts, outcomes: dict[str, SearchOutcome], run_id: str,
                cfg: CapplanConfig) -> list[SeriesPlan]:
    """Turn tuned parameters and the 7-day forecast into capacity per lead time
    (:func:`optimizer.plan.capacity_plan`, with the series' spot critical ratio for a
    newsvendor daily layer), one :class:`SeriesPlan` per series."""
    plans = []
    wk = fc.final_tiers["weekly"]
    book = cfg.price_book()
    for sid, oc in outcomes.items():
        meta = prep.meta[sid]
        share = critical_ratios(price_for(book, meta.gpu_model)[0], cfg.plan.interruption_rate,
                                cfg.plan.recovery_s)["spot"]
        plan = capacity_plan(meta.kind, oc.params, fc.final[fc.final["series_id"] == sid],
                             wk[wk["series_id"] == sid], meta.quota_gpus, prep.h5[prep.h5["series_id"] == sid],
                             spot_share=share)
        plans.append(SeriesPlan(series_id=sid, kind=meta.kind, unit=meta.unit, gpu_model=meta.gpu_model,
                                timezone=meta.timezone, params=oc.params, plan=plan, recommended=oc.recommended,
                                baseline=oc.baseline, forecast_version=run_id,
                                fallbacks=prep.notes.get(sid, []) + fc.fallbacks.get(sid, []) + oc.notes))
    return plans


# 7 ------------------------------------------------------------------------------
def export_stage(out: Path, report: Report, plans: list[SeriesPlan], fc: Forecasts,
                 outcomes: dict[str, SearchOutcome], prep: Prepared, cfg: CapplanConfig,
                 progress: Progress = no_progress) -> list[str]:
    """Write the output folder ``out`` atomically (swapped in whole). Returns its file names.

    Files: ``policy.yaml``, ``crds/``, ``manifests/``, ``forecasts.parquet`` (plan
    forecasts: combined and per tier), ``report.json``, ``trials.parquet``,
    ``replay.parquet``, ``backtest.parquet`` (rolling forecasts), ``history.parquet`` (and
    ``history_native.parquet``: inference series sampled finer than 5 minutes, on their own grid). Before
    writing, the exporters' warnings join the series' warnings and ``report.summary`` is set
    (:func:`capplan.summary.fleet_summary`).
    """
    from optimizer.exporters import export_warnings, write_all

    t0 = time.perf_counter()
    for sid, ws in export_warnings(plans, cfg.export).items():  # what to act on before applying
        report.series[sid].warnings += ws
    report.summary = fleet_summary(report)
    with atomic.replace_dir(out) as tmp:
        progress("export", "writing policy and manifests")
        write_all(plans, tmp, cfg.export)
        frames = [fc.final] + [f for f in fc.final_tiers.values()]
        pd.concat(frames, ignore_index=True).to_parquet(tmp / "forecasts.parquet", index=False)
        trials = [dict(t, series_id=sid, params=json.dumps(t["params"])) for sid, oc in outcomes.items()
                  for t in oc.trials]
        pd.DataFrame(trials).to_parquet(tmp / "trials.parquet", index=False)
        pd.concat([oc.replay for oc in outcomes.values()], ignore_index=True).to_parquet(tmp / "replay.parquet",
                                                                                         index=False)
        write_backtest(tmp / "backtest.parquet", list(fc.rolling.values()),
                       {sid: tuple(s.windows.evaluation) for sid, s in report.series.items()}, cfg.retention.backtest)
        prep.h5.to_parquet(tmp / "history.parquet", index=False)
        if prep.native:  # inference series finer than 5 minutes, as the replay saw them
            pd.concat(list(prep.native.values()), ignore_index=True).to_parquet(tmp / "history_native.parquet",
                                                                                index=False)
        # report.json names itself and the export stage up to now, so the file equals what the run returns
        names = sorted([str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()] + ["report.json"])
        report.run.files = names
        report.run.stage_seconds = {**report.run.stage_seconds, "export": round(time.perf_counter() - t0, 3)}
        others = folder_bytes(tmp)
        for _ in range(3):  # the size counts report.json, which holds the size: settles in two passes
            text = report.to_json(indent=2) + "\n"
            report.run.size_bytes = others + len(text.encode())
        (tmp / "report.json").write_text(report.to_json(indent=2) + "\n")
    return names


# the order ---------------------------------------------------------------------------
class _Timer:
    """Seconds per stage, for ``report.run.stage_seconds``."""

    def __init__(self, timings: dict[str, float] | None = None):
        self.timings = timings if timings is not None else {}

    def __call__(self, name, fn, *a, **k):
        s = time.perf_counter()
        r = fn(*a, **k)
        self.timings[name] = round(time.perf_counter() - s, 3)
        return r


def plan_from_forecasts(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, run: RunInfo, out: Path,
                        progress: Progress = no_progress, timer: _Timer | None = None,
                        missing: dict[str, str] | None = None, executor: Executor | None = None,
                        cache_root: str | None = None) -> Report:
    """Stages 4–7: backtest (whose scores the models this run fitted record in the registry,
    :func:`forecasting.reuse.record_scores`), search (on ``executor``), plans, report and export to ``out``.

    ``run``: the report's run section (id, seed, source ...); its duration,
    stage seconds and files are filled in here. ``missing``: series left out
    before this point, with the reason; series that failed on their own are
    in ``prep.failed`` and reach the report's ``failed``. ``cache_root``: reuse identical
    searches (:func:`search_stage`). Returns the report (as written).
    """
    t0 = time.perf_counter()
    timer = timer or _Timer()
    progress("backtest", "scoring rolling-origin forecasts")
    scores = timer("backtest", backtest_stage, prep, fc)
    # each model this run fitted records its backtest scores (DESIGN.md, model registry)
    registry = cfg.forecast.registry(cfg.models)
    record_scores(registry, fc.models, scores)
    for w in registry.warnings:
        for sid in prep.windows:
            fc.warnings.setdefault(sid, []).append(w)
    outcomes = timer("search", search_stage, prep, fc, cfg, run.seed, progress, executor, cache_root)
    plans = plans_stage(prep, fc, outcomes, run.run_id, cfg)
    report = build_report(run, prep, fc, scores, outcomes, plans, cfg.plan.coverage_target, missing, prep.failed)
    report.run.duration_s = round((run.duration_s or 0.0) + time.perf_counter() - t0, 3)
    report.run.stage_seconds = timer.timings
    timer("export", export_stage, Path(out), report, plans, fc, outcomes, prep, cfg, progress)
    return report  # run.files and stage_seconds["export"] as export_stage wrote them into report.json


def run_plan(source: str, cfg: CapplanConfig, out: Path, series: list[str] | None = None, seed: int = 0,
             timezone: str = "UTC", progress: Progress = no_progress, store: Store | None = None,
             executor: Executor | None = None, publish: bool | None = None, reuse: bool = True) -> Report:
    """Run every stage and write ``out``. With ``store`` the run is written to
    ``runs/<id>/`` first, marked LATEST when it is published
    (:func:`capplan.runs.should_publish`: ``publish``, else a whole-source run into
    the default ``--out``), then copied to ``out``. Returns the report; series that
    failed on their own are in its ``failed`` (the rest is planned).

    ``executor``: where the per-series work runs; default: the one ``cfg.plan``
    names (:func:`capplan.executor.make_executor`), started here and closed at the end.

    ``reuse`` (with ``store``): take rolling-origin blocks and searches whose inputs
    are unchanged from the store's cache (:mod:`capplan.cache`) and store the new
    ones; the report's per-series ``reused`` says what was taken. Entries unused for
    :data:`capplan.cache.KEEP_DAYS` days are pruned after the run.

    Raises
    ------
    InputError: bad input (exit code 2 in the CLI).
    """
    t0 = time.perf_counter()
    started = dt.datetime.now(dt.timezone.utc)
    timer = _Timer()
    progress("load", f"reading {source}")
    loaded = timer("load", load_stage, source, cfg, series, timezone)
    progress("regularise", f"{loaded.frame['series_id'].nunique()} series, {len(loaded.frame)} rows")
    prep = timer("regularise", regularise_stage, loaded, cfg)
    for sid in prep.notes:
        prep.notes[sid].extend(loaded.notes_for(sid, prep.notes))
    publish = should_publish(series, out, publish) if store is not None else None
    ex = executor or make_executor(cfg.plan.executor, cfg.plan.workers, cfg.plan.scheduler)
    cache_root = str(store.root) if store is not None and reuse else None
    try:
        prep, fc = timer("forecast", forecast_stage, prep, cfg, seed, progress, executor=ex, cache_root=cache_root)
        for sid in prep.windows:  # the data's own warnings first (suspect spikes: capplan.sources.implausible)
            if sid in loaded.warnings:
                fc.warnings[sid] = [loaded.warnings[sid], *fc.warnings.get(sid, [])]
        run = RunInfo(run_id=new_run_id(started, seed), seed=seed, started_at=started.isoformat(),
                      duration_s=round(time.perf_counter() - t0, 3), source=source, versions=versions(),
                      coverage_target=cfg.plan.coverage_target, n_calls=cfg.plan.n_calls, executor=ex.name,
                      series_filter=list(series) if series else None, published=publish)
        if store is None:
            return plan_from_forecasts(prep, fc, cfg, run, Path(out), progress, timer, executor=ex)
        # the store first, then LATEST, then the --out copy: LATEST is never behind --out (capplan.runs)
        report = plan_from_forecasts(prep, fc, cfg, run, store.run_dir(run.run_id), progress, timer, executor=ex,
                                     cache_root=cache_root)
    finally:
        if executor is None:
            ex.close()
    if publish:
        store.mark_latest(run.run_id)
    store.copy_run(run.run_id, out)
    if cache_root:
        prune(cache_root)
    store.prune_runs(cfg.retention)
    return report
