"""How the tuning window ranks policies (config ``plan.selection_score``): the ranking function
the scan and the searches minimise, and what the ranking reports.

* ``cost`` (default): the cost objective (:func:`optimizer.search.objective.objective_value`), which
  inference services always use;
* ``weekly`` (training pools): the worst week's regret over the tuning window's complete weeks
  (:mod:`optimizer.search.multiweek`, with ``plan.evidence_weeks`` > 1);
* ``daily_regret_q75`` (training pools): the upper quartile of the days' regrets
  (:func:`optimizer.search.objective.daily_regret_score`).
"""

from __future__ import annotations

import numpy as np

from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics
from optimizer.rivals.perfect_foresight import daily_training_limits, training_oracle
from optimizer.search.multiweek import WeekEvidence, walk_forward_check, week_evidence, week_regrets
from optimizer.search.objective import SELECTION_SCORES, daily_regret_score, objective_value


class WeeklyScore:
    """``score(metrics)`` of the ``weekly`` selection (:func:`optimizer.search.multiweek.week_regrets`, worst
    week), which keeps every scored policy's week regrets for :meth:`report`. Without a week with
    demand it is the cost objective over the reference cost (``ref_cost``, USD)."""

    def __init__(self, ev: WeekEvidence, target: float, ref_cost: float, penalty: float, by: str):
        self.ev, self.target, self.ref_cost, self.penalty, self.by = ev, target, ref_cost, penalty, by
        self.seen: dict[tuple, np.ndarray] = {}

    def regrets(self, m: Metrics) -> np.ndarray:
        return week_regrets(m, self.ev, self.target, self.penalty, self.by)

    def __call__(self, m: Metrics) -> float:
        r = self.regrets(m)
        if np.isfinite(r).any():
            self.seen[tuple(np.round(r, 12))] = r
            return float(np.nanmax(r))
        return objective_value(m, self.target, self.ref_cost, self.penalty, self.by) / max(self.ref_cost, 1e-12)

    def regret_margin(self, usd: float) -> float:
        """A USD margin on the whole window (:func:`optimizer.rivals.judge.rival_margin`, the days' noise) in
        this score's units: over the smallest positive week limit, the most it can move one week's
        regret, so a rival must beat the searched policy by as much as under the cost objective."""
        lim = [v for v in self.ev.limit_usd if v > 0]
        return usd / min(lim) if lim and usd > 0 else 0.0

    def report(self, chosen: Metrics) -> dict:
        """``tuning["weeks"]``: the weeks' limits (USD) and the walk-forward check of the scored
        policies with ``chosen``'s week regrets and their spread
        (:func:`optimizer.search.multiweek.walk_forward_check`)."""
        r = self.regrets(chosen)
        seen = dict(self.seen)
        key = tuple(np.round(r, 12))
        seen.setdefault(key, r)
        return {"limit_usd": list(self.ev.limit_usd), **walk_forward_check(seen, key)}


def selection_score(kind: str, how: str, tune: ReplayInput, target: float, ref_cost: float, penalty: float,
                    by: str):
    """The tuning window's ranking function ``score(metrics)`` for ``how``
    (:data:`optimizer.search.objective.SELECTION_SCORES`), or None for the default cost objective
    (:func:`optimizer.search.objective.objective_value`). ``weekly`` (:class:`WeeklyScore`) and
    ``daily_regret_q75`` apply to training pools (their replays carry daily costs and their limit
    splits by day); inference services keep the cost objective, as does a training window
    with no complete week under ``weekly``. Raises ValueError for an unknown ``how``."""
    if how not in SELECTION_SCORES:
        raise ValueError(f"unknown selection score {how!r}; use one of {', '.join(SELECTION_SCORES)}")
    if how == "cost" or kind != "training":
        return None
    if how == "weekly":
        ev = week_evidence(tune)
        return WeeklyScore(ev, target, ref_cost, penalty, by) if len(ev) else None
    limits = daily_training_limits(tune)
    limit = training_oracle(tune).cost_usd
    return lambda m: daily_regret_score(m, limits, target, ref_cost, limit, penalty, by)
