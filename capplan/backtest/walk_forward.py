"""Walk-forward policy backtest (``capplan backtest --policies``): what each policy would have
cost, week by week, on a user's own history.

Weeks
    Per series, the complete weeks of its history (:func:`complete_weeks`): 7-day spans that
    end at the last midnight UTC of the data (the trailing part day is left out) and start
    at least :data:`MIN_TRAIN` (7 days, the plan's ``min_train_days`` of
    :func:`forecasting.backtest.split_windows`) after the first point, so the forecasters
    have a training span before the first week. A series with fewer than two such weeks
    has nothing to score; it is skipped with a stated note (e.g. one hour of data).

Walking forward
    For ``k = 1 .. n-1``: the policy search (:func:`optimizer.search.tuning.tune_policy`, the
    scan, the Gaussian-process search, the refinement rule and the rivals) is tuned on
    weeks ``1 .. k`` (all of them; or the last ``tune_weeks`` of them: 1 is the plan's own
    7-day tuning window) and every policy is replayed on week ``k + 1``
    (:func:`optimizer.search.tuning.evaluate_policy`): the recommendation (searched, or the
    baseline or a peer when it beat the search on the tuning weeks), the baseline (the rules of thumb),
    each peer (:mod:`optimizer.rivals.peers`: reactive, naive conformal), and the
    perfect-foresight limit of that week (:mod:`optimizer.rivals.perfect_foresight`); regret = cost / limit.
    The random search is left out (it is never recommended; the plan reports it beside).

No look-ahead
    * The forecasts are the plan's rolling-origin forecasts (:mod:`forecasting.backtest`),
      with the rolling window widened to start at week 1 (:func:`widen_windows`): every
      model is fitted only on data at or before its refit block's first origin and sees
      context only up to each origin; the combination and its conformal calibration at an
      origin use only rows realised before it (:mod:`forecasting.combining.assemble`); each
      forecast's cap uses the history known at its ``issued_at``
      (:func:`forecasting.bounds.sanitise_rolling`).
    * The replay inputs are the plan's (:func:`capplan.run.stages.search.search_task`,
      :mod:`optimizer.engine.inputs`): each decision sees only forecasts issued before it.
    * The search of step ``k`` sees weeks ``<= k`` only: its tuning window ends one
      nanosecond before week ``k + 1``; week ``k + 1`` is replayed with the policy it chose.

Rank
    Per scored week, the candidates are the distinct policies the search evaluated, the
    baseline and the peers. ``rank.tuning`` is the recommendation's rank among them by the
    tuning objective (1 = best), ``rank.next_week`` its rank by the same objective on week
    ``k + 1`` (:func:`optimizer.search.selection.selection_score` or
    :func:`optimizer.search.objective.objective_value` at ``coverage_target + coverage_margin``), and
    ``rank.spearman`` the Spearman correlation of the candidates' two objectives: whether
    what ranks well on the tuning weeks still ranks well a week later.

Spread
    Per series and policy, the week-to-week regret: min, median, max, mean and the sample
    standard deviation (``ddof=1``; null with one week), and Σ cost / Σ limit over the weeks.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from capplan.config.settings import CapplanConfig
from capplan.errors import InputError
from capplan.run.executor import Failed
from capplan.run.pipeline import run
from capplan.run.stages.combine import combine
from capplan.run.stages.forecast import LOCAL, forecast, on_done
from capplan.run.stages.load import load
from capplan.run.stages.search import search_task
from capplan.run.state import PlanState, Prepared, Progress, no_progress
from forecasting import backtest as bt
from forecasting.types import STEP, SeriesMeta
from optimizer.plan.policy import Metrics
from optimizer.rivals.incumbent import recommended_name
from optimizer.rivals.peers import PEERS
from optimizer.search.objective import objective_value, reference_cost
from optimizer.search.selection import selection_score
from optimizer.search.tuning import SCENARIO_STREAM, PolicyReplay, SearchTask, Tuned, evaluate_policy, tune_policy

WEEK = pd.Timedelta("7D")
MIN_TRAIN = pd.Timedelta("7D")  #: training span before the first week (split_windows' min_train_days)
POLICIES = ("recommended", "baseline", *PEERS)
"""The policies reported every week (``searched`` too when a rival was recommended): the
recommendation, the baseline and every peer of :data:`optimizer.rivals.peers.PEERS` that has a rule for
the series' kind (the ``empirical`` peer only for training pools)."""


