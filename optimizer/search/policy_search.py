"""Bayesian policy search with scikit-optimize, random search with the same budget, and the
deterministic grid scan that starts both.

The objective they minimise is :mod:`optimizer.search.objective`; the spaces, grids and anchors are
:mod:`optimizer.search.space`.

Ties (e.g. an all-zero tuning window, where every policy costs nothing and
covers everything) are broken deterministically by :func:`pick_best`: highest
coverage, then lowest cost, then the safest policy (an hourly top-up, the
smallest weekly reservation, higher quantiles, more headroom), then the
earliest trial. The pipeline says so in the series' notes.

Before any search, :func:`grid_scan` replays a fixed grid of policies
(``Space.grid``: :data:`TRAINING_GRID`, :data:`INFERENCE_GRID`) and keeps the
best: no seed is involved, so the starting policy depends only on the data and
the forecasts. Both searches then evaluate that point and the anchor policies
first (``Space.anchors``, :data:`TRAINING_ANCHORS`), inside the same budget of
``n_calls`` evaluations, so the comparison stays like with like; the remaining
evaluations are random draws, then (GP) the acquisition's choices.

``skopt.gp_minimize`` is seeded; repeated points are answered from a cache
(so "The objective has been evaluated at this point before" never re-runs or
crashes a replay), and skopt's numpy integer and string values are cast to
the types the simulator's pydantic models expect.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from skopt import dummy_minimize, gp_minimize
from skopt.space import Real
from skopt.space import Space as SkSpace
from skopt.utils import cook_estimator

from optimizer.plan.policy import Metrics
from optimizer.search.noise_ties import NOISE_TIES, cheapest_within_noise
from optimizer.search.objective import (
    objective_value,
)
from optimizer.search.space import (
    Space,
)


@dataclass
class SearchResult:
    """Best policy of one search, and the trial log (one dict per evaluation:
    ``method, trial, params, objective, cost_usd, coverage, idle_ratio, seconds``)."""

    method: str
    best_params: object
    best_objective: float
    best_metrics: Metrics | None
    trials: list[dict]
    n_tied: int = 1
    robust_objective: float | None = None  # grid_scan: the worst objective of the point and its grid neighbours
    # grid_scan under cheapest_within_noise: what the rule changed (optimizer.search.noise_ties)
    noise_tie: dict | None = None


TIE_RTOL = 1e-9


def pick_best(points: dict[tuple, tuple[float, Metrics, object]], space: Space) -> tuple[tuple, int]:
    """The best evaluated point, deterministically: the lowest objective; among
    points within ``TIE_RTOL`` (relative) of it — e.g. every policy when the
    tuning window's demand and forecasts are all zero — the highest coverage,
    then the lowest cost, then the safest by ``space.safety``, then the
    earliest evaluated. Returns ``(key, number of tied points)``."""
    best = min(v for v, _, _ in points.values())
    tied = [(k, m, p) for k, (v, m, p) in points.items() if v <= best + TIE_RTOL * max(1.0, abs(best))]

    def rank(item):
        _, m, p = item
        cov = m.coverage if math.isfinite(m.coverage) else 0.0
        return (-cov, m.cost_usd, tuple(-x for x in space.safety(p)))

    return min(tied, key=rank)[0], len(tied)


def _objective_fn(evaluate: Callable[[object], Metrics], space: Space, coverage_target: float,
                  reference_cost: float, penalty: float, coverage_by: str, method: str,
                  cache: dict, trials: list | None, progress=None, n_calls: int = 0,
                  score: Callable[[Metrics], float] | None = None):
    """``f(point) -> objective`` that replays each distinct point once (``cache``: key ->
    ``(objective, metrics, params)``) and logs every call in ``trials`` (when given);
    ``score(metrics)`` replaces :func:`objective_value` when given."""
    def f(x):
        key = _key(x)
        params = space.to_params(x)
        t0 = time.perf_counter()
        if key in cache:
            val, m, _ = cache[key]
        else:
            m = evaluate(params)
            val = score(m) if score is not None else objective_value(m, coverage_target, reference_cost, penalty,
                                                                     coverage_by)
            cache[key] = (val, m, params)
        if trials is not None:
            trials.append({"method": method, "trial": len(trials), "params": params.model_dump(), "objective": val,
                           "cost_usd": m.cost_usd, "coverage": m.coverage, "idle_ratio": m.idle_ratio,
                           "seconds": time.perf_counter() - t0})
            if progress:
                progress(len(trials), n_calls)
        return val

    return f


def grid_scan(evaluate: Callable[[object], Metrics], space: Space, coverage_target: float, reference_cost: float,
              penalty: float = 0.5, coverage_by: str = "window",
              score: Callable[[Metrics], float] | None = None, ties: str = "exact") -> tuple[SearchResult, list]:
    """Replay every point of ``space.grid_points()`` and pick the most robust good one.

    Each point is scored by the worst objective among itself and its grid
    neighbours (one step up or down in one numeric dimension: the headrooms),
    so a point on a narrow ridge that a slightly different forecast would
    push off loses to one in a flat region; the lowest such score wins. Among
    points tied on it (:data:`TIE_RTOL`), :func:`pick_best` ranks by each point's
    own objective (so a flat region's dearer points never win over its cheapest),
    then by its usual order. No randomness: the result
    depends on the tuning window and the forecasts only, never on a seed (the
    pipeline's starting policy, which the Gaussian-process search then
    refines). Returns ``(result, best point)``; ``result.best_objective`` is the
    point's own objective, ``result.trials`` is empty (the scan's size is
    ``len(space.grid_points())``); ``result.best_params`` is None when the space
    has no grid point. ``score(metrics)``, when given, replaces :func:`objective_value`
    (e.g. :func:`daily_regret_score`). ``ties`` (:data:`optimizer.search.noise_ties.NOISE_TIES`):
    ``cheapest_within_noise`` keeps, of the points within the days' noise of that pick, the
    cheapest that meets ``coverage_target`` (:func:`optimizer.search.noise_ties.cheapest_within_noise`);
    ``result.noise_tie`` then says what it changed (``n_within``, ``exact_params``, ``exact_cost_usd``,
    ``cost_usd``; None when it kept the pick). Raises ValueError for another ``ties``.
    """
    if ties not in NOISE_TIES:
        raise ValueError(f"unknown noise_ties {ties!r}; use one of {', '.join(NOISE_TIES)}")
    cache: dict[tuple, tuple[float, Metrics, object]] = {}
    f = _objective_fn(evaluate, space, coverage_target, reference_cost, penalty, coverage_by, "grid", cache, None,
                      score=score)
    pts = {}
    for x in space.grid_points():
        f(x)
        pts[_key(x)] = x
    if not cache:
        return SearchResult("grid", None, float("inf"), None, []), []
    steps = _grid_steps(space)
    robust = {}
    for k, (v, m, p) in cache.items():
        worst = v
        for i, vals in steps.items():
            j = vals.index(k[i]) if k[i] in vals else None
            for jj in ((j - 1, j + 1) if j is not None else ()):
                if 0 <= jj < len(vals):
                    nb = cache.get(k[:i] + (vals[jj],) + k[i + 1:])
                    worst = max(worst, nb[0]) if nb else worst
        robust[k] = (worst, m, p)
    # among the points tied on the robust score, the point's own objective decides first: a flat
    # region (e.g. a daily layer capped at the last day's peak, where the headroom changes nothing)
    # ties its dearer members with its cheapest one; only then pick_best's order (coverage, cost, safety)
    low = min(v for v, _, _ in robust.values())
    tied = {k: cache[k] for k, (v, _, _) in robust.items() if v <= low + TIE_RTOL * max(1.0, abs(low))}
    key, n_tied = pick_best(tied, space)
    noise = None
    if ties == "cheapest_within_noise":
        near_key, n_within = cheapest_within_noise(cache, {k: v for k, (v, _, _) in robust.items()}, key,
                                                    coverage_target)
        if near_key != key:
            noise = {"n_within": n_within, "exact_params": cache[key][2].model_dump(),
                     "exact_cost_usd": cache[key][1].cost_usd, "cost_usd": cache[near_key][1].cost_usd}
            key, n_tied = near_key, 1
    val, m, best = cache[key]
    return SearchResult("grid", best, val, m, [], n_tied, robust_objective=robust[key][0], noise_tie=noise), pts[key]


def _grid_steps(space: Space) -> dict[int, list[float]]:
    """Numeric (``Real``) dimension index -> its sorted grid values, clipped into the bounds
    and rounded as points hold them."""
    steps = {}
    for i, d in enumerate(space.dims):
        if isinstance(d, Real) and d.name in space.grid:
            steps[i] = sorted({_key([min(max(float(v), d.low), d.high)])[0] for v in space.grid[d.name]})
    return steps


def neighbour_objective(evaluate: Callable[[object], Metrics], space: Space, x: list, coverage_target: float,
                        reference_cost: float, penalty: float = 0.5, coverage_by: str = "window",
                        score: Callable[[Metrics], float] | None = None) -> float:
    """The worst objective of point ``x`` and its neighbours one grid step away in each numeric
    dimension that :func:`grid_scan` steps through (a value on the grid: its grid neighbours,
    as the scan scores them; off the grid: plus and minus the width of the grid interval it
    lies in, clipped into the bounds). Scores a point found off the grid (the Gaussian-process
    refinement) the way the scan scores its own, so the two are compared like with like."""
    cache: dict[tuple, tuple[float, Metrics, object]] = {}
    f = _objective_fn(evaluate, space, coverage_target, reference_cost, penalty, coverage_by, "neighbours", cache,
                      None, score=score)
    worst = f(list(x))
    for i, vals in _grid_steps(space).items():
        d, v = space.dims[i], _key([float(x[i])])[0]
        if v in vals:
            j = vals.index(v)
            nbs = [vals[jj] for jj in (j - 1, j + 1) if 0 <= jj < len(vals)]
        elif len(vals) > 1:
            j = min(max(int(np.searchsorted(vals, v)), 1), len(vals) - 1)
            w = vals[j] - vals[j - 1]
            nbs = [u for u in (min(max(v - w, d.low), d.high), min(max(v + w, d.low), d.high)) if u != v]
        else:
            nbs = []
        for u in nbs:
            worst = max(worst, f(list(x[:i]) + [u] + list(x[i + 1:])))
    return worst


def _key(x: list) -> tuple:
    """A point as a cache key (floats rounded to 9 decimals)."""
    return tuple(round(v, 9) if isinstance(v, float) else v for v in x)


def run_search(evaluate: Callable[[object], Metrics], space: Space, n_calls: int, seed: int,
               coverage_target: float, reference_cost: float, penalty: float = 0.5,
               method: str = "gp", progress: Callable[[int, int], None] | None = None,
               coverage_by: str = "window", start: list | None = None,
               score: Callable[[Metrics], float] | None = None) -> SearchResult:
    """Minimise the objective over ``space`` with ``gp`` (``skopt.gp_minimize``)
    or ``random`` (``skopt.dummy_minimize``), ``n_calls`` evaluations, seeded.

    ``evaluate(params) -> Metrics`` replays the policy on the tuning window;
    ``coverage_by`` (:data:`COVERAGE_OBJECTIVES`) picks the coverage shortfall the
    objective penalises (:func:`coverage_shortfall`); ``start`` (skopt points,
    e.g. :func:`grid_scan`'s best) is evaluated first, then the space's anchors,
    all inside the budget. The best point is chosen by :func:`pick_best`. ``score(metrics)``,
    when given, replaces :func:`objective_value` (as in :func:`grid_scan`).
    """
    cache: dict[tuple, tuple[float, Metrics, object]] = {}
    trials: list[dict] = []
    f = _objective_fn(evaluate, space, coverage_target, reference_cost, penalty, coverage_by, method, cache, trials,
                      progress, n_calls, score)
    n_init = max(2, min(10, n_calls // 2))
    x0 = [list(x) for x in (start or [])] + [a for a in space.anchor_points() if a not in (start or [])]
    x0 = x0[: max(0, min(n_init - 1, n_calls - 1))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "gp":
            # one optimiser start per GP fit (skopt's default restarts it twice more) and a sampled
            # acquisition: the same Bayesian loop at a third of the cost on two cores
            gp = cook_estimator("GP", space=SkSpace(space.dims), random_state=seed, noise="gaussian",
                                n_restarts_optimizer=0)
            gp_minimize(f, space.dims, base_estimator=gp, n_calls=n_calls, n_initial_points=n_init - len(x0),
                        random_state=seed, n_points=2000, acq_optimizer="sampling", x0=x0 or None)
        elif method == "random":
            dummy_minimize(f, space.dims, n_calls=n_calls, random_state=seed, x0=x0 or None)
        else:
            raise ValueError(f"unknown search method {method!r}; use 'gp' or 'random'")
    key, n_tied = pick_best(cache, space)
    val, m, best = cache[key]
    return SearchResult(method, best, val, m, trials, n_tied)
