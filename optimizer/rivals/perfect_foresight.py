"""The perfect-foresight limit: the cheapest capacity that meets demand in every interval.

Per series, on one window, with the demand known in advance, the same price
book (:mod:`optimizer.book.prices`), the same layers and decision cadences as the
replayed policies (:mod:`optimizer.engine.replay`). No causal policy that meets demand
in every interval can cost less (tested in ``tests/optimizer/rivals/test_perfect_foresight.py``); the
ratio ``regret = policy cost / oracle cost`` says how far a policy is from it.

Training pools (:func:`training_oracle`), solved exactly as a mixed-integer
programme with :func:`scipy.optimize.milp` (HiGHS):

* variables, all whole GPUs >= 0: reserved ``R_w`` per week, spot ``S_d``
  per day and on-demand ``H_h`` per hour, the periods counted from the
  window's first step as in the replay;
* cost (USD) = sum of each variable x its price (USD per GPU-hour) x the
  hours its period has in the window x GPUs per unit;
* one constraint per hour with known demand:
  ``R_w + S_d + H_h >= ceil(max demand of the hour)``.

  The daily on-demand layer of :class:`optimizer.plan.policy.TrainingParams` is
  left out: the hourly on-demand layer has the same price and can do all it
  does, so it never lowers the limit. The purchase book's spot cap holds here
  too (:mod:`optimizer.book.purchase`): ``S_d <= spot_cap_gpus`` and ``S_d <= spot_cap_share
  x (R_w + S_d + H_h)`` in every hour. **Spot interruptions never take capacity
  away** here (spot GPUs never fail), which only makes the limit lower, so the
  bound stays a bound. What an interruption costs in money is another matter:
  under ``plan.spot_outage: replacement`` every plan buys the lost work back on
  demand (:func:`optimizer.engine.replay.spot_outage`), and interruptions cannot be
  foreseen, so the limit pays their expected cost: its spot is priced at the
  effective spot price ``spot + on_demand x ReplayInput.spot_redo`` (the
  expected GPU-hours redone per spot GPU-hour,
  :func:`optimizer.training.newsvendor.redo_per_spot_hour`, as in
  :func:`optimizer.training.newsvendor.effective_spot_price`), a bound in expectation. Under
  ``recovery`` (``spot_redo`` 0) an interruption costs capacity, not money, and
  the limit pays plain spot. The constraint matrix is an interval matrix (totally
  unimodular), so the LP relaxation is already integral; ``milp`` keeps the
  integrality explicit.

Inference services (:func:`inference_oracle`), a closed form at the data's
resolution (no solver needed):

* ``n_t = ceil(demand_t)`` ready replicas are needed in step ``t``;
* a replica is paid from the moment it starts, including the cold start:
  ``c = ceil(cold_start_s / step_s)`` steps before it serves; replicas that
  are ready at the window's first step cost nothing before it (as in the
  replay, which starts with its initial replicas ready);
* replicas are interchangeable, so the cost splits into levels ``k = 1, 2,
  ...``: level ``k`` is needed on the steps where ``n_t >= k``; across a gap of
  ``g`` idle steps between two such runs the cheapest choice is to keep the
  replica (``g`` steps) or stop and restart it (``c`` steps): ``min(g, c)``;
  before the first run starting at step ``a``, ``min(a, c)``. Cost (USD) =
  sum over levels of (needed steps + those gap costs) x step hours x on-demand
  price x GPUs per replica.

Steps with missing demand (NaN) need nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix

from optimizer.engine.replay_core import ReplayInput

EPS = 1e-9


class OracleResult(BaseModel):
    """The perfect-foresight limit on one window.

    ``cost_usd``: its cost (USD); ``layers``: GPU-hours (training) or
    replica-hours (inference) bought per layer; ``method``: how it was solved.
    """

    cost_usd: float
    layers: dict[str, float]
    method: str


def _periods(times: pd.DatetimeIndex, length: str) -> np.ndarray:
    """Period index of every step, periods counted from the first step (as the replay's lookups)."""
    if len(times) == 0:
        return np.zeros(0, dtype=int)
    return np.asarray((times - times[0]) // pd.Timedelta(length), dtype=int)


def training_oracle(inp: ReplayInput) -> OracleResult:
    """Cheapest reserved (weekly) + spot (daily) + on-demand (hourly) plan meeting
    every known interval of ``inp.demand`` (GPUs) on ``inp.times``; prices from
    ``inp.price`` (USD per GPU-hour). See the module docstring for the programme.

    Raises RuntimeError if HiGHS reports no optimum (it cannot happen for a
    feasible, bounded programme like this one; raised rather than guessed).
    """
    n = len(inp.times)
    step_h = inp.step_s / 3600.0
    demand = np.asarray(inp.demand, dtype=float)
    if n == 0 or not np.isfinite(demand).any():
        return OracleResult(cost_usd=0.0, layers={"reserved": 0.0, "spot": 0.0, "on_demand_hourly": 0.0},
                            method="empty window")
    w, d, h = (_periods(inp.times, x) for x in ("7D", "1D", "1h"))
    nw, nd, nh = w.max() + 1, d.max() + 1, h.max() + 1
    # hours with known demand: their max, and the week/day they lie in
    known = np.isfinite(demand)
    need = np.full(nh, -np.inf)
    np.maximum.at(need, h[known], np.ceil(np.maximum(demand[known], 0.0) - EPS))
    hours = np.flatnonzero(np.isfinite(need) & (need > 0))
    if len(hours) == 0:
        return OracleResult(cost_usd=0.0, layers={"reserved": 0.0, "spot": 0.0, "on_demand_hourly": 0.0},
                            method="milp (HiGHS): no demand")
    first = np.searchsorted(h, hours)  # first step of each hour -> its week and day
    unit = step_h * inp.gpus_per_unit
    c = np.concatenate([np.bincount(w, minlength=nw) * unit * inp.price.reserved,
                        np.bincount(d, minlength=nd) * unit * (inp.price.spot + inp.price.on_demand * inp.spot_redo),
                        np.bincount(h, minlength=nh) * unit * inp.price.on_demand])
    rows = np.repeat(np.arange(len(hours)), 3)
    cols = np.stack([w[first], nw + d[first], nw + nd + hours], axis=1).ravel()
    a = csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(hours), nw + nd + nh))
    cons = [LinearConstraint(a, lb=need[hours], ub=np.inf)]
    share = inp.price.spot_cap_share
    if share is not None:  # spot at most `share` of the GPUs bought in every hour: (1 - share) S - share (R + H) <= 0
        hh = np.arange(nh)
        f = np.searchsorted(h, hh)
        cols = np.stack([w[f], nw + d[f], nw + nd + hh], axis=1).ravel()
        vals = np.tile([-share, 1.0 - share, -share], nh)
        cons.append(LinearConstraint(csr_matrix((vals, (np.repeat(hh, 3), cols)), shape=(nh, nw + nd + nh)),
                                     lb=-np.inf, ub=0.0))
    upper = np.full(len(c), np.inf)
    if inp.price.spot_cap_gpus is not None:
        upper[nw:nw + nd] = float(inp.price.spot_cap_gpus)
    res = milp(c, constraints=cons, integrality=np.ones(len(c)), bounds=Bounds(0, upper))
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"oracle: HiGHS found no optimum ({res.message})")
    x = np.round(res.x)
    r, s, o = x[:nw], x[nw:nw + nd], x[nw + nd:]
    layers = {"reserved": float((r[w]).sum() * step_h), "spot": float((s[d]).sum() * step_h),
              "on_demand_hourly": float((o[h]).sum() * step_h)}
    return OracleResult(cost_usd=float(c @ x), layers=layers, method="milp (HiGHS)")