def complete_weeks(index: pd.DatetimeIndex,
                   min_train: pd.Timedelta = MIN_TRAIN) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The complete weeks ``[(start, end)]`` (UTC, ``end`` exclusive) of a series whose 5-minute
    timestamps are ``index`` (sorted): 7-day spans ending at the last midnight UTC at or
    before the end of the data, back to the first that starts ``min_train`` or more after
    the first point; oldest first. Empty when none fits."""
    if len(index) == 0:
        return []
    last = (index[-1] + STEP).floor("1D")
    out = []
    s = last - WEEK
    while s >= index[0] + min_train:
        out.append((s, s + WEEK))
        s -= WEEK
    return out[::-1]


def walk_weeks(prep: Prepared, max_scored: int | None = None) -> tuple[dict[str, list], dict[str, str]]:
    """Per series of ``prep``: its weeks (:func:`complete_weeks`, the last ``max_scored + 1``
    with ``max_scored``) when it has at least two, else a note why it is skipped."""
    weeks, skipped = {}, {}
    for sid, g in prep.h5.groupby("series_id"):
        if sid not in prep.windows:
            continue
        idx = pd.DatetimeIndex(g["timestamp"])
        w = complete_weeks(idx)
        if max_scored is not None:
            w = w[-(max_scored + 1):]
        if len(w) >= 2:
            weeks[sid] = w
        else:
            span = idx[-1] + STEP - idx[0]
            skipped[sid] = (f"walk-forward: {span / pd.Timedelta('1D'):.2f} days of history hold {len(w)} "
                            f"complete week(s) after "
                            f"{MIN_TRAIN.days} days of training; scoring a week needs a tuning week before it, so "
                            f"at least {MIN_TRAIN.days + 14} days of history ending at midnight UTC")
    return weeks, skipped


def _widened(w: bt.Windows, weeks: list) -> bt.Windows:
    """``w`` with its rolling-origin span over ``weeks``: tuning from the first week, evaluation
    from the second, ending before the last week ends."""
    return bt.Windows(w.start, weeks[0][0], weeks[1][0], weeks[-1][1] - STEP, "walk-forward weeks")


def widen_windows(state: PlanState, max_scored: int | None = None) -> tuple[dict[str, list], dict[str, str]]:
    """The stage after :func:`capplan.run.stages.load.load`: every series' windows widened to its
    walk-forward weeks (:func:`walk_weeks`), so the forecast stage issues rolling forecasts
    over all of them; the series too short for two weeks are left out of the run (their note
    is returned) but stay in the fleet the global models train on. The fleet's other series
    are widened alike, so a series' forecasts do not depend on the selection.

    Raises InputError when no series has two complete weeks."""
    prep = state.prep
    fleet = prep.global_view()
    weeks, skipped = walk_weeks(prep, max_scored)
    if not weeks:
        raise InputError("walk-forward: no series has two complete weeks to tune on and score: "
                         + "; ".join(f"{s}: {why}" for s, why in skipped.items()))
    fleet_weeks, _ = walk_weeks(fleet, max_scored)
    for sid, w in fleet_weeks.items():
        fleet.windows[sid] = _widened(fleet.windows[sid], w)
    for sid, w in weeks.items():
        prep.windows[sid] = _widened(prep.windows[sid], w)
    if skipped:
        kept = prep.select(list(weeks))
        kept.fleet = fleet
        state.prep = kept
    return weeks, skipped


@dataclass
class WeekTask:
    """One series' walk-forward step (picklable): tune on ``tune`` (start, end exclusive), score
    on week ``k + 1`` = ``week``. ``history``: the series' 5-minute (or native) history;
    ``combined``: its combined rolling forecasts."""

    series_id: str
    k: int
    tune: tuple[pd.Timestamp, pd.Timestamp]
    week: tuple[pd.Timestamp, pd.Timestamp]
    history: pd.DataFrame
    combined: pd.DataFrame
    meta: SeriesMeta
    cfg: CapplanConfig
    seed: int
    book: dict

    def task(self) -> SearchTask:
        """The plan's search task (:func:`capplan.run.stages.search.search_task`) on these windows,
        without the random search."""
        w = bt.Windows(self.history["timestamp"].iloc[0], self.tune[0], self.week[0],
                       self.week[1] - pd.Timedelta(1, "ns"))
        t = search_task(self.series_id, w, self.history, self.combined, self.meta, self.cfg, self.seed, self.book)
        return dataclasses.replace(t, settings=t.settings.model_copy(update={"random_search": False}))


def week_tasks(prep: Prepared, combined: pd.DataFrame, cfg: CapplanConfig, weeks: dict[str, list], seed: int = 0,
               tune_weeks: int | None = None) -> list[WeekTask]:
    """Every series' steps ``k = 1 .. n-1`` (series sorted by id): tuning on weeks ``1 .. k``,
    or the last ``tune_weeks`` of them."""
    book = cfg.price_book()
    out = []
    for sid in sorted(weeks):
        w = weeks[sid]
        hist = prep.native.get(sid, prep.h5[prep.h5["series_id"] == sid])
        comb = combined[combined["series_id"] == sid]
        for k in range(1, len(w)):
            first = 0 if tune_weeks is None else max(0, k - tune_weeks)
            out.append(WeekTask(sid, k, (w[first][0], w[k][0]), w[k], hist, comb, prep.meta[sid], cfg, seed, book))
    return out


def _figures(m: Metrics, limit: float) -> dict:
    """One policy's week: ``cost_usd``, ``coverage``, ``idle_ratio`` (ratios), ``unmet``
    (GPU- or replica-hours) and ``regret`` (cost / limit; null when the limit is 0)."""
    return {"cost_usd": m.cost_usd, "coverage": m.coverage, "idle_ratio": m.idle_ratio, "unmet": m.unmet,
            "regret": m.cost_usd / limit if limit > 0 else float("nan")}


def week_one(item: WeekTask) -> dict:
    """Tune, replay and rank one walk-forward step (module docstring): the week's document
    ``{"week", "start", "end", "tuning", "recommendation" (``rule`` when the tuning kept the calibrated
    rule, else ``searched``, the baseline or a peer: :func:`optimizer.rivals.incumbent.recommended_name`), "params"
    (the searched policy, as tuned), "limit_usd", "policies": {name: figures}, "rank", "notes"}``; ``week``
    counts the series' complete weeks from 1, ``start``/``end`` (exclusive) are UTC ISO 8601."""
    task = item.task()
    tuned = tune_policy(task)
    oc = evaluate_policy(task, tuned)
    limit = oc.oracle.cost_usd if oc.oracle is not None else float("nan")
    pol = {"recommended": oc.recommended, "baseline": oc.baseline, **(oc.peers or {})}
    if oc.searched is not None:
        pol["searched"] = oc.searched
    return {"week": item.k + 1, "start": item.week[0].isoformat(), "end": item.week[1].isoformat(),
            "tuning": [item.tune[0].isoformat(), item.tune[1].isoformat()],
            "recommendation": recommended_name(oc.recommended_policy, oc.tuning), "params": tuned.params,
            "limit_usd": limit,
            "policies": {n: _figures(m, limit) for n, m in pol.items()},
            "rank": rank_of_recommended(task, tuned, oc.baseline, oc.peers or {}), "notes": list(oc.notes)}


