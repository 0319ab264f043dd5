"""The stage functions every entry point calls (CLI, DAGs, dashboard).

Stages (issue 2), one module each, wired here:

1. :func:`load_stage` — a source (:mod:`capplan.sources`) -> tidy history.
2. :func:`regularise_stage` — :mod:`forecasting.regularise`, plus the
   training | tuning | evaluation windows (:func:`forecasting.backtest.split_windows`).
3. :func:`forecast_stage` — the three tiers, rolling over the tuning and
   evaluation windows (no look-ahead) and fitted on all history for the
   7-day plan forecast (:mod:`forecasting.tiers`, :mod:`forecasting.backtest`).
4. :func:`backtest_stage` — MASE, sMAPE, pinball and coverage per model and lead band.
5. :func:`search_stage` — replay (:mod:`optimizer.replay`), Bayesian search
   (:mod:`optimizer.search`) on the tuning window, scored with the baseline
   (:mod:`optimizer.baseline`) on the later evaluation window.
6. :func:`export_stage` — dispatcher policy and manifests (:mod:`optimizer.exporters`),
   ``forecasts.parquet`` and ``report.json``, written atomically.

:func:`run_plan` runs them all; ``progress`` is any callable taking
``(stage, message)``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from capplan import atomic, jsonout
from capplan.config import CapplanConfig
from capplan.errors import InputError
from capplan.sources import LoadedHistory, load_source
from capplan.store import Store
from forecasting import backtest as bt
from forecasting import calibration, combination
from forecasting.metrics import seasonal_scale
from forecasting.registry import ModelRegistry, library_versions
from forecasting.regularise import RegulariseReport, regularise, to_hourly
from forecasting.tiers import TIER_NAMES, daily_lstm, make
from forecasting.types import FORECAST_COLUMNS, QCOLS, SeriesMeta, sanitise_quantiles
from optimizer import baseline as base
from optimizer.policy import InferenceParams, Metrics, SeriesPlan, TrainingParams
from optimizer.prices import price_for
from optimizer.replay import ReplayInput, latest_before, period_lookup, replay_inference, replay_training
from optimizer.search import inference_space, objective_value, run_search, training_space

Progress = Callable[[str, str], None]
STEP = pd.Timedelta("5min")
PLAN_STEPS = 2016  # 7 days of 5-minute steps
UPPER_FACTOR = 3.0  # forecasts are capped at 3x the history's max (a sane multiple of its range)
VERSIONED_LIBS = ("capplan", "pandas", "numpy", "statsmodels", "prophet", "tensorflow-cpu", "keras",
                  "scikit-optimize", "pyarrow")


def _noop(stage: str, msg: str) -> None:
    pass


@dataclass
class Prepared:
    """Regularised history and windows.

    ``h5``/``h1``: history frames on the 5-minute and hourly grids;
    ``windows``: series_id -> :class:`forecasting.backtest.Windows`;
    ``notes``: series_id -> stated fallbacks/changes.
    """

    h5: pd.DataFrame
    h1: pd.DataFrame
    meta: dict[str, SeriesMeta]
    windows: dict[str, bt.Windows]
    report: RegulariseReport
    notes: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Forecasts:
    """``rolling[model]``: rolling-origin forecasts (5-minute grid) over tuning and
    evaluation windows; ``final``: the 7-day combined plan forecast per series;
    ``final_tiers``: each tier's own plan forecast."""

    rolling: dict[str, pd.DataFrame]
    final: pd.DataFrame
    final_tiers: dict[str, pd.DataFrame]
    fallbacks: dict[str, list[str]]
    warnings: dict[str, list[str]]
    combination: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)


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
def tier_options(cfg: CapplanConfig) -> dict[str, dict]:
    f = cfg.forecast
    return {
        "hourly": {},
        "daily": {"epochs": f.lstm_epochs, "units": f.lstm_units, "max_windows": f.lstm_max_windows},
        "weekly": {"uncertainty_samples": f.prophet_samples, "events": tuple(f.events)},
        "prophet": {"uncertainty_samples": f.prophet_samples},
    }


ROLLING_MODELS = ("hourly", "daily", "weekly", "naive", "seasonal_naive")


