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
between stages is in :mod:`capplan.containers`.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from capplan import atomic
from capplan.cache import RollingCache, SearchCache, prune
from capplan.config import CapplanConfig
from capplan.containers import Forecasts, Prepared, Progress, TierResult, no_progress
from capplan.errors import InputError
from capplan.executor import Executor, Failed, make_executor
from capplan.report import Report, RunInfo, build_report, versions
from capplan.runs import new_run_id, should_publish
from capplan.sources import LoadedHistory, load_source
from capplan.store import Store
from capplan.summary import fleet_summary
from forecasting import backtest as bt
from forecasting.assemble import PLAN_STEPS, ROLLING_MODELS, STEP, assemble  # noqa: F401  (PLAN_STEPS: re-used)
from forecasting.bounds import sanitise, sanitise_rolling, upper_by_series
from forecasting.metrics import seasonal_scale
from forecasting.registry import ModelRegistry
from forecasting.regularise import regularise, to_hourly
from forecasting.reuse import fit_final
from forecasting.tiers import TIER_NAMES, make
from forecasting.types import SeriesMeta
from optimizer.inputs import native_grid, replay_input
from optimizer.plan import capacity_plan
from optimizer.policy import SeriesPlan
from optimizer.tuning import SearchOutcome, SearchTask, search_one

# 1 ------------------------------------------------------------------------------
def load_stage(source: str, cfg: CapplanConfig, series: list[str] | None = None, timezone: str = "UTC") -> LoadedHistory:
    """Load a source and keep the requested series.

    Raises InputError for an unknown ``--series`` id (listing the known ones).
    """
    loaded = load_source(source, timezone=timezone, config=cfg)
    known = sorted(loaded.frame["series_id"].unique())
    if series:
        unknown = [s for s in series if s not in known]
        if unknown:
            shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
            raise InputError(f"--series {', '.join(unknown)}: not in {loaded.label or source}; known: {shown}")
        loaded.frame = loaded.frame[loaded.frame["series_id"].isin(series)].reset_index(drop=True)
    if loaded.frame.empty:
        raise InputError(f"{loaded.label or source}: no data")
    for sid in loaded.frame["series_id"].unique():
        loaded.meta.setdefault(sid, SeriesMeta())
    return loaded


# 2 ------------------------------------------------------------------------------
def regularise_stage(loaded: LoadedHistory, cfg: CapplanConfig) -> Prepared:
    """Regularise to 5 minutes, aggregate to hours, split windows per series."""
    h5, rep = regularise(loaded.frame)
    h1 = to_hourly(h5)
    windows, notes = {}, {}
    for sid, g in h5.groupby("series_id"):
        notes[sid] = rep.notes(sid)
        idx = pd.DatetimeIndex(g["timestamp"])
        try:
            w = bt.split_windows(idx, cfg.plan.tune_days, cfg.plan.eval_days)
        except ValueError as exc:
            raise InputError(f"series {sid}: {exc}") from None
        if w.rule != "days":
            notes[sid].append(f"windows: {w.rule}; tuning and evaluation use thirds of the history")
        windows[sid] = w
    native = {sid: native_grid(loaded.frame[loaded.frame["series_id"] == sid])
              for sid in windows if loaded.meta.get(sid, SeriesMeta()).kind == "inference"}
    return Prepared(h5, h1, loaded.meta, windows, rep, notes, {k: v for k, v in native.items() if v is not None})


# 3 ------------------------------------------------------------------------------
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
    opts = cfg.forecast.tier_options().get(name, {})
    progress("forecast", f"rolling origins: {name}")
    cache = RollingCache(cache_root, name) if cache_root else None
    f, fb, wr = bt.rolling_forecasts(name, prep.h5, prep.h1, prep.meta, origin_map(prep), seed, opts, cache=cache)
    wr = {s: list(w) for s, w in wr.items()}
    for sid, notes in (cache.notes if cache else {}).items():
        wr.setdefault(sid, []).extend(notes)
    res = TierResult(name, sanitise_rolling(f, prep.h5), None, {s: [f"backtest: {m}"] for s, m in fb.items()},
                     wr, reused=cache.stats if cache else {})
    if not final:
        return res
    last5 = prep.h5.groupby("series_id")["timestamp"].max()
    m = make(name, seed=seed, **opts)
    data = prep.h1 if m.step == "1h" else prep.h5
    if m.step == "1h":
        # only complete hours: the bucket holding the last 5-minute point counts if it ends there
        cut = {sid: (t + STEP).floor("1h") - pd.Timedelta("1h") for sid, t in last5.items()}
        data = pd.concat([g[g["timestamp"] <= cut[sid]] for sid, g in data.groupby("series_id")], ignore_index=True)
    m, res.models = fit_final(name, m, data, prep.meta, registry or cfg.forecast.registry(cfg.models))
    f = m.predict(data)
    if m.step == "1h":
        f = bt.expand_to_grid(f)
    f["issued_at"] = f["series_id"].map(last5)
    res.final = sanitise(f[f["timestamp"] > f["issued_at"]], upper_by_series(prep.h5))
    # the report says which model made each plan forecast: a series the tier fell back on
    # is listed under "fallback", never as fitted or reused
    for sid, msg in m.fallbacks.items():
        res.fallbacks.setdefault(sid, []).append(f"plan: {msg}")
    if res.models:
        res.models = {**res.models, "fallback": sorted(m.fallbacks),
                      **{k: [s for s in res.models.get(k, []) if s not in m.fallbacks] for k in ("fitted", "reused")}}
    return res


