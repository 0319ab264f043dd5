"""The causal fleet plan: sizes per model and purchase option decided from what was known before each decision,
then replayed on the demand that came (:mod:`optimizer.fleet.replay`).

Each layer is sized by the fleet's sizing programme (:mod:`optimizer.fleet.limit`) with the lead times of the
vocabulary (DESIGN.md: about a week for reserved capacity, about a day for spot and on-demand procurement,
under an hour for autoscaling):

* **reserved**, per week, decided at the week's start minus a week, and **spot**, per day, decided at the
  day's start minus a day (with the week's reserved GPUs held): by default (``CausalRule.method`` ``saa``) a
  sample-average approximation: the ``lookback_days`` days before the decision are stacked as equally likely
  scenarios of the period's day, the layer's level is one whole-GPU variable per model shared by all of them,
  the layers below are free per scenario (on demand continuous), and the level minimising the mean cost is
  kept (Shapiro, Dentcheva and Ruszczynski, *Lectures on Stochastic Programming*, ch. 5). With
  ``method`` ``quantile``, one scenario instead: each series' ``quantile`` of its demand at the same hour of day
  over the ``lookback_days`` (a seasonal quantile path), or the caller's forecasts (``scenarios``: per layer
  an (N, T) array of a forecast quantile issued before each decision, such as the plan's combined
  rolling-origin forecasts);
* **on-demand**, per hour: the demand of the hour before (persistence), with reserved and spot held; the
  on-demand GPUs bought are kept.

Each decision reads only hours before its decision time, so the evaluation window is unseen.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from optimizer.fleet.limit import GAP, LAYERS, TIME_LIMIT_S, Sizing, _solve, layer_cost, size
from optimizer.fleet.problem import FleetProblem
from optimizer.fleet.replay import assign, coverage

LEAD_HOURS = {"reserved": 168, "spot": 24, "on_demand": 1}
PERIOD = {"reserved": 168, "spot": 24, "on_demand": 1}


@dataclass(frozen=True)
class CausalRule:
    """How reserved and spot are sized (module docstring): ``method`` ``saa`` (the past ``lookback_days`` days
    as scenarios) or ``quantile`` (the ``quantile`` (0-1) of a series' demand at the same hour of day over them;
    default 0.95, the plan's coverage target). A week of history by default, the evidence window of the
    single-pool search."""

    method: str = "saa"
    quantile: float = 0.95
    lookback_days: int = 7


def saa_level(problem: FleetProblem, history: np.ndarray, until: int, layer: str, base: np.ndarray | None,
              rule: CausalRule) -> np.ndarray:
    """(M,) whole GPUs of ``layer`` (``reserved`` or ``spot``) per model, by the sample-average approximation of
    the module docstring over the ``rule.lookback_days`` days before hour ``until`` of ``history`` (N, T_all;
    NaN = no need), on top of ``base`` (M,) GPUs held (spot: the reserved level). Zeros when no whole day is
    known before ``until``."""
    k = min(rule.lookback_days, max(until, 0) // 24)
    mm = len(problem.models)
    if k == 0:
        return np.zeros(mm)
    scen = np.nan_to_num(history[:, until - 24 * k:until], nan=0.0)
    length = 24 * k
    hours = np.arange(length)
    if layer == "reserved":
        periods, buy = {"reserved": np.zeros(length, int), "spot": hours // 24, "on_demand": hours}, LAYERS
    elif layer == "spot":
        periods, buy = {"spot": np.zeros(length, int), "on_demand": hours}, ("spot", "on_demand")
    else:
        raise ValueError(f"saa_level: layer {layer!r}: expected reserved or spot")
    held = np.zeros((mm, length)) if base is None else np.repeat(np.asarray(base, float)[:, None], length, axis=1)
    s, _ = _solve(problem.window(0, length, np.ceil(np.maximum(scen, 0.0) - 1e-9)), held, buy, 0, (layer,), GAP,
                  TIME_LIMIT_S, periods=periods, weight=1.0 / k)
    return s.capacity[layer][:, 0]


def seasonal_scenario(demand: np.ndarray, start: int, stop: int, known_until: int, rule: CausalRule) -> np.ndarray:
    """(N, stop - start) forecast of ``demand`` (N, T_all hourly, hour 0 at midnight of the series' calendar)
    for hours ``[start, stop)`` from hours before ``known_until`` only: for each hour of day, the ``rule``'s
    quantile over the last ``lookback_days`` days of history (NaN ignored; 0 where none known). Raises
    ValueError when ``known_until`` > ``start`` (a look-ahead)."""
    if known_until > start:
        raise ValueError(f"scenario for hour {start} may not read hour {known_until - 1} (look-ahead)")
    n = demand.shape[0]
    out = np.zeros((n, stop - start))
    lo = max(0, known_until - 24 * rule.lookback_days)
    past = demand[:, lo:known_until]
    hod_past = np.arange(lo, known_until) % 24
    for hod in range(24):
        cols = past[:, hod_past == hod]
        if cols.shape[1] == 0:
            continue
        with warnings.catch_warnings():  # an all-NaN hour (nothing known) gives NaN, read as 0 below
            warnings.simplefilter("ignore", RuntimeWarning)
            q = np.nanquantile(cols, rule.quantile, axis=1, method="higher")
        out[:, (np.arange(start, stop) % 24) == hod] = np.nan_to_num(q, nan=0.0)[:, None]
    return out


def rule_scenarios(demand: np.ndarray, start: int, stop: int, rule: CausalRule) -> dict[str, np.ndarray]:
    """Per layer the (N, stop - start) scenario of the module docstring, each period's from the data known at its
    decision time (period start minus the layer's lead)."""
    out = {}
    for layer in ("reserved", "spot"):
        sc = np.zeros((demand.shape[0], stop - start))
        per = PERIOD[layer]
        for p0 in range(start, stop, per):
            p1 = min(p0 + per, stop)
            sc[:, p0 - start:p1 - start] = seasonal_scenario(demand, p0, p1, max(0, p0 - LEAD_HOURS[layer]), rule)
        out[layer] = sc
    prev = np.zeros((demand.shape[0], stop - start))  # persistence: the hour before (nothing before hour 0)
    lo = max(start - 1, 0)
    prev[:, lo - (start - 1):] = demand[:, lo:stop - 1]
    out["on_demand"] = np.nan_to_num(prev, nan=0.0)
    return out


@dataclass
class FleetPlan:
    """A causal plan replayed: ``capacity`` per layer (M, T) GPUs held per model and hour; ``placed``
    (N, M, T) GPU-hours per series, model and hour; ``unmet`` (N, T) GPUs of the series' own model;
    ``coverage`` (N,) share of hours fully served; ``cost_usd`` USD of every layer bought."""

    capacity: dict[str, np.ndarray]
    placed: np.ndarray
    unmet: np.ndarray
    coverage: np.ndarray
    cost_usd: float

    def cost_by_layer(self, problem: FleetProblem) -> dict[str, np.ndarray]:
        """USD per layer and model (M,)."""
        return {k: layer_cost(problem, k, self.capacity[k]) for k in LAYERS}


def causal_plan(problem: FleetProblem, history: np.ndarray, start: int, rule: CausalRule = CausalRule(),
                scenarios: dict[str, np.ndarray] | None = None) -> FleetPlan:
    """Plan ``problem``'s window causally and replay it. ``history``: (N, T_all) hourly demand of the same
    series on the whole timeline (whole GPUs of each series' own model; the window is ``problem.demand`` =
    ``history[:, start:start + T]``), read only before each decision (module docstring), unless ``scenarios``
    gives the forecasts per layer. Weeks and days are counted from ``start``. Raises ValueError for an unknown
    ``rule.method``."""
    if rule.method not in ("saa", "quantile"):
        raise ValueError(f"causal rule method {rule.method!r}: expected saa or quantile")
    t = problem.hours
    mm = len(problem.models)
    sc = scenarios or rule_scenarios(history, start, start + t, rule)
    held = np.zeros((mm, t))
    capacity: dict[str, np.ndarray] = {}
    if scenarios is None and rule.method == "saa":
        for layer in ("reserved", "spot"):
            level = np.zeros((mm, t))
            per = PERIOD[layer]
            for p0 in range(0, t, per):
                base = held[:, p0] if layer == "spot" else None
                level[:, p0:p0 + per] = saa_level(problem, history, start + p0 - LEAD_HOURS[layer], layer, base,
                                                  rule)[:, None]
            capacity[layer] = level
            held = held + level
    else:
        for layer in ("reserved", "spot"):
            buy = tuple(LAYERS[LAYERS.index(layer):])
            s: Sizing = size(problem.window(0, t, np.ceil(np.maximum(sc[layer], 0.0) - 1e-9)), base=held,
                             layers=buy)
            capacity[layer] = s.capacity[layer]
            held = held + capacity[layer]
    s = size(problem.window(0, t, np.ceil(np.maximum(sc["on_demand"], 0.0) - 1e-9)), base=held,
             layers=("on_demand",))
    capacity["on_demand"] = s.capacity["on_demand"]
    held = held + capacity["on_demand"]
    placed, unmet = assign(problem, held)
    cost = float(sum(layer_cost(problem, k, capacity[k]).sum() for k in LAYERS))
    return FleetPlan(capacity=capacity, placed=placed, unmet=unmet, coverage=coverage(problem, unmet), cost_usd=cost)
