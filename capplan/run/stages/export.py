"""The export stage: capacity per lead time (:mod:`optimizer.plan.capacity`), the dispatcher policy and
manifests (:mod:`optimizer.exporters`), ``forecasts.parquet`` and ``report.json``
(:mod:`capplan.report.model`), written atomically into ``state.out``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.report.model import build_report
from capplan.report.summary import fleet_summary
from capplan.run.stages.fleet import fleet_outputs
from capplan.run.state import Forecasts, Ledger, PlanState, Prepared
from capplan.store import atomic
from capplan.store.retention import folder_bytes, write_backtest
from optimizer.book.prices import price_for
from optimizer.exporters import export_warnings, write_all
from optimizer.plan.capacity import capacity_plan
from optimizer.plan.policy import SeriesPlan
from optimizer.rivals.incumbent import recommended_name
from optimizer.search.tuning import SearchOutcome
from optimizer.training.newsvendor import critical_ratios


def export(state: PlanState) -> None:
    """``state.plans`` (:func:`series_plans`), the exporters' warnings into the ledger, then
    ``state.report`` (:func:`capplan.report.model.build_report`, with ``summary`` set by
    :func:`capplan.report.summary.fleet_summary`), and the output folder ``state.out`` written
    atomically (swapped in whole).

    Files: ``policy.yaml``, ``crds/``, ``manifests/``, ``forecasts.parquet`` (plan
    forecasts: combined and per tier), ``report.json``, ``trials.parquet``,
    ``replay.parquet``, ``fleet.parquet`` (with a fleet: :func:`capplan.run.stages.fleet.hourly_frame`; the
    Kueue objects of its quotas go to ``manifests/`` and ``policy.yaml``'s ``spec.fleet``),
    ``backtest.parquet`` (rolling forecasts, compact:
    :func:`capplan.store.retention.write_backtest`), ``history.parquet`` (and
    ``history_native.parquet``: inference series sampled finer than 5 minutes, on their own
    grid). ``report.json`` names every file and the stage seconds up to its own writing, so the
    file equals ``state.report``.
    """
    t0 = time.perf_counter()
    cfg, fc, prep, outcomes = state.cfg, state.fc, state.prep, state.outcomes
    state.plans = series_plans(prep, fc, outcomes, state.run.run_id, cfg, state.ledger)
    for sid, ws in export_warnings(state.plans, cfg.export).items():  # what to act on before applying
        for w in ws:
            state.ledger.warn(sid, w)
    run = state.run.model_copy(update={"duration_s": round(time.perf_counter() - state.t0, 3),
                                       "executor": state.executor.name if state.executor else "local"})
    report = build_report(run, prep, fc, state.scores, outcomes, state.plans, cfg.plan.coverage_target,
                          state.ledger, state.missing)
    for s in report.series.values():  # the exported Volcano Queue holds a pool to its quota unless told not to
        if s.quota is not None:
            s.quota.held = cfg.export.capability_limit == "quota"
    report.summary = fleet_summary(report)
    fleet = fleet_outputs(state)  # None without fleet keys: the report and files are as before
    if fleet is not None:
        report.fleet, report.run.gpu_models = fleet.report, fleet.gpu_models
    with atomic.replace_dir(Path(state.out)) as tmp:
        state.progress("export", "writing policy and manifests")
        write_all(state.plans, tmp, cfg.export, fleet=fleet.quota if fleet is not None else None)
        _frames(tmp, fc, outcomes, prep)
        if fleet is not None:  # per hour and GPU model: capacity of the recommended fleet plan against demand
            atomic.write_parquet(tmp / "fleet.parquet", fleet.hourly)
        write_backtest(tmp / "backtest.parquet", list(fc.rolling.values()),
                       {sid: tuple(s.windows.evaluation) for sid, s in report.series.items()}, cfg.retention.backtest)
        names = sorted([str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()] + ["report.json"])
        report.run.files = names
        report.run.stage_seconds = {**state.timings, "export": round(time.perf_counter() - t0, 3)}
        others = folder_bytes(tmp)
        for _ in range(3):  # the size counts report.json, which holds the size: settles in two passes
            report.run.size_bytes = others + len((report.to_json(indent=2) + "\n").encode())
        (tmp / "report.json").write_text(report.to_json(indent=2) + "\n")
    state.report = report


def series_plans(prep: Prepared, fc: Forecasts, outcomes: dict[str, SearchOutcome], run_id: str,
                 cfg: CapplanConfig, ledger: Ledger) -> list[SeriesPlan]:
    """Turn tuned parameters and the 7-day forecast into capacity per lead time
    (:func:`optimizer.plan.capacity.capacity_plan`, with the series' spot critical ratio for a
    newsvendor daily layer), one :class:`SeriesPlan` per series; its ``fallbacks`` are the
    series' ledger notes."""
    plans = []
    wk = fc.final_tiers["weekly"]
    book = cfg.price_book()
    for sid, oc in outcomes.items():
        meta = prep.meta[sid]
        price = price_for(book, meta.gpu_model)[0]
        share = critical_ratios(price, cfg.plan.interruption_rate, cfg.plan.recovery_s)["spot"]
        plan = capacity_plan(meta.kind, oc.params, fc.final[fc.final["series_id"] == sid],
                             wk[wk["series_id"] == sid], meta.quota_gpus, prep.h5[prep.h5["series_id"] == sid],
                             spot_share=share, price=price)
        plans.append(SeriesPlan(series_id=sid, kind=meta.kind, unit=meta.unit, gpu_model=meta.gpu_model,
                                timezone=meta.timezone, params=oc.params, plan=plan, recommended=oc.recommended,
                                baseline=oc.baseline, forecast_version=run_id, fallbacks=ledger.notes(sid),
                                recommendation=recommended_name(oc.recommended_policy, oc.tuning)))
    return plans


def _frames(tmp: Path, fc: Forecasts, outcomes: dict[str, SearchOutcome], prep: Prepared) -> None:
    """The Parquet files of the output folder."""
    pd.concat([fc.final] + list(fc.final_tiers.values()), ignore_index=True).to_parquet(tmp / "forecasts.parquet",
                                                                                         index=False)
    trials = [dict(t, series_id=sid, params=json.dumps(t["params"])) for sid, oc in outcomes.items() for t in oc.trials]
    pd.DataFrame(trials).to_parquet(tmp / "trials.parquet", index=False)
    pd.concat([oc.replay for oc in outcomes.values()], ignore_index=True).to_parquet(tmp / "replay.parquet",
                                                                                     index=False)
    prep.h5.to_parquet(tmp / "history.parquet", index=False)
    if prep.native:  # inference series finer than 5 minutes, as the replay saw them
        pd.concat(list(prep.native.values()), ignore_index=True).to_parquet(tmp / "history_native.parquet", index=False)
