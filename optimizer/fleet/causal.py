"""The causal fleet plan: sizes per model and purchase option decided from what was known before each decision,
then replayed on the demand that came (:mod:`optimizer.fleet.replay`).

Each layer is sized by the fleet's sizing programme (:func:`optimizer.fleet.limit.size`) on a forecast
scenario known at its decision time, with the lead times of the vocabulary (DESIGN.md: about a week for
reserved capacity, about a day for spot and on-demand procurement, under an hour for autoscaling):

* **reserved**, per week: at the week's start minus a week, the scenario is each series' ``quantile`` of its
  demand at the same hour of day over the ``lookback_days`` before then (a seasonal quantile rule), tiled over
  the week; the reserved GPUs of the programme's solution are kept;
* **spot**, per day: at the day's start minus a day, the same rule for the day, with the week's reserved GPUs
  held; the spot GPUs of the solution are kept;
* **on-demand**, per hour: the demand of the hour before (persistence), with reserved and spot held; the
  on-demand GPUs bought are kept.

Forecasts come either from this rule or from the caller (``scenarios``: per layer an (N, T) array of the
forecast quantile issued before each decision, e.g. the plan's combined rolling-origin forecasts); each
scenario only ever uses data before its decision time, so the evaluation window is unseen.
Every layer's scenarios for the whole window are sized in one programme: periods of a layer do not interact
once the layers above are held.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from optimizer.fleet.limit import LAYERS, Sizing, layer_cost, size
from optimizer.fleet.problem import FleetProblem
from optimizer.fleet.replay import assign, coverage

LEAD_HOURS = {"reserved": 168, "spot": 24, "on_demand": 1}
PERIOD = {"reserved": 168, "spot": 24, "on_demand": 1}


@dataclass(frozen=True)
class CausalRule:
    """The seasonal quantile rule: ``quantile`` (0-1) of a series' demand at the same hour of day over the
    ``lookback_days`` before the decision. Default 0.95, the plan's coverage target (``plan.coverage_target``),
    and a week of history, the evidence window of the single-pool search."""

    quantile: float = 0.95
    lookback_days: int = 7


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
    ``history[:, start:start + T]``), read only before each decision (:func:`rule_scenarios`), unless
    ``scenarios`` gives the forecasts per layer. Weeks and days are counted from ``start``."""
    t = problem.hours
    sc = scenarios or rule_scenarios(history, start, start + t, rule)
    held = np.zeros((len(problem.models), t))
    capacity: dict[str, np.ndarray] = {}
    for layer in LAYERS:
        buy = tuple(LAYERS[LAYERS.index(layer):])
        s: Sizing = size(problem.window(0, t, np.ceil(np.maximum(sc[layer], 0.0) - 1e-9)), base=held, layers=buy)
        capacity[layer] = s.capacity[layer]
        held = held + capacity[layer]
    placed, unmet = assign(problem, held)
    cost = float(sum(layer_cost(problem, k, capacity[k]).sum() for k in LAYERS))
    return FleetPlan(capacity=capacity, placed=placed, unmet=unmet, coverage=coverage(problem, unmet), cost_usd=cost)