def rank_of_recommended(task: SearchTask, tuned: Tuned, baseline: Metrics, peers: dict[str, Metrics]) -> dict:
    """``{"candidates", "tuning", "next_week", "spearman"}`` of one step (module docstring,
    "Rank"): the searched policies are replayed on the evaluation week as
    :func:`optimizer.search.tuning.evaluate_policy` replays the recommendation; the baseline's and
    the peers' figures there are ``baseline`` and ``peers``."""
    s = task.settings
    target = min(1.0, s.coverage_target + s.coverage_margin)
    pr = PolicyReplay(task.kind, s, SCENARIO_STREAM)

    def scorer(inp):
        ref = reference_cost(inp)
        f = selection_score(task.kind, s.selection_score, inp, target, ref, s.penalty, s.coverage_objective)
        return f or (lambda m: objective_value(m, target, ref, s.penalty, s.coverage_objective))

    on_week = scorer(task.evalw)
    cands: dict[str, tuple[float, float]] = {}  # key -> (tuning objective, next-week objective)
    seen = {}
    for t in tuned.trials:
        key = repr(sorted(t["params"].items()))
        if key not in seen:
            seen[key] = t["params"]
            cands[key] = (t["objective"], on_week(pr.replay(pr.params(t["params"]), task.evalw)[0]))
    rec_key = repr(sorted(tuned.params.items()))
    if rec_key not in cands:  # the scan's policy, when the search's budget did not replay it
        tune_obj = scorer(task.tune)(pr.replay(pr.params(tuned.params), task.tune)[0])
        cands[rec_key] = (tune_obj, on_week(pr.replay(pr.params(tuned.params), task.evalw)[0]))
    for name, m in {"baseline": baseline, **peers}.items():
        tune_obj = tuned.tuning.get(f"{name}_objective")
        if tune_obj is not None:
            cands[name] = (tune_obj, on_week(m))
    chosen = rec_key if tuned.recommended_policy == "searched" else tuned.recommended_policy
    if chosen not in cands:
        return {"candidates": len(cands), "tuning": None, "next_week": None, "spearman": None}
    tv = np.array([v[0] for v in cands.values()])
    ev = np.array([v[1] for v in cands.values()])
    mine = cands[chosen]
    rho = float(spearmanr(tv, ev).statistic) if len(cands) > 2 and np.ptp(tv) > 0 and np.ptp(ev) > 0 else None
    return {"candidates": len(cands), "tuning": int((tv < mine[0] - 1e-9 * max(1.0, abs(mine[0]))).sum() + 1),
            "next_week": int((ev < mine[1] - 1e-9 * max(1.0, abs(mine[1]))).sum() + 1), "spearman": rho}