def daily_training_limits(inp: ReplayInput) -> np.ndarray:
    """The perfect-foresight limit of each day of ``inp``'s window on its own (USD per day,
    days counted from the window's first step, as the replay's ``Metrics.daily_cost_usd``):
    :func:`training_oracle` on each day's slice (0 for a day with no demand). A day alone
    cannot share a weekly reservation, so each is the limit *of that day* as a separate
    scenario, which is what :func:`optimizer.search.policy_search.daily_regret_score` compares a day's cost with."""
    d = _periods(inp.times, "1D")
    out = np.zeros(int(d.max()) + 1 if len(d) else 0)
    for k in range(len(out)):
        m = d == k
        day = ReplayInput(times=inp.times[m], demand=np.asarray(inp.demand)[m], step_s=inp.step_s, price=inp.price,
                          gpus_per_unit=inp.gpus_per_unit, spot_outage=inp.spot_outage, spot_redo=inp.spot_redo)
        out[k] = training_oracle(day).cost_usd
    return out


def level_steps(need: np.ndarray, cold_steps: int) -> float:
    """Replica-steps paid by the cheapest schedule that has ``need[t]`` (whole
    replicas) ready at every step, a start paying ``cold_steps`` before it
    serves (module docstring: one level at a time)."""
    need = np.asarray(need, dtype=int)
    total = 0.0
    top = int(need.max()) if len(need) else 0
    for k in range(1, top + 1):
        on = need >= k
        steps = np.flatnonzero(on)
        total += len(steps)
        starts = steps[np.r_[True, np.diff(steps) > 1]]
        ends = steps[np.r_[np.diff(steps) > 1, True]]
        gaps = starts[1:] - ends[:-1] - 1
        total += np.minimum(gaps, cold_steps).sum() + min(int(starts[0]), cold_steps)
    return float(total)


def inference_oracle(inp: ReplayInput, cold_start_s: int = 90) -> OracleResult:
    """Cheapest replica schedule meeting every known step of ``inp.demand``
    (replicas) at the data's resolution, replicas paid from their start
    including ``cold_start_s`` (module docstring), at the on-demand price."""
    demand = np.asarray(inp.demand, dtype=float)
    need = np.where(np.isfinite(demand), np.ceil(np.maximum(demand, 0.0) - EPS), 0.0)
    cold_steps = int(np.ceil(cold_start_s / inp.step_s - EPS)) if cold_start_s > 0 else 0
    steps = level_steps(need, cold_steps)
    hours = steps * inp.step_s / 3600.0
    return OracleResult(cost_usd=float(hours * inp.price.on_demand * inp.gpus_per_unit),
                        layers={"replicas": hours}, method="closed form (levels)")


def regret(cost_usd: float, oracle_cost_usd: float) -> float:
    """``cost_usd / oracle_cost_usd`` (a ratio, >= 1 for a policy that meets all
    demand); NaN when the limit is 0 (nothing to buy)."""
    return float(cost_usd / oracle_cost_usd) if oracle_cost_usd > 0 else float("nan")