def origin_map(prep: Prepared) -> dict[str, list[pd.Timestamp]]:
    """Rolling origins per series: hourly for inference (pre-scaling needs a fresh
    forecast every hour), every 4 hours for training pools."""
    return {sid: bt.origins(w, "1h" if prep.meta[sid].kind == "inference" else "4h")
            for sid, w in prep.windows.items()}


@dataclass
class TierResult:
    """One model's rolling forecasts and its 7-day plan forecast (5-minute grid)."""

    name: str
    rolling: pd.DataFrame
    final: pd.DataFrame | None
    fallbacks: dict[str, str]
    warnings: dict[str, list[str]]
    models: dict = field(default_factory=dict)


def tier_forecasts(prep: Prepared, cfg: CapplanConfig, name: str, seed: int = 0, final: bool = True,
                   registry: ModelRegistry | None = None, progress: Progress = _noop) -> TierResult:
    """Rolling-origin forecasts of one model over the tuning and evaluation windows
    and, with ``final``, its plan forecast fitted on all history (reusing fresh
    registry models, :func:`fit_final`). Every plan forecast counts as issued at the
    series' last observed point. Used by :func:`forecast_stage` and the Airflow jobs."""
    opts = tier_options(cfg).get(name, {})
    upper = _upper(prep.h5)
    progress("forecast", f"rolling origins: {name}")
    f, fb, wr = bt.rolling_forecasts(name, prep.h5, prep.h1, prep.meta, origin_map(prep), seed, opts)
    res = TierResult(name, _sanitise_rolling(f, prep.h5), None, dict(fb), dict(wr))
    if not final:
        return res
    last5 = prep.h5.groupby("series_id")["timestamp"].max()
    m = make(name, seed=seed, **opts)
    data = prep.h1 if m.step == "1h" else prep.h5
    if m.step == "1h":
        # only complete hours: the bucket holding the last 5-minute point counts if it ends there
        cut = {sid: (t + STEP).floor("1h") - pd.Timedelta("1h") for sid, t in last5.items()}
        data = pd.concat([g[g["timestamp"] <= cut[sid]] for sid, g in data.groupby("series_id")], ignore_index=True)
    m, res.models = fit_final(name, m, data, prep.meta, registry or ModelRegistry(cfg.models), progress)
    f = m.predict(data)
    if m.step == "1h":
        f = bt.expand_to_grid(f)
    f["issued_at"] = f["series_id"].map(last5)
    res.final = _sanitise(f[f["timestamp"] > f["issued_at"]], upper)
    for sid, msg in m.fallbacks.items():
        res.fallbacks.setdefault(sid, msg)
    return res


def assemble_forecasts(prep: Prepared, results: dict[str, TierResult], progress: Progress = _noop) -> Forecasts:
    """Combine and calibrate per lead bucket and quantile (:mod:`forecasting.combination`,
    :mod:`forecasting.calibration`).

    Rolling forecasts: each origin is combined with exponentially weighted
    loss weights from the rows realised before it
    (:func:`forecasting.combination.combine_online`) and calibrated online
    (adaptive split conformal), so no origin sees its own or any later actual.
    Plan forecast: the weights at the last observation and the offsets of the
    last :data:`forecasting.calibration.CAL_WINDOW` of realised rows.
    ``results`` must hold every model of :data:`ROLLING_MODELS` (more are
    scored, never combined).
    """
    progress("forecast", "combining and calibrating per lead bucket")
    upper = _upper(prep.h5)
    rolling = {n: r.rolling for n, r in results.items()}
    fallbacks: dict[str, list[str]] = {}
    warns: dict[str, list[str]] = {}
    for n, r in results.items():
        if n not in ROLLING_MODELS:
            continue
        for sid, msg in r.fallbacks.items():
            if msg not in fallbacks.setdefault(sid, []):
                fallbacks[sid].append(msg)
        for sid, w in r.warnings.items():
            warns.setdefault(sid, []).extend(w)
    actuals = {sid: pd.Series(g["value"].to_numpy(), index=pd.DatetimeIndex(g["timestamp"]))
               for sid, g in prep.h5.groupby("series_id")}
    combos, comb, finals = {}, [], []
    last5 = prep.h5.groupby("series_id")["timestamp"].max()
    for sid in prep.windows:
        per = {n: rolling[n][rolling[n]["series_id"] == sid] for n in ROLLING_MODELS}
        last = last5[sid]
        c, mean_w = combination.combine_online(per, actuals[sid], sid)
        levels: dict[str, list[float]] = {}
        comb.append(_sanitise_rolling(calibration.calibrate_online(c, actuals[sid], levels_out=levels), prep.h5))
        final_spec = combination.learn_combination(per, actuals[sid])
        # the plan's offsets: the final combination's own recent errors, at the adaptive levels reached
        final_off = calibration.learn_calibration(combination.apply_combination(per, final_spec, sid), actuals[sid],
                                                  last - calibration.CAL_WINDOW, levels=levels)
        combos[sid] = combination.combination_report(final_spec, mean_w, final_off, levels)
        per_final = {n: results[n].final[results[n].final["series_id"] == sid] for n in ROLLING_MODELS}
        c = combination.apply_combination(per_final, final_spec, sid)
        c = calibration.apply_calibration(c, final_off)
        grid = pd.date_range(last + STEP, periods=PLAN_STEPS, freq=STEP)
        c = c.set_index("timestamp").reindex(grid)
        c[list(QCOLS)] = c[list(QCOLS)].ffill().bfill()
        c = c.rename_axis("timestamp").reset_index()
        c["series_id"], c["tier"], c["issued_at"] = sid, "combined", last
        finals.append(_sanitise(c[FORECAST_COLUMNS], upper))
    rolling["combined"] = pd.concat(comb, ignore_index=True)
    final_tiers = {n: results[n].final for n in TIER_NAMES}
    models = {n: r.models for n, r in results.items() if r.models}
    return Forecasts(rolling, pd.concat(finals, ignore_index=True), final_tiers, fallbacks, warns, combos, models)