def spread(values: list[float]) -> dict:
    """``{"weeks", "min", "median", "max", "mean", "std"}`` of the finite ``values`` (``std``:
    sample standard deviation, ``ddof=1``; null with fewer than two; every figure null with none)."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], float)
    if not len(v):
        return {"weeks": 0, "min": None, "median": None, "max": None, "mean": None, "std": None}
    return {"weeks": int(len(v)), "min": float(v.min()), "median": float(np.median(v)), "max": float(v.max()),
            "mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else None}


def ratio(cost: float, limit: float) -> float:
    """Σ cost / Σ limit (NaN when the limit is 0)."""
    return cost / limit if limit > 0 else float("nan")


def series_summary(weeks: list[dict]) -> dict:
    """Per policy of :data:`POLICIES`: its regret ``spread`` over ``weeks`` and ``regret`` =
    Σ cost / Σ limit; and the spread of the recommendation's next-week rank."""
    out = {}
    for p in POLICIES:
        rows = [w for w in weeks if p in w["policies"]]
        cost = sum(w["policies"][p]["cost_usd"] for w in rows)
        lim = sum(w["limit_usd"] for w in rows)
        out[p] = {"spread": spread([w["policies"][p]["regret"] for w in rows]), "regret": ratio(cost, lim),
                  "cost_usd": cost, "limit_usd": lim}
    out["rank_next_week"] = spread([w["rank"]["next_week"] for w in weeks])
    return out


def fleet_summary(series: dict[str, dict]) -> dict:
    """Across series: per policy, Σ cost / Σ limit over every scored week (``regret``) and the
    spread of the per-series, per-week regrets; ``weeks``: per calendar week (its start) the
    fleet regret of each policy over the series scored on it, and the spread of the
    recommendation's fleet regret from week to week (``recommended_spread``)."""
    rows = [w for s in series.values() for w in s["weeks"]]
    out = {"policies": {}, "weeks": {}}
    for p in POLICIES:
        have = [w for w in rows if p in w["policies"]]
        out["policies"][p] = {"regret": ratio(sum(w["policies"][p]["cost_usd"] for w in have),
                                              sum(w["limit_usd"] for w in have)),
                              "spread": spread([w["policies"][p]["regret"] for w in have])}
    for start in sorted({w["start"] for w in rows}):
        same = [w for w in rows if w["start"] == start]
        lim = sum(w["limit_usd"] for w in same)
        out["weeks"][start] = {"series": len(same), "limit_usd": lim,
                               **{p: ratio(sum(w["policies"][p]["cost_usd"] for w in same if p in w["policies"]), lim)
                                  for p in POLICIES}}
    out["recommended_spread"] = spread([v["recommended"] for v in out["weeks"].values()])
    return out


