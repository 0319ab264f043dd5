"""The search objective: what a replayed policy scores, in USD or as a ratio.

Objective (minimised), in USD::

    objective = cost_usd + penalty * 100 * max(0, coverage_target - coverage) * reference_cost

``reference_cost`` is what serving the window's mean demand exactly, on
demand, would cost; ``penalty`` (default 0.5) is the share of it charged per
percentage point of coverage below the target (default 0.95). With these
defaults missing the target by one point costs half a window of ideal
capacity, so the search treats the target as a near-hard constraint and
minimises cost among policies that meet it. The pipeline tunes against
``coverage_target + coverage_margin`` (0.95 + 0.01): the margin costs some
median regret but keeps a small change of the forecasts from moving a pool's
layers and cost far (``tests/optimizer/search/test_stability.py``; the figures:
docs/method.md, "Measured on the sample: the search objective").

What counts as coverage (``coverage_by``, config ``plan.coverage_objective``):

* ``lcb`` (default): the window's coverage less one standard error of its daily
  coverages (``sd / sqrt(days)``), a lower confidence bound, so the safety
  margin grows with the tuning window's own day-to-day variability instead of
  a fixed number of points (chosen on the embedded sample against a fixed
  margin; docs/method.md, "Measured on the sample: the search objective");
* ``window``: the window's coverage;
* ``daily``: the mean over the tuning window's days of
  ``max(0, coverage_target - coverage of the day)``: never less than the
  window's shortfall, and larger when the misses bunch on a few days.

What counts as cost (config ``plan.selection_score``; training pools):

* ``cost`` (default): the tuning window's cost plus the coverage penalty above;
* ``daily_regret_q75`` (:func:`daily_regret_score`): each day of the tuning
  window is treated as a separate demand scenario, and a policy is scored by
  the upper quartile over those days of ``day cost / the day's own
  perfect-foresight limit`` (:func:`optimizer.rivals.perfect_foresight.daily_training_limits`),
  plus the same coverage penalty expressed in units of the window's limit.
  The window's total cost is dominated by its busiest days, so a policy tuned
  on it fits the tuning week's level; a ratio to each day's limit is
  scale-free, and an upper quantile over scenarios is the usual robust
  (distributionally-averse) choice of sample-average approximation (e.g.
  Ben-Tal, El Ghaoui and Nemirovski, *Robust Optimization*, 2009; a quantile
  instead of the worst day, so one odd day cannot decide). It raises the
  median regret, so it is not the default (docs/method.md, "Measured on the
  sample: the search objective").

"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from optimizer.plan.policy import Metrics

if TYPE_CHECKING:
    from optimizer.engine.replay_core import ReplayInput


def days_standard_error(m: Metrics) -> float:
    """The standard error of the window's coverage from its days: the sample sd of ``m.daily_coverage``
    over ``sqrt(days)`` (a ratio), 0 with fewer than two days."""
    v = m.daily_coverage
    return float(np.std(v, ddof=1)) / math.sqrt(len(v)) if v and len(v) > 1 else 0.0


def coverage_shortfall(m: Metrics, coverage_target: float, by: str = "window") -> float:
    """Coverage below the target (a ratio): ``max(0, target - coverage)`` over
    the window; with ``by="daily"`` the mean over the window's days of
    ``max(0, target - coverage of the day)``; with ``by="lcb"`` ``max(0, target -
    (coverage - sd of the daily coverages / sqrt(days)))``, the window's coverage
    less one standard error of its day-to-day spread (module docstring). Both
    fall back to the window's shortfall when ``m`` carries no daily coverage.
    Raises ValueError for another ``by``."""
    if by not in COVERAGE_OBJECTIVES:
        raise ValueError(f"unknown coverage objective {by!r}; use one of {', '.join(COVERAGE_OBJECTIVES)}")
    if by == "daily" and m.daily_coverage:
        return float(np.mean([max(0.0, coverage_target - c) for c in m.daily_coverage]))
    cov = 0.0 if not math.isfinite(m.coverage) else m.coverage
    if by == "lcb":
        cov -= days_standard_error(m)
    return max(0.0, coverage_target - cov)


COVERAGE_OBJECTIVES = ("window", "daily", "lcb")


def objective_value(m: Metrics, coverage_target: float, reference_cost: float, penalty: float,
                    by: str = "window") -> float:
    """Cost plus the coverage penalty, in USD (module docstring)."""
    return float(m.cost_usd + penalty * 100.0 * coverage_shortfall(m, coverage_target, by) * reference_cost)


def daily_objectives(m: Metrics, coverage_target: float, reference_cost: float, penalty: float) -> np.ndarray | None:
    """Per day of the window, that day's cost plus its share of the window's coverage penalty (USD, float
    array of the window's days), for the day-by-day challenge of :mod:`optimizer.rivals.incumbent`:
    ``daily_cost_usd[k] + P x miss[k] / sum(miss)``, with ``miss[k] = 1 - daily_coverage[k]`` (equal
    shares when no day missed) and ``P = penalty x 100 x max(0, coverage_target - ucb) x
    reference_cost``, the objective's penalty (module docstring) on ``ucb = coverage + sd of the daily
    coverages / sqrt(days)``. They sum to ``cost_usd + P``.

    * The target stays a target on the week's intervals, as the objective states it: a week that meets
      it carries no penalty whatever its days, and a week below it charges the penalty to the days whose
      misses made it, so a paired comparison over the days (:func:`optimizer.rivals.judge.days_totals`) sees
      one day of misses as one scenario in seven.
    * ``ucb``, the week's coverage plus one standard error of its days: the hinge ``max(0, target -
      coverage)`` of an estimate is biased upwards near the target, so a policy whose coverage is the
      target would be charged on about half of its weeks by noise alone. The calibrated rule aims at the
      target exactly (:mod:`optimizer.training.adaptive`); with the plain estimate, a 1 % change of the forecasts
      flipped which policy was recommended. One standard error mirrors the search's ``lcb``, which errs
      the other way for the policy it picks. One day far below the rest raises the standard error about
      as much as it lowers the coverage, so on its own it is not charged: the paired test would not let
      it decide either.

    None when ``m`` carries no daily costs or coverages, or unequal counts of them."""
    c, v = m.daily_cost_usd, m.daily_coverage
    if c is None or v is None or len(c) != len(v) or not len(c):
        return None
    ucb = (0.0 if not math.isfinite(m.coverage) else m.coverage) + days_standard_error(m)
    pen = penalty * 100.0 * max(0.0, coverage_target - ucb) * reference_cost
    miss = np.maximum(0.0, 1.0 - np.asarray(v, float))
    w = miss / miss.sum() if miss.sum() > 0 else np.full(len(c), 1.0 / len(c))
    return np.asarray(c, float) + pen * w


SELECTION_SCORES = ("cost", "weekly", "daily_regret_q75")
DAILY_REGRET_QUANTILE = 0.75


def daily_regret_score(m: Metrics, day_limits_usd, coverage_target: float, reference_cost: float,
                       limit_cost: float, penalty: float, by: str = "window",
                       quantile: float = DAILY_REGRET_QUANTILE) -> float:
    """The ``daily_regret_q75`` selection score (module docstring), a ratio: the ``quantile``
    over the days with a positive limit of ``m.daily_cost_usd[d] / day_limits_usd[d]``, plus
    ``penalty x 100 x coverage shortfall x reference_cost / limit_cost`` (the objective's
    penalty in units of the window's limit ``limit_cost``, USD). Without a day with a positive
    limit (or without daily costs) it is ``objective_value / reference_cost``: cost and penalty in
    units of the reference cost. Lower is better; compare scores of one window only."""
    limits = np.asarray(day_limits_usd, float)
    costs = np.asarray(m.daily_cost_usd if m.daily_cost_usd is not None else [], float)
    if len(costs) != len(limits) or not (limits > 0).any():
        return objective_value(m, coverage_target, reference_cost, penalty, by) / max(reference_cost, 1e-12)
    ok = limits > 0
    pen = penalty * 100.0 * coverage_shortfall(m, coverage_target, by) * reference_cost / max(limit_cost, 1e-12)
    return float(np.quantile(costs[ok] / limits[ok], quantile) + pen)


def reference_cost(inp: ReplayInput) -> float:
    """The objective's reference cost (USD, :mod:`optimizer.search.policy_search`): serving the window's mean known
    demand on demand for every step of ``inp`` (at least 1e-6 units, so an idle window still
    penalises a coverage shortfall)."""
    d = inp.demand[np.isfinite(inp.demand)]
    mean_d = float(d.mean()) if len(d) else 0.0
    return max(mean_d, 1e-6) * len(inp.times) * inp.step_s / 3600 * inp.price.on_demand * inp.gpus_per_unit