def combine_stage(prep: Prepared, results: dict[str, TierResult], progress: Progress = no_progress) -> Forecasts:
    """Combine and calibrate per lead bucket and quantile (:func:`forecasting.assemble.assemble`)
    and gather every model's fallbacks and warnings. ``results`` must hold every model
    of :data:`forecasting.assemble.ROLLING_MODELS` (more are scored, never combined)."""
    progress("forecast", "combining and calibrating per lead bucket")
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
    a = assemble(prep.h5, list(prep.windows), rolling, {n: results[n].final for n in ROLLING_MODELS})
    rolling["combined"] = a.rolling
    final_tiers = {n: results[n].final for n in TIER_NAMES}
    models = {n: r.models for n, r in results.items() if r.models}
    return Forecasts(rolling, a.final, final_tiers, fallbacks, warns, a.combination, models)


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
    """Every tier and benchmark (:func:`tier_forecasts`), then :func:`combine_stage`.

    The per-series models run one task per series on ``executor``
    (:func:`forecast_one`); :data:`GLOBAL_MODELS` (the LSTM) train once here on
    every remaining series. A series whose task raises is dropped and recorded
    in ``prep.failed``. ``extra_models`` adds benchmarks that are scored but never
    combined (e.g. ``prophet``); ``done`` holds models already forecast elsewhere
    (the Airflow forecast jobs' stored results), which are not recomputed.
    ``cache_root``: a store root whose cache supplies unchanged rolling-origin
    blocks (:mod:`capplan.cache`); ``Forecasts.reused`` says what was reused.
    Returns ``(prepared series still in play, forecasts)``.
    """
    results = dict(done or {})
    wanted = [n for n in ROLLING_MODELS + tuple(extra_models) if n not in results]
    per_series = tuple(n for n in wanted if n not in GLOBAL_MODELS)
    global_models = [n for n in wanted if n in GLOBAL_MODELS]
    ex = executor or _LOCAL
    warns: dict[str, list[str]] = {}
    registry = cfg.forecast.registry(cfg.models)
    gather = None
    sids = list(prep.windows)
    if per_series:
        progress("forecast", f"{len(sids)} series x {', '.join(per_series)} on the {ex.name} executor")
        tasks = [SeriesForecastTask(prep.select([s]), cfg, per_series, seed, cache_root) for s in sids]
        gather = ex.submit(forecast_one, tasks, sids, _on_done(progress, "forecast"))

    def global_fits(p: Prepared) -> dict[str, TierResult]:
        return {n: tier_forecasts(p, cfg, n, seed, n in ROLLING_MODELS, registry, progress, cache_root)
                for n in global_models}

    # the global models train here while the workers run the per-series tasks
    glob = global_fits(prep)
    if gather is not None:
        out = gather()
        bad = {s: r for s, r in zip(sids, out) if isinstance(r, Failed)}
        ok = [(s, r) for s, r in zip(sids, out) if not isinstance(r, Failed)]
        if bad:
            prep = prep.drop("forecast", bad)
            if not ok:
                raise InputError(f"every series failed in the forecast stage: {_failures(prep)}")
            glob = global_fits(prep)  # without the failed series, as a run without them would be
        for n in per_series:
            results[n] = _merge(n, [r[0][n] for _, r in ok])
        for s, r in ok:
            if r[1]:
                warns.setdefault(s, []).extend(r[1])
    results.update(glob)
    order = [*ROLLING_MODELS, *extra_models]
    results = {n: results[n] for n in sorted(results, key=lambda n: order.index(n) if n in order else len(order))}
    fc = combine_stage(prep, results, progress)
    for n, r in results.items():
        for sid, st in r.reused.items():
            fc.reused.setdefault(sid, {}).setdefault("rolling", {})[n] = st
    for s, w in warns.items():
        fc.warnings.setdefault(s, []).extend(w)
    for w in registry.warnings:
        for sid in prep.windows:
            fc.warnings.setdefault(sid, []).append(w)
    return prep, fc


def _on_done(progress: Progress, stage: str):
    """Executor progress as ``[done/total] series`` lines of ``stage``."""
    return lambda i, n, label: progress(stage, f"[{i}/{n}] {label}")


def _failures(prep: Prepared) -> str:
    return "; ".join(f"{s}: {f['error']}" for s, f in prep.failed.items())


_LOCAL = Executor()


