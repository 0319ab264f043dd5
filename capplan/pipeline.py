"""The stage functions every entry point calls (CLI, DAGs, dashboard), and their order.

1. :func:`load_stage` — a source (:mod:`capplan.sources`) -> tidy history.
2. :func:`regularise_stage` — :mod:`forecasting.regularise`, plus the
   training | tuning | evaluation windows (:func:`forecasting.backtest.split_windows`).
3. :func:`forecast_stage` — every model rolling over the tuning and evaluation
   windows (no look-ahead) and fitted on all history for the 7-day plan
   forecast (:func:`tier_forecasts`, :mod:`forecasting.reuse`), then combined
   (:mod:`forecasting.assemble`).
4. :func:`backtest_stage` — MASE, sMAPE, pinball and coverage per model and lead band.
5. :func:`search_stage` — per series, :func:`optimizer.tuning.search_one` on
   replay inputs (:mod:`optimizer.inputs`), through :mod:`capplan.executor`.
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
from pathlib import Path

import pandas as pd

from capplan import atomic
from capplan.config import CapplanConfig
from capplan.containers import Forecasts, Prepared, Progress, TierResult, no_progress
from capplan.errors import InputError
from capplan.report import Report, RunInfo, build_report, versions
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
from optimizer.inputs import replay_input
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
    return Prepared(h5, h1, loaded.meta, windows, rep, notes)


# 3 ------------------------------------------------------------------------------
def origin_map(prep: Prepared) -> dict[str, list[pd.Timestamp]]:
    """Rolling origins per series: hourly for inference (pre-scaling needs a fresh
    forecast every hour), every 4 hours for training pools."""
    return {sid: bt.origins(w, "1h" if prep.meta[sid].kind == "inference" else "4h")
            for sid, w in prep.windows.items()}


def tier_forecasts(prep: Prepared, cfg: CapplanConfig, name: str, seed: int = 0, final: bool = True,
                   registry: ModelRegistry | None = None, progress: Progress = no_progress) -> TierResult:
    """Rolling-origin forecasts of one model over the tuning and evaluation windows
    and, with ``final``, its plan forecast fitted on all history (reusing fresh
    registry models, :func:`forecasting.reuse.fit_final`). Every plan forecast counts
    as issued at the series' last observed point. Used by :func:`forecast_stage` and
    the Airflow forecast jobs."""
    opts = cfg.forecast.tier_options().get(name, {})
    progress("forecast", f"rolling origins: {name}")
    f, fb, wr = bt.rolling_forecasts(name, prep.h5, prep.h1, prep.meta, origin_map(prep), seed, opts)
    res = TierResult(name, sanitise_rolling(f, prep.h5), None, {s: [m] for s, m in fb.items()}, dict(wr))
    if not final:
        return res
    last5 = prep.h5.groupby("series_id")["timestamp"].max()
    m = make(name, seed=seed, **opts)
    data = prep.h1 if m.step == "1h" else prep.h5
    if m.step == "1h":
        # only complete hours: the bucket holding the last 5-minute point counts if it ends there
        cut = {sid: (t + STEP).floor("1h") - pd.Timedelta("1h") for sid, t in last5.items()}
        data = pd.concat([g[g["timestamp"] <= cut[sid]] for sid, g in data.groupby("series_id")], ignore_index=True)
    m, res.models = fit_final(name, m, data, prep.meta, registry or ModelRegistry(cfg.models))
    f = m.predict(data)
    if m.step == "1h":
        f = bt.expand_to_grid(f)
    f["issued_at"] = f["series_id"].map(last5)
    res.final = sanitise(f[f["timestamp"] > f["issued_at"]], upper_by_series(prep.h5))
    for sid, msg in m.fallbacks.items():
        res.fallbacks.setdefault(sid, [msg])
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


def forecast_stage(prep: Prepared, cfg: CapplanConfig, seed: int = 0, progress: Progress = no_progress,
                   extra_models: tuple[str, ...] = (), done: dict[str, TierResult] | None = None) -> Forecasts:
    """Every tier and benchmark (:func:`tier_forecasts`), then :func:`combine_stage`.

    ``extra_models`` adds benchmarks that are scored but never combined (e.g.
    ``prophet``); ``done`` holds models already forecast elsewhere (the Airflow
    forecast jobs' stored results), which are not recomputed."""
    registry = ModelRegistry(cfg.models)
    results = dict(done or {})
    for n in ROLLING_MODELS + tuple(extra_models):
        if n not in results:
            results[n] = tier_forecasts(prep, cfg, n, seed, n in ROLLING_MODELS, registry, progress)
    fc = combine_stage(prep, results, progress)
    for w in registry.warnings:
        for sid in prep.windows:
            fc.warnings.setdefault(sid, []).append(w)
    return fc


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
def search_tasks(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int = 0) -> list[SearchTask]:
    """One :class:`optimizer.tuning.SearchTask` per series (sorted by id): replay
    inputs on its tuning and evaluation windows (:func:`optimizer.inputs.replay_input`)."""
    tasks = []
    book = cfg.price_book()
    comb = fc.rolling["combined"]
    for sid, w in sorted(prep.windows.items()):
        g = prep.h5[prep.h5["series_id"] == sid]
        c = comb[comb["series_id"] == sid]
        meta = prep.meta[sid]
        tune, tnotes = replay_input(g, c, meta, book, w.tune_start, w.eval_start - STEP)
        evalw, _ = replay_input(g, c, meta, book, w.eval_start, w.end)
        tasks.append(SearchTask(sid, meta.kind, tune, evalw, cfg.plan.search_settings(), seed, tnotes))
    return tasks


def search_stage(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int = 0,
                 progress: Progress = no_progress) -> dict[str, SearchOutcome]:
    """Tune each series on its tuning window; score tuned, random-search and
    baseline policies on the evaluation window, which the search never saw.
    Series run in parallel through :func:`capplan.executor.map_series`."""
    from capplan.executor import map_series

    tasks = search_tasks(prep, fc, cfg, seed)
    progress("search", f"{len(tasks)} series, {cfg.plan.n_calls} evaluations each (Bayesian + random)")
    results = map_series(search_one, tasks, cfg.plan.workers,
                         on_done=lambda i, n: progress("search", f"[{i}/{n}] {tasks[i - 1].series_id}"))
    return {t.series_id: r for t, r in zip(tasks, results)}


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
    ``replay.parquet``, ``backtest.parquet`` (rolling forecasts), ``history.parquet``. Before
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
                        missing: dict[str, str] | None = None) -> Report:
    """Stages 4–7: backtest, search, plans, report and export to ``out``.

    ``run``: the report's run section (id, seed, source ...); its duration,
    stage seconds and files are filled in here. ``missing``: series left out
    before this point, with the reason. Returns the report (as written).
    """
    t0 = time.perf_counter()
    timer = timer or _Timer()
    progress("backtest", "scoring rolling-origin forecasts")
    scores = timer("backtest", backtest_stage, prep, fc)
    outcomes = timer("search", search_stage, prep, fc, cfg, run.seed, progress)
    plans = plans_stage(prep, fc, outcomes, run.run_id)
    report = build_report(run, prep, fc, scores, outcomes, plans, cfg.plan.coverage_target, missing)
    report.run.duration_s = round((run.duration_s or 0.0) + time.perf_counter() - t0, 3)
    report.run.stage_seconds = timer.timings
    files = timer("export", export_stage, Path(out), report, plans, fc, outcomes, prep, cfg, progress)
    report.run.files = files
    report.run.stage_seconds = timer.timings
    return report


def run_plan(source: str, cfg: CapplanConfig, out: Path, series: list[str] | None = None, seed: int = 0,
             timezone: str = "UTC", progress: Progress = no_progress, store: Store | None = None) -> Report:
    """Run every stage, write ``out`` and, with ``store``, save it as a store run
    (marked LATEST). Returns the report.

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
    for n in loaded.notes:
        for sid in prep.notes:
            if n.startswith(sid + ":") or not any(n.startswith(s + ":") for s in prep.notes):
                prep.notes[sid].append(n)
    fc = timer("forecast", forecast_stage, prep, cfg, seed, progress)
    run = RunInfo(run_id=started.strftime("%Y%m%dT%H%M%SZ") + f"-s{seed}", seed=seed, started_at=started.isoformat(),
                  duration_s=round(time.perf_counter() - t0, 3), source=source, versions=versions(),
                  coverage_target=cfg.plan.coverage_target, n_calls=cfg.plan.n_calls)
    report = plan_from_forecasts(prep, fc, cfg, run, Path(out), progress, timer)
    if store is not None:
        store.save_run(out, run.run_id)
    return report