def forecast_stage(prep: Prepared, cfg: CapplanConfig, seed: int = 0, progress: Progress = _noop,
                   extra_models: tuple[str, ...] = ()) -> Forecasts:
    """Every tier and benchmark (:func:`tier_forecasts`), then
    :func:`assemble_forecasts`. ``extra_models`` adds benchmarks that are scored
    but never combined (e.g. ``prophet``)."""
    registry = ModelRegistry(cfg.models)
    results = {n: tier_forecasts(prep, cfg, n, seed, n in ROLLING_MODELS, registry, progress)
               for n in ROLLING_MODELS + tuple(extra_models)}
    fc = assemble_forecasts(prep, results, progress)
    for w in registry.warnings:
        for sid in prep.windows:
            fc.warnings.setdefault(sid, []).append(w)
    return fc


def fit_final(name: str, m, data: pd.DataFrame, meta: dict[str, SeriesMeta], registry: ModelRegistry,
              progress: Progress = _noop):
    """Fit a tier for the plan forecast, reusing registry models younger than the tier's
    cadence (``daily`` 24 h, ``weekly`` 7 d); save what was fitted. Returns ``(model, log)``
    with ``log = {"reused": [...], "fitted": [...], "versions": {...}}``."""
    log = {"reused": [], "fitted": [], "versions": {}}
    sids = sorted(data["series_id"].unique())
    if not sids:
        return m, log
    ends = data.dropna(subset=["value"]).groupby("series_id")["timestamp"].agg(["min", "max"])
    if name == "daily":
        found = registry.load_fresh("daily", "_global", ends["max"].max(), sids)
        if found is not None:
            d, meta_doc = found
            try:
                m.load(str(d / "model.keras"))
                st = json.loads((d / "state.json").read_text())
                if (st.get("target"), st.get("arch")) != (daily_lstm.TARGET, daily_lstm.ARCH):
                    raise ValueError(f"trained as {st.get('target')!r}/{st.get('arch')!r}, expected "
                                     f"{daily_lstm.TARGET!r}/{daily_lstm.ARCH!r}")
                m.scale, m.tz = st["scale"], st["tz"]
                log["reused"], log["versions"]["_global"] = sids, meta_doc["version"]
                return m, log
            except Exception as exc:  # a broken file means a refit, never a crash
                registry.warnings.append(f"registry: daily model {d} could not be loaded ({exc}); refitted")
        m.fit(data, meta)
        if m.model is not None:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "model.keras"
                m.save(str(path))
                v = registry.save("daily", "_global", {"model.keras": path, "state.json": json.dumps(
                    {"scale": m.scale, "tz": m.tz, "target": daily_lstm.TARGET, "arch": daily_lstm.ARCH}).encode()}, (ends["min"].min(), ends["max"].max()), sids)
            log["versions"]["_global"] = v
        log["fitted"] = sids
        return m, log
    if name == "weekly":
        todo = []
        for sid in sids:
            found = registry.load_fresh("weekly", sid, ends.loc[sid, "max"] if sid in ends.index else pd.Timestamp.max)
            if found is not None:
                try:
                    m.load_json(sid, (found[0] / "model.json").read_text(), meta.get(sid, SeriesMeta()).timezone)
                    log["reused"].append(sid)
                    log["versions"][sid] = found[1]["version"]
                    continue
                except Exception as exc:
                    registry.warnings.append(f"registry: weekly model {found[0]} could not be loaded ({exc}); refitted")
            todo.append(sid)
        if todo:
            m.fit(data[data["series_id"].isin(todo)], meta)
            for sid in todo:
                if sid in m.models and sid in ends.index:
                    log["versions"][sid] = registry.save("weekly", sid, {"model.json": m.to_json(sid).encode()},
                                                         (ends.loc[sid, "min"], ends.loc[sid, "max"]), [sid])
        log["fitted"] = todo
        return m, log
    m.fit(data, meta)
    if name == "hourly":
        for sid, mod in getattr(m, "models", {}).items():
            doc = json.dumps({**mod, "start": mod["start"].isoformat()}).encode()
            log["versions"][sid] = registry.save("hourly", sid, {"model.json": doc},
                                                 (ends.loc[sid, "min"], ends.loc[sid, "max"]), [sid])
    log["fitted"] = sids
    return m, log


