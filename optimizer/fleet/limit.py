"""The fleet's sizing programme and its perfect-foresight limit: the cheapest whole GPUs per model and purchase
option that serve every series' known demand in every hour, each series placed only on models it may use.

A mixed-integer programme solved with :func:`scipy.optimize.milp` (HiGHS), the fleet form of the single-pool
limit (:func:`optimizer.rivals.perfect_foresight.training_oracle`), with its conventions:

* variables per model m, whole GPUs >= 0: reserved ``R[m, w]`` per week, spot ``S[m, d]`` per day, on-demand
  ``H[m, h]`` per hour, periods counted from the window's first hour (``week = h // 168``, ``day = h // 24``);
  and the placement ``y[i, m, h] >= 0``: GPU-hours of series i's own model served by model m in hour h;
* cost (USD) = sum of each capacity variable x its price (USD per GPU-hour) x the hours its period has in the
  window; spot at the effective price ``spot + on_demand x spot_redo`` as the single-pool limit;
* per series and hour with demand: ``sum_m y[i, m, h] >= need[i, h]`` (whole GPUs of its own model);
* per model and hour: ``sum_i ratio[i, m] y[i, m, h] <= base[m, h] + R + S + H`` (``ratio``: GPUs of m per
  GPU of the series' own model, :mod:`optimizer.fleet.problem`; ``base``: capacity already bought, free);
* the purchase book's spot cap per model: ``S <= spot_cap_gpus`` and
  ``S <= spot_cap_share x (base + R + S + H)`` in every hour.

With whole GPUs and fractional conversion ratios the programme is not totally unimodular (unlike the
single-pool one), so HiGHS branches; it stops within a relative gap (:data:`GAP`) or a time limit and
reports its proven lower bound (``Sizing.bound_usd``), which fleet regret is measured against, so regret is
never flattered by an unfinished solve. Small cases are solved to optimality (``gap=0``).

Spot never fails here (a bound). With ``base`` = 0 and every layer free to buy this is the limit: no causal
plan that meets every hour's demand on allowed models can cost less. The causal plan
(:mod:`optimizer.fleet.causal`) calls the same programme on forecast scenarios with some layers fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from optimizer.fleet.problem import FleetProblem, placement_cells

LAYERS = ("reserved", "spot", "on_demand")
GAP = 1e-3  #: relative optimality gap of a sizing: HiGHS stops within 0.1 % of the optimum (``bound_usd`` says where)
TIME_LIMIT_S = 60.0  #: seconds one sizing may take before its best solution is kept
PERIOD_HOURS = {"reserved": 168, "spot": 24, "on_demand": 1}


@dataclass
class Sizing:
    """What a sizing bought and where it placed demand on ``problem``'s window.

    ``capacity``: per layer an (M, T) array of whole GPUs bought per model and hour (the period's value on each
    of its hours); ``placed``: (N, M, T) GPUs of model m serving series i in hour h (GPU-hours, the hour being
    1 h); ``unmet``: (N, T) GPUs of the series' own model not served (0 for a limit); ``cost_usd``: USD of the
    layers bought here (``base`` is not counted); ``bound_usd``: HiGHS's proven lower bound on that cost (equal
    to it when solved to optimality; below it by at most the relative ``gap`` asked for otherwise);
    ``method``: how it was solved."""

    capacity: dict[str, np.ndarray]
    placed: np.ndarray
    unmet: np.ndarray
    cost_usd: float
    method: str
    bound_usd: float = float("nan")


def layer_cost(problem: FleetProblem, layer: str, gpus: np.ndarray) -> np.ndarray:
    """USD per model of ``gpus`` (M, T) GPUs of ``layer`` held each hour: GPU-hours x the layer's price
    (spot at the effective price ``spot + on_demand x spot_redo``). Returns shape (M,)."""
    out = np.zeros(len(problem.models))
    for j, m in enumerate(problem.models):
        p = problem.prices[m]
        price = {"reserved": p.reserved, "spot": p.spot + p.on_demand * problem.spot_redo,
                 "on_demand": p.on_demand}[layer]
        out[j] = float(np.sum(gpus[j])) * price
    return out


def _solve(problem: FleetProblem, base: np.ndarray | None, layers: tuple[str, ...], hour0: int,
           int_layers: tuple[str, ...], gap: float, time_limit_s: float, periods: dict[str, np.ndarray] | None = None,
           weight: float = 1.0) -> tuple[Sizing, float]:
    """The programme of the module docstring with whole GPUs only in ``int_layers`` (the others continuous);
    returns the sizing (continuous layers as solved, not rounded) and HiGHS's lower bound on its objective.
    ``periods``: per layer, a period label per hour replacing the calendar's (e.g. one reservation shared by
    stacked scenario days); ``weight``: every cost multiplied by it (1/k over k scenario days: their mean)."""
    need = problem.need()
    n, t = need.shape
    mm = len(problem.models)
    base = np.zeros((mm, t)) if base is None else np.asarray(base, float)
    hours = np.arange(hour0, hour0 + t)
    # capacity variables: per layer and model, one per period present in the window
    var_cost, var_ub, cap_cols = [], [], []  # cap_cols[layer][j] -> (period index per hour -> column)
    col = 0
    period_of = {}
    for layer in LAYERS:
        per = periods[layer] if periods and layer in periods else hours // PERIOD_HOURS[layer]
        labels, inv = np.unique(per, return_inverse=True)
        period_of[layer] = inv
        counts = np.bincount(inv, minlength=len(labels)).astype(float)
        cols = {}
        for j, m in enumerate(problem.models):
            p = problem.prices[m]
            price = {"reserved": p.reserved, "spot": p.spot + p.on_demand * problem.spot_redo,
                     "on_demand": p.on_demand}[layer]
            cols[j] = col + np.arange(len(labels))
            var_cost.extend(counts * price * weight)
            ub = np.inf if layer in layers else 0.0
            if layer == "spot" and p.spot_cap_gpus is not None:
                ub = min(ub, float(p.spot_cap_gpus))
            var_ub.extend([ub] * len(labels))
            col += len(labels)
        cap_cols.append(cols)
    n_cap = col
    # placement variables for (i, m, h) with need > 0 and m allowed
    pi, pj, ph = placement_cells(problem.ratio, need)
    n_y = len(pi)
    ycol = n_cap + np.arange(n_y)
    ratio = problem.ratio[pi, pj] if n_y else np.zeros(0)
    c = np.concatenate([np.asarray(var_cost, float), np.full(n_y, 1e-7)])  # a tie-break: fewer GPUs placed
    cons = []
    # serve rows: sum_m y[i, m, h] >= need
    srow_key = pi * t + ph
    skeys, srow = np.unique(srow_key, return_inverse=True)
    if len(skeys):
        a = coo_matrix((np.ones(n_y), (srow, ycol)), shape=(len(skeys), n_cap + n_y)).tocsr()
        cons.append(LinearConstraint(a, lb=need[skeys // t, skeys % t], ub=np.inf))
    # capacity rows, one per (model, hour): sum_i ratio y - R - S - H <= base
    rows, cols, vals = [], [], []
    for layer_i, layer in enumerate(LAYERS):
        inv = period_of[layer]
        for j in range(mm):
            rows.append(j * t + np.arange(t))
            cols.append(cap_cols[layer_i][j][inv])
            vals.append(np.full(t, -1.0))
    rows.append(pj * t + ph)
    cols.append(ycol)
    vals.append(ratio)
    a = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                   shape=(mm * t, n_cap + n_y)).tocsr()
    cons.append(LinearConstraint(a, lb=-np.inf, ub=base.ravel()))
    # spot cap share: (1 - s) S - s (R + H) <= s base
    for j, m in enumerate(problem.models):
        share = problem.prices[m].spot_cap_share
        if share is None or "spot" not in layers:
            continue
        r = np.arange(t)
        cc = np.concatenate([cap_cols[0][j][period_of["reserved"]], cap_cols[1][j][period_of["spot"]],
                             cap_cols[2][j][period_of["on_demand"]]])
        vv = np.concatenate([np.full(t, -share), np.full(t, 1.0 - share), np.full(t, -share)])
        a = coo_matrix((vv, (np.tile(r, 3), cc)), shape=(t, n_cap + n_y)).tocsr()
        cons.append(LinearConstraint(a, lb=-np.inf, ub=share * base[j]))
    is_int = np.zeros(n_cap)
    for layer_i, layer in enumerate(LAYERS):
        if layer in int_layers:
            for j in range(mm):
                is_int[cap_cols[layer_i][j]] = 1.0
    integrality = np.concatenate([is_int, np.zeros(n_y)])
    ub = np.concatenate([np.asarray(var_ub, float), np.full(n_y, np.inf)])
    res = milp(c, constraints=cons, integrality=integrality, bounds=Bounds(0, ub),
               options={"mip_rel_gap": gap, "time_limit": time_limit_s})
    if res.x is None or res.status not in (0, 1):
        raise RuntimeError(f"fleet sizing: HiGHS found no optimum ({res.message}); layers {layers} on top of the "
                           "capacity held cannot serve the demand")
    x = res.x
    capacity = {}
    for layer_i, layer in enumerate(LAYERS):
        inv = period_of[layer]
        vals = [x[cap_cols[layer_i][j]] for j in range(mm)]
        vals = [np.round(v) if layer in int_layers else np.maximum(v, 0.0) for v in vals]
        capacity[layer] = np.stack([v[inv] for v in vals]) if mm else np.zeros((0, t))
    placed = np.zeros((n, mm, t))
    if n_y:
        np.add.at(placed, (pi, pj, ph), np.maximum(x[ycol], 0.0) * ratio)
    cost = float(sum(layer_cost(problem, k, capacity[k]).sum() for k in LAYERS if k in layers))
    bound = getattr(res, "mip_dual_bound", None)
    bound = float(res.fun) if bound is None or not np.isfinite(bound) else min(float(res.fun), float(bound))
    bound = max(0.0, bound - (1e-7 * float(np.sum(x[n_cap:])) if n_y else 0.0))  # less the tie-break's share
    method = "milp (HiGHS)" if res.status == 0 else f"milp (HiGHS), stopped at its time limit ({time_limit_s:g} s)"
    return Sizing(capacity=capacity, placed=placed, unmet=np.zeros((n, t)), cost_usd=cost, method=method,
                  bound_usd=min(bound, cost)), bound


def size(problem: FleetProblem, base: np.ndarray | None = None, layers: tuple[str, ...] = LAYERS,
         hour0: int = 0, exact: bool = False, gap: float = GAP, time_limit_s: float = TIME_LIMIT_S) -> Sizing:
    """Solve the programme of the module docstring on ``problem`` (demand: ``problem.need()``), buying only
    ``layers``, on top of ``base`` (M, T) GPUs already held (default none). ``hour0``: the window's first
    hour counted from the start of the decision calendar, so that weeks and days keep their boundaries when a
    sub-window is sized.

    ``exact``: one programme with every layer in whole GPUs, solved to the relative ``gap`` (0: proven
    optimal) within ``time_limit_s``. Otherwise (the default; fast at fleet scale) two stages: (1) reserved and
    spot in whole GPUs with on-demand continuous, a relaxation whose optimum is a proven lower bound
    (``bound_usd``); (2) with those held, each hour's on-demand GPUs in whole GPUs, one exact programme per
    hour (hours do not interact once reserved and spot are held). The result is a whole-GPU plan that serves
    every hour, at most the on-demand rounding above the bound. Where no series changes model (every
    conversion ratio 1: alone, or pooled without substitution) the one programme is solved: its relaxation is
    then integral, as the single-pool limit's.

    Raises RuntimeError when HiGHS reports no solution (with every layer free to buy the programme is always
    feasible; with ``layers`` restricted, demand above ``base`` is infeasible and is said so)."""
    t = problem.hours
    base = np.zeros((len(problem.models), t)) if base is None else np.asarray(base, float)
    finite = problem.ratio[np.isfinite(problem.ratio)]
    if exact or "on_demand" not in layers or np.all(finite == 1.0):  # no conversion: an interval matrix, integral
        return _solve(problem, base, layers, hour0, LAYERS, gap, time_limit_s)[0]
    first, bound = _solve(problem, base, layers, hour0, ("reserved", "spot"), gap, time_limit_s)
    held = base + first.capacity["reserved"] + first.capacity["spot"]
    od = np.zeros_like(held)
    placed = np.zeros_like(first.placed)
    need = problem.need()
    for h in range(t):
        if not need[:, h].any():
            continue
        one = _solve(problem.window(h, h + 1), held[:, h:h + 1], ("on_demand",), hour0 + h, LAYERS, 0.0,
                     time_limit_s)[0]
        od[:, h] = one.capacity["on_demand"][:, 0]
        placed[:, :, h] = one.placed[:, :, 0]
    capacity = {"reserved": first.capacity["reserved"], "spot": first.capacity["spot"], "on_demand": od}
    cost = float(sum(layer_cost(problem, k, capacity[k]).sum() for k in LAYERS if k in layers))
    return Sizing(capacity=capacity, placed=placed, unmet=np.zeros_like(first.unmet), cost_usd=cost,
                  method="milp (HiGHS): reserved and spot whole, then each hour's on-demand whole",
                  bound_usd=min(bound, cost))


def fleet_limit(problem: FleetProblem, variant: str = "substitution", exact_time_s: float = 10.0) -> Sizing:
    """The perfect-foresight limit of ``problem``'s fleet on the variant ``substitution`` (each series on its
    allowed models) or ``pooled`` (each on its own model): :func:`size`'s two-stage plan, and also the one
    whole-GPU programme for up to ``exact_time_s`` seconds (0: not tried); the cheaper plan is kept, with the
    higher of the two proven bounds. The ``alone`` limit is the sum of :func:`size` over
    :meth:`FleetProblem.alone`."""
    p = problem.variant(variant)
    best = size(p)
    if exact_time_s > 0:
        try:
            ex = size(p, exact=True, time_limit_s=exact_time_s)
        except RuntimeError:  # no whole-GPU solution within the time: the two-stage plan stands
            return best
        bound = max(best.bound_usd, ex.bound_usd)
        best = ex if ex.cost_usd < best.cost_usd else best
        best.bound_usd = min(bound, best.cost_usd)
    return best


def alone_limit(problem: FleetProblem) -> float:
    """USD: the sum over series of each series' limit on its own model, planned by itself."""
    return float(sum(size(p).cost_usd for p in problem.alone()))