def walk_forward(state: PlanState, weeks: dict[str, list], tune_weeks: int | None = None) -> dict:
    """The stage after :func:`capplan.run.stages.combine.combine`: every step of every series on the
    executor (:func:`week_one`); returns ``{"series": {id: {"kind", "weeks": [...], "summary"}},
    "failed": {id: {"stage", "error", "where"}}}``. A step that raises fails its series (its
    other weeks are kept)."""
    tasks = week_tasks(state.prep, state.fc.rolling["combined"], state.cfg, weeks, state.seed, tune_weeks)
    ex = state.executor or LOCAL
    state.progress("walk-forward", f"{len(tasks)} weekly searches ({len(weeks)} series), "
                                   f"{state.cfg.plan.n_calls} evaluations each, on the {ex.name} executor")
    labels = [f"{t.series_id} week {t.k + 1}" for t in tasks]
    results = ex.map(week_one, tasks, labels, on_done(state.progress, "walk-forward"))
    series: dict[str, dict] = {}
    for t, r in zip(tasks, results):
        s = series.setdefault(t.series_id, {"kind": t.meta.kind, "weeks": []})
        if isinstance(r, Failed):
            state.ledger.fail(t.series_id, f"walk-forward week {t.k + 1}", r.error, r.where)
        else:
            s["weeks"].append(r)
    for s in series.values():
        s["summary"] = series_summary(s["weeks"])
    return {"series": series, "failed": state.ledger.failed}


def run_policy_backtest(source: str, cfg: CapplanConfig, series: list[str] | None = None, seed: int = 0,
                        timezone: str = "UTC", progress: Progress = no_progress, max_scored: int | None = None,
                        tune_weeks: int | None = None) -> dict:
    """``capplan backtest --policies``: load, widen the windows to the walk-forward weeks
    (:func:`widen_windows`), forecast and combine as the plan does, then walk forward
    (:func:`walk_forward`). ``max_scored``: score only the last N weeks; ``tune_weeks``: tune on
    the last N weeks before each scored one (None: all of them).

    Returns ``{"series": {id: {"kind", "weeks": [week documents, :func:`week_one`], "summary":
    :func:`series_summary`, "fallbacks", "warnings"}}, "summary": :func:`fleet_summary`,
    "skipped": {id: why}, "failed": {id: {"stage", "error", "where"}}, "settings": {...}}``;
    figures in USD (cost), ratios (coverage, idle ratio, regret).

    Raises InputError (exit 2) for an unknown series, an unreadable source, no series with
    two complete weeks, or when every series failed."""
    state = PlanState(cfg, source, series, seed, timezone, progress, record_scores=False)
    got: dict = {}

    def walk_windows(st: PlanState) -> None:
        got["weeks"], got["skipped"] = widen_windows(st, max_scored)

    def walk(st: PlanState) -> None:
        got["doc"] = walk_forward(st, got["weeks"], tune_weeks)

    run([load, walk_windows, forecast, combine, walk], state)
    doc = got["doc"]
    doc["series"] = {sid: {**s, "fallbacks": state.ledger.notes(sid), "warnings": state.ledger.warnings(sid)}
                     for sid, s in doc["series"].items() if s["weeks"]}
    if not doc["series"]:
        raise InputError(f"walk-forward: every series failed: {state.ledger.failures()}")
    doc["summary"] = fleet_summary(doc["series"])
    doc["skipped"] = got["skipped"]
    doc["failed"] = state.ledger.failed
    doc["settings"] = {"coverage_target": cfg.plan.coverage_target, "n_calls": cfg.plan.n_calls, "seed": seed,
                       "tune_weeks": tune_weeks, "weeks": max_scored, "min_train_days": MIN_TRAIN.days}
    return doc