# 4 ------------------------------------------------------------------------------
def backtest_stage(prep: Prepared, fc: Forecasts) -> dict[str, dict]:
    """Scores per series -> model -> band (``1h``, ``24h``, ``7d``, ``all``) on the
    evaluation window (forecasts issued in it, targets in it); the combination
    and calibration were fitted on the tuning window before it. MASE is scaled
    by the seasonal-naive (1 day) in-sample MAE of the training part only."""
    out = {}
    for sid, w in prep.windows.items():
        g = prep.h5[prep.h5["series_id"] == sid]
        s = pd.Series(g["value"].to_numpy(), index=pd.DatetimeIndex(g["timestamp"]))
        scale = seasonal_scale(s[s.index < w.tune_start].to_numpy(), 288)
        out[sid] = {}
        for model, f in fc.rolling.items():
            sc = bt.score(s, f[f["series_id"] == sid], scale, (w.eval_start, w.end))
            if sc:
                out[sid][model] = sc
    return out


# 5 ------------------------------------------------------------------------------
def search_task(sid: str, w: bt.Windows, history: pd.DataFrame, combined: pd.DataFrame, meta: SeriesMeta,
                cfg: CapplanConfig, seed: int = 0, book: dict | None = None) -> SearchTask:
    """One series' :class:`optimizer.tuning.SearchTask`: replay inputs on its tuning and
    evaluation windows (:func:`optimizer.inputs.replay_input`) from its history (5-minute,
    or its native grid for a finer inference series) and its combined rolling forecasts.
    ``book``: GPU prices (default ``cfg.price_book()``)."""
    book = cfg.price_book() if book is None else book
    rk = {"interruption_rate": cfg.plan.interruption_rate, "recovery_s": cfg.plan.recovery_s}
    tune, tnotes = replay_input(history, combined, meta, book, w.tune_start, w.eval_start - STEP, **rk)
    evalw, _ = replay_input(history, combined, meta, book, w.eval_start, w.end, **rk)
    return SearchTask(sid, meta.kind, tune, evalw, cfg.plan.search_settings(), seed, tnotes)


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
    """``(outcome, "reused" | "computed", note)``: the stored outcome of an identical
    search task (:class:`capplan.cache.SearchCache`), else :func:`optimizer.tuning.search_one`,
    stored for the next run. ``note`` says when a stored entry was not trusted."""
    task = item.task()
    if not item.cache_root:
        return search_one(task), "computed", ""
    cache = SearchCache(item.cache_root)
    key = cache.key(task)
    oc, why = cache.get(key)
    if oc is not None:
        return oc, "reused", ""
    oc = search_one(task)
    cache.put(key, oc)
    return oc, "computed", f"cache: search entry not trusted ({why}); recomputed" if why else ""


def search_stage(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int = 0,
                 progress: Progress = no_progress, executor: Executor | None = None,
                 cache_root: str | None = None) -> dict[str, SearchOutcome]:
    """Tune each series on its tuning window; score tuned, random-search and
    baseline policies on the evaluation window, which the search never saw.
    One :func:`optimizer.tuning.search_one` task per series on ``executor``; a
    series whose search raises is left out and recorded in ``prep.failed``.
    With ``cache_root`` an identical task's stored outcome is reused
    (:func:`search_cached`) and ``fc.reused[series]["search"]`` says which."""
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
def plans_stage(prep: Prepared, fc: Forecasts, outcomes: dict[str, SearchOutcome], run_id: str) -> list[SeriesPlan]:
    """Turn tuned parameters and the 7-day forecast into capacity per lead time
    (:func:`optimizer.plan.capacity_plan`), one :class:`SeriesPlan` per series."""
    plans = []
    wk = fc.final_tiers["weekly"]
    for sid, oc in outcomes.items():
        meta = prep.meta[sid]
        plan = capacity_plan(meta.kind, oc.params, fc.final[fc.final["series_id"] == sid],
                             wk[wk["series_id"] == sid], meta.quota_gpus, prep.h5[prep.h5["series_id"] == sid])
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
        pd.concat(list(fc.rolling.values()), ignore_index=True).to_parquet(tmp / "backtest.parquet", index=False)
        prep.h5.to_parquet(tmp / "history.parquet", index=False)
        if prep.native:  # inference series finer than 5 minutes, as the replay saw them
            pd.concat(list(prep.native.values()), ignore_index=True).to_parquet(tmp / "history_native.parquet",
                                                                                index=False)
        (tmp / "report.json").write_text(report.to_json(indent=2) + "\n")
        names = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
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
    """Stages 4–7: backtest, search (on ``executor``), plans, report and export to ``out``.

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
    outcomes = timer("search", search_stage, prep, fc, cfg, run.seed, progress, executor, cache_root)
    plans = plans_stage(prep, fc, outcomes, run.run_id)
    report = build_report(run, prep, fc, scores, outcomes, plans, cfg.plan.coverage_target, missing, prep.failed)
    report.run.duration_s = round((run.duration_s or 0.0) + time.perf_counter() - t0, 3)
    report.run.stage_seconds = timer.timings
    files = timer("export", export_stage, Path(out), report, plans, fc, outcomes, prep, cfg, progress)
    report.run.files = files
    report.run.stage_seconds = timer.timings
    return report


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
    return report
