"""The order of a run: lists of stages (:mod:`capplan.run.stages`), and :func:`run`, which runs one.

A stage is a function ``stage(state) -> None`` on a :class:`capplan.run.state.PlanState`: it reads
what the stages before it left there, adds its own output, and writes what it has to say about
each series to ``state.ledger``.

* :data:`PLAN` — ``capplan plan`` (:func:`run_plan`) and the Airflow plan job
  (:func:`capplan.airflow.jobs.plan`, whose state supplies the tiers' stored forecasts);
* :data:`BACKTEST` — ``capplan backtest`` (:func:`capplan.cli.commands.backtest.run_backtest`):
  the peers added, scored, nothing exported or recorded.
"""

from __future__ import annotations

import datetime as dt
import time
from contextlib import contextmanager
from pathlib import Path

from capplan.config.quick import quick_reductions
from capplan.config.settings import CapplanConfig
from capplan.report.model import Report, RunInfo, price_book_used, versions
from capplan.run.cache import prune
from capplan.run.executor import Executor, make_executor
from capplan.run.stages.combine import combine
from capplan.run.stages.export import export
from capplan.run.stages.forecast import forecast
from capplan.run.stages.load import load
from capplan.run.stages.score import peers, score
from capplan.run.stages.search import search
from capplan.run.state import PlanState, Progress, no_progress
from capplan.store.local import Store
from capplan.store.runs import new_run_id, should_publish

PLAN = [load, forecast, combine, score, search, export]
BACKTEST = [load, forecast, combine, peers, score]


@contextmanager
def timer(name: str, timings: dict[str, float]):
    """Seconds spent in the block, as ``timings[name]`` (the report's ``run.stage_seconds``)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = round(time.perf_counter() - t0, 3)


def run(stages: list, state: PlanState) -> PlanState:
    """Run ``stages`` in order on ``state``; returns it. Without ``state.executor`` the one
    ``cfg.plan`` names (:func:`capplan.run.executor.make_executor`) is started here and closed at the end."""
    own = state.executor is None
    if own:
        state.executor = make_executor(state.cfg.plan.executor, state.cfg.plan.workers, state.cfg.plan.scheduler)
    try:
        for stage in stages:
            with timer(stage.__name__, state.timings):
                stage(state)
    except KeyboardInterrupt:
        if own:  # Ctrl-C: no waiting for the running items
            state.executor.abort()
        raise
    finally:
        if own:
            state.executor.close()
            state.executor = None
    return state


def run_plan(source: str, cfg: CapplanConfig, out: Path, series: list[str] | None = None, seed: int = 0,
             timezone: str = "UTC", progress: Progress = no_progress, store: Store | None = None,
             executor: Executor | None = None, publish: bool | None = None, reuse: bool = True) -> Report:
    """Run :data:`PLAN` and write ``out``. With ``store`` the run is written to
    ``runs/<id>/`` first, marked LATEST when it is published
    (:func:`capplan.store.runs.should_publish`: ``publish``, else a whole-source run into
    the default ``--out``), then copied to ``out``. Returns the report; series that
    failed on their own are in its ``failed`` (the rest is planned).

    ``executor``: where the per-series work runs; default: the one ``cfg.plan``
    names (:func:`capplan.run.executor.make_executor`), started here and closed at the end.

    ``reuse`` (with ``store``): take rolling-origin blocks and searches whose inputs
    are unchanged from the store's cache (:mod:`capplan.run.cache`) and store the new
    ones; the report's per-series ``reused`` says what was taken. Entries unused for
    :data:`capplan.run.cache.KEEP_DAYS` days are pruned after the run.

    Raises
    ------
    InputError: bad input (exit code 2 in the CLI).
    """
    started = dt.datetime.now(dt.timezone.utc)
    publish = should_publish(series, out, publish) if store is not None else None
    cache_root = str(store.root) if store is not None and reuse else None
    run_info = RunInfo(run_id=new_run_id(started, seed), seed=seed, started_at=started.isoformat(), source=source,
                       versions=versions(), coverage_target=cfg.plan.coverage_target, n_calls=cfg.plan.n_calls,
                       prices=price_book_used(cfg),
                       series_filter=list(series) if series else None, published=publish,
                       quick=cfg.plan.quick, quick_reductions=quick_reductions(cfg))
    # the store first, then LATEST, then the --out copy: LATEST is never behind --out (capplan.store.runs)
    target = Path(out) if store is None else store.run_dir(run_info.run_id)
    state = PlanState(cfg, source, series, seed, timezone, progress, executor, cache_root, out=target, run=run_info)
    report = run(PLAN, state).report
    if store is None:
        return report
    if publish:
        store.mark_latest(run_info.run_id)
    else:
        store.keep_run(run_info.run_id)  # an object store keeps it too, LATEST unchanged
    store.copy_run(run_info.run_id, out)
    if cache_root:
        prune(cache_root)
    store.prune_runs(cfg.retention)
    return report
