"""The fleet replay: given the GPUs held per model in each hour, which model serves which series, and what each
series leaves unmet.

Each hour is a small linear programme (all hours solved as one, since they do not interact), solved with
:func:`scipy.optimize.linprog` (HiGHS): variables ``y[i, m, h] >= 0`` (GPUs of series i's own model served by
model m; only models series i may use) and ``u[i, h] >= 0`` (unmet GPUs of its own model);

* ``sum_m y[i, m, h] + u[i, h] >= need[i, h]``;
* ``sum_i ratio[i, m] y[i, m, h] <= capacity[m, h]``;
* minimise ``sum u[i, h] / max(need[i, h], 1)`` (each series' shortfall as a share of its demand, so a small
  series is not starved to serve a large one) plus a 1e-6 tie-break on GPUs placed.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, vstack

from optimizer.fleet.problem import FleetProblem, placement_cells


def assign(problem: FleetProblem, capacity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Place ``problem``'s demand (``problem.need()``, (N, T) whole GPUs of each series' own model) on
    ``capacity`` (M, T) GPUs held per model and hour. Returns ``(placed, unmet)``: placed (N, M, T) GPUs of
    model m serving series i (GPU-hours per hour), unmet (N, T) GPUs of the series' own model not served.
    Raises RuntimeError when HiGHS reports no optimum (the programme is always feasible: unmet absorbs
    any shortfall)."""
    need = problem.need()
    n, t = need.shape
    mm = len(problem.models)
    pi, pj, ph = placement_cells(problem.ratio, need)
    if not len(pi) and not (need > 0).any():  # nothing to serve (an idle window): nothing placed, nothing unmet
        return np.zeros((n, mm, t)), np.zeros((n, t))
    ui, uh = np.nonzero(need > 0)
    n_y, n_u = len(pi), len(ui)
    ratio = problem.ratio[pi, pj]
    c = np.concatenate([1e-6 * ratio, 1.0 / np.maximum(need[ui, uh], 1.0)])
    # serve: -(sum y + u) <= -need, one row per (i, h) with need
    key = ui * t + uh
    row_of = {k: r for r, k in enumerate(key)}
    yrow = np.array([row_of[k] for k in pi * t + ph])
    a_serve = coo_matrix((np.full(n_y + n_u, -1.0), (np.concatenate([yrow, np.arange(n_u)]),
                                                     np.concatenate([np.arange(n_y), n_y + np.arange(n_u)]))),
                         shape=(n_u, n_y + n_u))
    a_cap = coo_matrix((ratio, (pj * t + ph, np.arange(n_y))), shape=(mm * t, n_y + n_u))
    a = vstack([a_serve, a_cap]).tocsr()
    b = np.concatenate([-need[ui, uh], np.asarray(capacity, float).ravel()])
    res = linprog(c, A_ub=a, b_ub=b, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"fleet replay: HiGHS found no optimum ({res.message})")
    placed = np.zeros((n, mm, t))
    np.add.at(placed, (pi, pj, ph), np.maximum(res.x[:n_y], 0.0) * ratio)
    unmet = np.zeros((n, t))
    unmet[ui, uh] = np.maximum(res.x[n_y:], 0.0)
    unmet[unmet < 1e-7] = 0.0
    return placed, unmet


def coverage(problem: FleetProblem, unmet: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Per series, the share (0-1) of its hours with known demand in which nothing was left unmet
    (the capacity covered its demand); NaN for a series with no known hour."""
    known = np.isfinite(np.asarray(problem.demand, float))
    ok = (unmet <= eps) & known
    with np.errstate(invalid="ignore", divide="ignore"):
        return ok.sum(axis=1) / known.sum(axis=1)
