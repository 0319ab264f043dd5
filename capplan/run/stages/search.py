"""The search stage: per series, the replay inputs (:mod:`optimizer.engine.inputs`) and the policy
search (:func:`optimizer.search.tuning.search_one`), both in the series' task on the executor
(:func:`search_cached`, :class:`CachedSearch`), reusing the store's cache when it can.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.errors import InputError
from capplan.run.executor import Failed
from capplan.run.search_cache import SearchCache
from capplan.run.stages.forecast import LOCAL, on_done
from capplan.run.state import Forecasts, PlanState, Prepared
from forecasting import backtest as bt
from forecasting.types import SeriesMeta
from optimizer.book.prices import built_in_note
from optimizer.engine.inputs import replay_input
from optimizer.search.tuning import SearchOutcome, SearchTask, evaluate_policy, search_one, tune_policy


def search(state: PlanState) -> None:
    """Tune each series on its tuning window; score tuned, random-search and baseline policies
    on the evaluation window, which the search never saw: ``state.outcomes``. A series whose
    search raises is failed in the ledger (stage ``search``) and left out; each outcome's notes
    go to the ledger. With ``state.cache_root`` an identical task's stored outcome, or else an
    identical tuning window's tuned policy, is reused (:func:`search_cached`) and the ledger's
    ``reuse(series, "search", ...)`` says which (``reused``, ``tuning_reused``, ``computed``).

    Raises InputError when every series failed."""
    cfg, ledger = state.cfg, state.ledger
    tasks = _search_inputs(state.prep, state.fc, cfg, state.seed, state.cache_root)
    ex = state.executor or LOCAL
    how = "Bayesian + random" if cfg.plan.random_search else "Bayesian"
    what = (f"{cfg.plan.n_calls} evaluations each ({how})" if cfg.plan.gp_refine
            else f"the {cfg.plan.scan_grid} grid scan")
    state.progress("search", f"{len(tasks)} series, {what} on the {ex.name} executor")
    results = ex.map(search_cached, tasks, [t.series_id for t in tasks], on_done(state.progress, "search"))
    for t, r in zip(tasks, results):
        if isinstance(r, Failed):
            ledger.fail(t.series_id, "search", r.error, r.where)
        elif state.cache_root:
            ledger.reuse(t.series_id, "search", r[1])
            if r[2]:
                ledger.warn(t.series_id, r[2])
    state.outcomes = {t.series_id: r[0] for t, r in zip(tasks, results) if not isinstance(r, Failed)}
    if not state.outcomes:
        raise InputError(f"every series failed: {ledger.failures()}")
    for sid, oc in state.outcomes.items():
        for n in oc.notes:
            ledger.note(sid, n)


def _search_inputs(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int, cache_root: str | None = None
                   ) -> list["CachedSearch"]:
    """Per series (sorted by id), what :func:`search_task` needs, as plain data for a worker."""
    book = cfg.price_book()
    comb = fc.rolling["combined"]
    return [CachedSearch(sid, w, prep.native.get(sid, prep.h5[prep.h5["series_id"] == sid]),
                         comb[comb["series_id"] == sid], prep.meta[sid], cfg, seed, book, cache_root)
            for sid, w in sorted(prep.windows.items())]


def search_tasks(prep: Prepared, fc: Forecasts, cfg: CapplanConfig, seed: int = 0) -> list[SearchTask]:
    """One :class:`optimizer.search.tuning.SearchTask` per series (sorted by id) (:func:`search_task`)."""
    return [x.task() for x in _search_inputs(prep, fc, cfg, seed)]


def search_task(sid: str, w: bt.Windows, history: pd.DataFrame, combined: pd.DataFrame, meta: SeriesMeta,
                cfg: CapplanConfig, seed: int = 0, book: dict | None = None) -> SearchTask:
    """One series' :class:`optimizer.search.tuning.SearchTask`: replay inputs on its tuning and
    evaluation windows (:func:`optimizer.engine.inputs.replay_input`) from its history (5-minute,
    or its native grid for a finer inference series) and its combined rolling forecasts.
    ``book``: GPU prices (default ``cfg.price_book()``)."""
    book = cfg.price_book() if book is None else book
    rk = {"interruption_rate": cfg.plan.interruption_rate, "recovery_s": cfg.plan.recovery_s,
          "spot_outage": cfg.plan.spot_outage, "replacement_s": cfg.plan.cold_start_s}
    # every point before the evaluation window: a 1-minute inference series' last 4 minutes too (not eval_start - STEP)
    tune, tnotes = replay_input(history, combined, meta, book, w.tune_start, w.eval_start - pd.Timedelta(1, "ns"),
                                **rk)
    evalw, _ = replay_input(history, combined, meta, book, w.eval_start, w.end, **rk)
    unpriced = built_in_note(cfg.prices, meta.gpu_model)  # e.g. a model name spelt differently in prices:
    notes = tnotes + ([unpriced] if unpriced else [])
    return SearchTask(sid, meta.kind, tune, evalw, cfg.plan.search_settings(), seed, notes)


@dataclass
class CachedSearch:
    """One series' search inputs (built into a :class:`optimizer.search.tuning.SearchTask` where it
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
    (:class:`capplan.run.search_cache.SearchCache`): ``status`` is ``reused`` (the stored outcome of an
    identical search task), ``tuning_reused`` (the stored tuned policy of an identical tuning
    window, :func:`optimizer.search.tuning.tune_policy`, replayed on the new evaluation window by
    :func:`optimizer.search.tuning.evaluate_policy`: the hourly case) or ``computed``
    (:func:`optimizer.search.tuning.search_one`); what is computed is stored for the next run.
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