def _bound(max_seen):
    """Forecast cap from the largest demand seen: ``UPPER_FACTOR`` x it, at least 1;
    0 for an all-zero history (nothing in it supports any demand). Scalar or array."""
    m = np.asarray(max_seen, dtype="float64")
    return np.where(m > 0, np.maximum(m * UPPER_FACTOR, 1.0), 0.0)


def _upper(h5: pd.DataFrame) -> dict[str, float]:
    """Per series, :func:`_bound` of its whole history (for plan forecasts)."""
    mx = h5.groupby("series_id")["value"].max().fillna(0.0)
    return {sid: float(_bound(v)) for sid, v in mx.items()}


def _sanitise_rolling(f: pd.DataFrame, h5: pd.DataFrame) -> pd.DataFrame:
    """:func:`_sanitise` for rolling forecasts, with each row's bound from the history
    known at its origin (``UPPER_FACTOR`` x the max up to ``issued_at``; 0 while that
    history is all zero), so no bound leaks the future into a backtest."""
    if f.empty:
        return f
    parts = []
    for sid, g in f.groupby("series_id", sort=False):
        h = h5[h5["series_id"] == sid]
        run = pd.Series(h["value"].fillna(0.0).cummax().to_numpy(), index=pd.DatetimeIndex(h["timestamp"]))
        known = run.reindex(pd.DatetimeIndex(g["issued_at"]), method="ffill").fillna(0.0).to_numpy()
        parts.append(sanitise_quantiles(g, _bound(known)))
    return pd.concat(parts, ignore_index=True)


def _sanitise(f: pd.DataFrame, upper: dict[str, float]) -> pd.DataFrame:
    if f.empty:
        return f
    parts = [sanitise_quantiles(g, upper.get(sid, 1.0)) for sid, g in f.groupby("series_id", sort=False)]
    return pd.concat(parts, ignore_index=True)


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
@dataclass
class SearchOutcome:
    """Per-series result of the policy search (figures on the evaluation window)."""

    params: dict
    recommended: Metrics
    baseline: Metrics
    random: Metrics | None
    tuning: dict
    trials: list[dict]
    replay: pd.DataFrame
    notes: list[str]


def replay_input(prep: Prepared, fc: Forecasts, sid: str, start: pd.Timestamp, end: pd.Timestamp,
                 cfg: CapplanConfig) -> tuple[ReplayInput, list[str]]:
    """Demand and forecast lookups for one series on ``[start, end]`` (decision
    inputs come only from forecasts issued before each decision)."""
    meta = prep.meta[sid]
    g = prep.h5[prep.h5["series_id"] == sid]
    ts = pd.DatetimeIndex(g["timestamp"])
    m = (ts >= start) & (ts <= end)
    times = ts[m]
    price, note = price_for(cfg.price_book(), meta.gpu_model)
    inp = ReplayInput(times=times, demand=g["value"].to_numpy()[m], step_s=int(STEP.total_seconds()), price=price,
                      gpus_per_unit=meta.gpus_per_replica if meta.kind == "inference" else 1.0,
                      history_before=g["value"].to_numpy()[ts < start])
    notes = [note] if note else []
    comb = fc.rolling["combined"]
    comb = comb[comb["series_id"] == sid]
    if meta.kind == "training":
        week_starts = pd.date_range(start, end, freq="7D")
        day_starts = pd.date_range(start, end, freq="1D")
        hour_starts = pd.date_range(start, end, freq="1h")
        inp.week_mean = period_lookup(comb, times, week_starts, pd.Timedelta("7D"), "mean")
        inp.day_max = period_lookup(comb, times, day_starts, pd.Timedelta("1D"), "max")
        # the hourly top-up: the latest forecast issued before each hour (rolling origins of training
        # pools are 4 h apart, so its lead is 1-5 h in the replay; a live run refreshes it every hour)
        inp.hour_max = period_lookup(comb, times, hour_starts, pd.Timedelta("1h"), "max")
        if any(np.isnan(v).any() for v in inp.week_mean.values()):
            notes.append("replay: no weekly forecast before part of the window; the last observed demand was used")
    else:
        hr = comb[(comb["timestamp"] - comb["issued_at"]) <= pd.Timedelta("1h")]
        if len(hr):
            issued, idx = latest_before(hr, times)
            hr = hr.sort_values(["issued_at", "timestamp"])
            n_o = len(issued)
            for q in QCOLS:
                arr = np.full((n_o, 12), np.nan)
                for k, (_, gg) in enumerate(hr.groupby("issued_at", sort=True)):
                    v = gg[q].to_numpy()[:12]
                    arr[k, : len(v)] = v
                inp.hourly_fc[q] = arr
            inp.hourly_origin_idx = idx
            o_times = issued[np.clip(idx, 0, None)]
            inp.hourly_offset = np.asarray((times - o_times) // STEP, dtype=int)
    return inp, notes


@dataclass
class SearchTask:
    """Everything one series' search needs, picklable for the executor."""

    series_id: str
    kind: str
    tune: ReplayInput
    evalw: ReplayInput
    plan: dict
    seed: int
    notes: list[str]


def search_one(task: SearchTask) -> SearchOutcome:
    """Tune one series on its tuning window; replay tuned, random-search and
    baseline policies on its evaluation window."""
    from capplan.config import PlanConfig

    pc = PlanConfig(**task.plan)
    tune, evalw, seed = task.tune, task.evalw, task.seed
    d = tune.demand[np.isfinite(tune.demand)]
    mean_d = float(d.mean()) if len(d) else 0.0
    ref_cost = max(mean_d, 1e-6) * len(tune.times) * STEP.total_seconds() / 3600 * tune.price.on_demand \
        * tune.gpus_per_unit
    if task.kind == "training":
        space = training_space(pc.training_bounds)

        def evaluate(p, inp):
            return replay_training(inp, p, pc.interruption_rate, pc.recovery_s, pc.queue_unmet, seed)

        def run_baseline(inp):
            return base.training_baseline(inp, pc.interruption_rate, pc.recovery_s, pc.queue_unmet, seed)
    else:
        past = tune.history_before[np.isfinite(tune.history_before)] if tune.history_before is not None else []
        peak = float(np.max(past)) if len(past) else (float(d.max()) if len(d) else 1.0)
        space = inference_space(peak, pc.inference_bounds)

        def evaluate(p, inp):
            return replay_inference(inp, p, pc.cold_start_s)

        def run_baseline(inp):
            return base.inference_baseline(inp, pc.cold_start_s)

    target = min(1.0, pc.coverage_target + pc.coverage_margin)
    by = pc.coverage_objective
    gp = run_search(lambda p: evaluate(p, tune)[0], space, pc.n_calls, seed, target, ref_cost, pc.penalty, "gp",
                    coverage_by=by)
    trials = list(gp.trials)
    tuning = {"gp_objective": gp.best_objective, "baseline_objective": objective_value(
        run_baseline(tune)[0], target, ref_cost, pc.penalty, by), "reference_cost_usd": ref_cost,
        "coverage_target_while_tuning": target, "coverage_objective": by}
    rnd_eval = None
    if pc.random_search:
        rnd = run_search(lambda p: evaluate(p, tune)[0], space, pc.n_calls, seed, target, ref_cost, pc.penalty,
                         "random", coverage_by=by)
        trials += rnd.trials
        tuning["random_objective"] = rnd.best_objective
        rnd_eval = evaluate(rnd.best_params, evalw)[0]
    notes = list(task.notes)
    if gp.n_tied > 1:
        notes.append(f"tuning: {gp.n_tied} policies scored the same objective on the tuning window "
                     f"({gp.best_objective:,.2f} USD; e.g. no demand to tell them apart); the one with the "
                     "highest coverage, then the lowest cost, then the safest was chosen (training: an hourly "
                     "top-up, the smallest weekly reservation, higher quantiles; inference: pre-scaling, a lower "
                     "HPA target)")
    rec, rec_series = evaluate(gp.best_params, evalw)
    bl, bl_series = run_baseline(evalw)
    replay = pd.DataFrame({"series_id": task.series_id, "timestamp": evalw.times, "demand": evalw.demand,
                           "provisioned_recommended": rec_series["provisioned"],
                           "provisioned_baseline": bl_series["provisioned"]})
    return SearchOutcome(gp.best_params.model_dump(), rec, bl, rnd_eval, tuning, trials, replay, notes)


def search_stage(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int = 0,
                 progress: Progress = _noop) -> dict[str, SearchOutcome]:
    """Tune each series on its tuning window; score tuned, random-search and
    baseline policies on the evaluation window, which the search never saw.
    Series run in parallel through :func:`capplan.executor.map_series`."""
    from capplan.executor import map_series

    tasks = []
    for sid, w in sorted(prep.windows.items()):
        tune, tnotes = replay_input(prep, fc, sid, w.tune_start, w.eval_start - STEP, cfg)
        evalw, _ = replay_input(prep, fc, sid, w.eval_start, w.end, cfg)
        tasks.append(SearchTask(sid, prep.meta[sid].kind, tune, evalw, cfg.plan.model_dump(), seed, tnotes))
    progress("search", f"{len(tasks)} series, {cfg.plan.n_calls} evaluations each (Bayesian + random)")
    results = map_series(search_one, tasks, cfg.plan.workers,
                         on_done=lambda i, n: progress("search", f"[{i}/{n}] {tasks[i - 1].series_id}"))
    return {t.series_id: r for t, r in zip(tasks, results)}


# 6 ------------------------------------------------------------------------------
def build_plans(prep: Prepared, fc: Forecasts, outcomes: dict[str, SearchOutcome], run_id: str) -> list[SeriesPlan]:
    """Turn tuned parameters and the 7-day forecast into capacity per lead time."""
    plans = []
    for sid, oc in outcomes.items():
        meta = prep.meta[sid]
        f = fc.final[fc.final["series_id"] == sid]
        last = f["issued_at"].iloc[0]
        if meta.kind == "training":
            p = TrainingParams(**oc.params)
            wk = fc.final_tiers["weekly"]
            wk = wk[wk["series_id"] == sid]
            day = f[f["timestamp"] <= last + pd.Timedelta("1D")]
            reserved = math.ceil(p.reservation_ratio * float(wk[p.quantile].mean()) - 1e-9) if len(wk) else 0
            target = math.ceil(p.headroom * float(day[p.quantile].max()) - 1e-9)
            flex = max(target - reserved, 0)
            spot = int(round(p.spot_fraction * flex))
            capability = max(math.ceil(p.headroom * float(f["p99"].max()) - 1e-9), reserved + flex)
            plan = {"reserved_gpus": reserved, "on_demand_gpus": flex - spot, "spot_gpus": spot}
            if p.topup_quantile != "none":
                hour = f[f["timestamp"] <= last + pd.Timedelta("1h")]
                want = math.ceil(p.topup_headroom * float(hour[p.topup_quantile].max()) - 1e-9)
                plan["on_demand_hourly_gpus"] = max(want - reserved - flex, 0)
                capability = max(capability, math.ceil(p.topup_headroom * float(f["p99"].max()) - 1e-9))
            plan.update({"capability_gpus": int(capability), "deserved_gpus": int(math.ceil(float(day["p50"].max()))),
                         "quota_gpus": meta.quota_gpus, "valid_from": last.isoformat()})
        else:
            p = InferenceParams(**oc.params)
            plan = {"min_replicas": p.min_replicas, "max_replicas": p.max_replicas,
                    "target_utilization": p.target_utilization, "prescale": _prescale_windows(f, p),
                    "valid_from": last.isoformat()}
        plans.append(SeriesPlan(series_id=sid, kind=meta.kind, unit=meta.unit, gpu_model=meta.gpu_model,
                                timezone=meta.timezone, params=oc.params, plan=plan, recommended=oc.recommended,
                                baseline=oc.baseline, forecast_version=run_id,
                                fallbacks=prep.notes.get(sid, []) + fc.fallbacks.get(sid, []) + oc.notes))
    return plans


def _prescale_windows(f: pd.DataFrame, p: InferenceParams, max_windows: int = 48) -> list[dict]:
    """Hours of the next 7 days whose forecast needs more than ``min_replicas``:
    ``[{start, end, desired_replicas}]``, starting ``prescale_lead_s`` early."""
    if p.prescale_quantile == "none":
        return []
    s = f.set_index("timestamp")[p.prescale_quantile].resample("1h").max()
    need = np.ceil(s / p.target_utilization - 1e-9).clip(lower=p.min_replicas, upper=p.max_replicas)
    out = []
    lead = pd.Timedelta(seconds=p.prescale_lead_s)
    for ts, n in need.items():
        if n <= p.min_replicas:
            continue
        if out and out[-1]["desired_replicas"] == int(n) and pd.Timestamp(out[-1]["end"]) == ts - lead:
            out[-1]["end"] = (ts + pd.Timedelta("1h") - lead).isoformat()
            continue
        out.append({"start": (ts - lead).isoformat(), "end": (ts + pd.Timedelta("1h") - lead).isoformat(),
                    "desired_replicas": int(n)})
    out.sort(key=lambda w: -w["desired_replicas"])
    return sorted(out[:max_windows], key=lambda w: w["start"])


def versions() -> dict[str, str]:
    """Versions of the libraries that shape the numbers."""
    return {"python": platform.python_version(), **library_versions(VERSIONED_LIBS)}


def _m(x: Metrics | None) -> dict | None:
    if x is None:
        return None
    return {"cost_usd": x.cost_usd, "coverage": x.coverage, "idle_ratio": x.idle_ratio, "unmet": x.unmet,
            "scale_events": x.scale_events, "p95_utilization": x.p95_utilization}


def policy_warnings(oc: "SearchOutcome", coverage_target: float) -> list[str]:
    """Say so when the recommendation is not better than the rule of thumb on the evaluation window."""
    out = []
    r, b = oc.recommended, oc.baseline
    need = min(coverage_target, b.coverage) if b.coverage == b.coverage else coverage_target
    if r.coverage == r.coverage and r.coverage < need - 1e-9:
        out.append(f"policy: recommended coverage {r.coverage:.3f} is below the target {need:.3f} on the "
                   "evaluation window; demand left the range of the tuning window")
    if b.cost_usd > 0 and r.cost_usd > b.cost_usd * 1.0001:
        out.append(f"policy: the baseline is cheaper on the evaluation window ({b.cost_usd:,.0f} vs "
                   f"{r.cost_usd:,.0f} USD)")
    return out


def build_report(run: dict, prep: Prepared, fc: Forecasts, scores: dict, outcomes: dict[str, SearchOutcome],
                 plans: list[SeriesPlan]) -> dict:
    """The ``report.json`` document (issue 2's shape, plus detail)."""
    series = {}
    for pl in plans:
        sid = pl.series_id
        w = prep.windows[sid]
        oc = outcomes[sid]
        sc = scores.get(sid, {})
        bt_out = {m: {"mase": sc[m]["all"]["mase"], "bands": sc[m]} for m in sc if "all" in sc[m]}
        rec = _m(oc.recommended)
        rec["params"] = oc.params
        series[sid] = {
            "kind": pl.kind, "unit": pl.unit, "gpu_model": pl.gpu_model,
            "windows": {"training": [w.start.isoformat(), (w.tune_start - STEP).isoformat()],
                        "tuning": [w.tune_start.isoformat(), (w.eval_start - STEP).isoformat()],
                        "evaluation": w.as_list()},
            "evaluation_window": w.as_list(),
            "baseline": _m(oc.baseline),
            "recommended": rec,
            "random_search": _m(oc.random),
            "tuning": oc.tuning,
            "backtest": bt_out,
            "plan": pl.plan,
            "fallbacks": pl.fallbacks,
            "warnings": policy_warnings(oc, run.get("coverage_target", 0.95)) + fc.warnings.get(sid, [])[:10],
        }
    run = dict(run, models=fc.models)
    for sid in series:
        series[sid]["combination"] = fc.combination.get(sid, {})
    return {"run": run, "series": series}


def export_stage(out: Path, report: dict, plans: list[SeriesPlan], fc: Forecasts, outcomes: dict[str, SearchOutcome],
                 prep: Prepared, cfg: CapplanConfig, store: Store | None, progress: Progress = _noop) -> list[str]:
    """Write the output folder (and the run into the store) atomically.

    Files: ``policy.yaml``, ``manifests/``, ``forecasts.parquet`` (plan
    forecasts: combined and per tier), ``report.json``, ``trials.parquet``,
    ``replay.parquet``, ``backtest.parquet`` (rolling forecasts), ``history.parquet``.
    """
    from optimizer.exporters import write_all

    run_id = report["run"]["run_id"]
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
        (tmp / "report.json").write_text(jsonout.dumps(report, indent=2) + "\n")
        names = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
    if store is not None:
        import shutil

        with atomic.replace_dir(store.run_dir(run_id)) as tmp:
            shutil.copytree(out, tmp, dirs_exist_ok=True)
        store.mark_latest(run_id)
    return names


def run_plan(source: str, cfg: CapplanConfig, out: Path, series: list[str] | None = None, seed: int = 0,
             timezone: str = "UTC", progress: Progress = _noop, store: Store | None = None) -> dict:
    """Run every stage and write ``out``. Returns the report dict.

    Raises
    ------
    InputError: bad input (exit code 2 in the CLI).
    """
    t0 = time.perf_counter()
    started = dt.datetime.now(dt.timezone.utc)
    timings = {}

    def timed(name, fn, *a, **k):
        s = time.perf_counter()
        r = fn(*a, **k)
        timings[name] = round(time.perf_counter() - s, 3)
        return r

    progress("load", f"reading {source}")
    loaded = timed("load", load_stage, source, cfg, series, timezone)
    progress("regularise", f"{loaded.frame['series_id'].nunique()} series, {len(loaded.frame)} rows")
    prep = timed("regularise", regularise_stage, loaded, cfg)
    for n in loaded.notes:
        for sid in prep.notes:
            if n.startswith(sid + ":") or not any(n.startswith(s + ":") for s in prep.notes):
                prep.notes[sid].append(n)
    fc = timed("forecast", forecast_stage, prep, cfg, seed, progress)
    progress("backtest", "scoring rolling-origin forecasts")
    scores = timed("backtest", backtest_stage, prep, fc)
    outcomes = timed("search", search_stage, prep, fc, cfg, seed, progress)
    run_id = started.strftime("%Y%m%dT%H%M%SZ") + f"-s{seed}"
    plans = build_plans(prep, fc, outcomes, run_id)
    run = {"run_id": run_id, "seed": seed, "started_at": started.isoformat(), "duration_s": None,
           "source": source, "versions": versions(), "stage_seconds": timings,
           "coverage_target": cfg.plan.coverage_target, "n_calls": cfg.plan.n_calls}
    report = build_report(run, prep, fc, scores, outcomes, plans)
    report["run"]["duration_s"] = round(time.perf_counter() - t0, 3)
    files = timed("export", export_stage, Path(out), report, plans, fc, outcomes, prep, cfg, store, progress)
    report["run"]["files"] = files
    report["run"]["stage_seconds"] = timings
    return report
