"""Multi-week selection: rank training policies on every complete week before the evaluation
window, and prefer those whose rank holds from week to week.

One tuning week cannot rank thousands of policies: the scan's 2,560 training policies differ
by a few percent, and which of them is cheapest on one week is partly what that week's demand
happened to bring. With ``plan.evidence_weeks`` = N (default 1) the tuning window holds the
last N complete weeks before the evaluation window that the history allows after the
forecasters' training span (:func:`evidence_start`); every policy is replayed over that
window once, and its days are grouped into weeks.

**Score (``plan.selection_score: weekly``).** Per week ``w`` of the tuning window,
a policy's week regret is::

    r_w = (cost_w + penalty x 100 x shortfall_w x reference_w) / limit_w

``cost_w``: the replay's cost on the week's days (USD); ``shortfall_w``: its coverage below
the tuning target on those days (:func:`optimizer.search.objective.coverage_shortfall` on the
week's daily coverages, ``plan.coverage_objective``); ``reference_w``: serving the week's mean
demand on demand (USD, :func:`optimizer.search.objective.reference_cost`); ``limit_w``: the week's own
perfect-foresight limit (:func:`optimizer.rivals.perfect_foresight.training_oracle` on the week alone, USD).
So each week is one demand scenario, scale-free, and the objective of the default ``cost``
selection divided by the limit on a one-week window. The policy's score is the **worst**
week's ``r_w``: the mean of the weeks plus half their range with two weeks, i.e. a policy
is only as good as it is in the week it fits least (minimax regret over scenarios, e.g.
Ben-Tal, El Ghaoui and Nemirovski, *Robust Optimization*, 2009; with two weeks of evidence
an upper quantile is the worst one). A policy that is the cheapest in one week and
middling in the other loses to one that is near the best in both: its rank held.

**Walk-forward check.** Tuning on week ``k`` and scoring on week ``k + 1`` is what a
single-week selection does; :func:`walk_forward_check` says, over the scanned policies,
how well the week-``k`` ranking predicted the week-``k + 1`` one (Spearman correlation) and
how far the policy that week ``k`` alone would have chosen fell in week ``k + 1`` (its
regret there over the best's), and the chosen policy's week-to-week regret spread
(:func:`spread`). These go to the report's ``tuning.weeks``.

With one week of evidence (a short history) the score ranks as the ``cost`` objective does.

**Why it is not the default.** The worst week tends to be the earlier one, whose forecasts were
made with a week less of training data, so the minimax buys for forecast errors the evaluation week
no longer has; and the walk-forward check shows the one-week ranking to be unstable between weeks.
So the evidence is reported; a rule that weighs each week by how like the evaluation week its
forecasts are is the open question (the figures: docs/method.md, "Measured on the sample: selection
on every week of evidence").
Inference services keep the cost objective on their tuning window (their replays carry no
daily costs to split by week).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from forecasting.backtest import Windows
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics
from optimizer.rivals.perfect_foresight import training_oracle
from optimizer.search.objective import coverage_shortfall

WEEK = pd.Timedelta("7D")
EVIDENCE_WEEKS = 1  #: default ``plan.evidence_weeks`` (module docstring, "Measured")
MIN_TRAIN = pd.Timedelta("7D")  #: the forecasters' training span (forecasting.backtest.split_windows' min_train_days)
DAY_S = 86400


def evidence_windows(w: Windows, weeks: int, min_train: pd.Timedelta = MIN_TRAIN) -> Windows:
    """``w`` (a ``days`` split of :func:`forecasting.backtest.split_windows`) with its tuning window
    widened to :func:`evidence_start`: the longer of the configured tuning window and up to
    ``weeks`` complete weeks before the evaluation window. Raises ValueError for ``weeks < 1``."""
    start = evidence_start(w.start, w.tune_start, w.eval_start, weeks, min_train)
    return w if start == w.tune_start else Windows(w.start, start, w.eval_start, w.end, w.rule)


def evidence_start(start: pd.Timestamp, tune_start: pd.Timestamp, eval_start: pd.Timestamp, weeks: int,
                   min_train: pd.Timedelta) -> pd.Timestamp:
    """The tuning window's first timestamp when it holds up to ``weeks`` complete weeks before
    ``eval_start`` (UTC): ``eval_start - k x 7 days`` for the largest ``k <= weeks`` that leaves
    ``min_train`` of history before it; ``tune_start`` (unchanged) when even ``k = 1`` does not fit
    or ``tune_start`` is already earlier. Raises ValueError for ``weeks < 1``."""
    if weeks < 1:
        raise ValueError(f"evidence_weeks must be at least 1, got {weeks}")
    for k in range(weeks, 0, -1):
        s = eval_start - k * WEEK
        if s - start >= min_train:
            return min(s, tune_start)
    return tune_start


def week_bounds(inp: ReplayInput) -> list[slice]:
    """The complete 7-day spans of ``inp``'s window as step slices, counted back from its end
    (its last step closes the last week); a leading part week is left out. Empty when the
    window is shorter than a week."""
    per_week = 7 * DAY_S // inp.step_s
    n = len(inp.times)
    k = n // per_week
    return [slice(n - (k - j) * per_week, n - (k - j - 1) * per_week) for j in range(k)]


@dataclass(frozen=True)
class WeekEvidence:
    """Per complete week of a tuning window: ``days`` (the window's day indices, as
    ``Metrics.daily_cost_usd`` counts them), ``limit_usd`` (the week's perfect-foresight limit)
    and ``reference_usd`` (serving its mean demand on demand, at least 1e-6 GPUs)."""

    days: list[range]
    limit_usd: list[float]
    reference_usd: list[float]

    def __len__(self) -> int:
        return len(self.days)


def week_evidence(inp: ReplayInput) -> WeekEvidence:
    """The :class:`WeekEvidence` of training window ``inp`` (:func:`week_bounds`)."""
    per_day = DAY_S // inp.step_s
    days, lim, ref = [], [], []
    for sl in week_bounds(inp):
        demand = np.asarray(inp.demand, float)[sl]
        wk = ReplayInput(times=inp.times[sl], demand=demand, step_s=inp.step_s, price=inp.price,
                         gpus_per_unit=inp.gpus_per_unit, spot_outage=inp.spot_outage, spot_redo=inp.spot_redo)
        days.append(range(sl.start // per_day, sl.stop // per_day))
        lim.append(float(training_oracle(wk).cost_usd))
        d = demand[np.isfinite(demand)]
        mean_d = max(float(d.mean()) if len(d) else 0.0, 1e-6)
        ref.append(mean_d * len(wk.times) * inp.step_s / 3600 * inp.price.on_demand * inp.gpus_per_unit)
    return WeekEvidence(days, lim, ref)


def week_regrets(m: Metrics, ev: WeekEvidence, coverage_target: float, penalty: float, by: str = "lcb") -> np.ndarray:
    """``r_w`` of each week of ``ev`` for replay ``m`` of the whole window (module docstring), a
    ratio; NaN for a week whose limit is 0 (no demand) or that ``m``'s daily figures do not reach."""
    out = np.full(len(ev), np.nan)
    cost, cov = m.daily_cost_usd or [], m.daily_coverage or []
    for w, days in enumerate(ev.days):
        if ev.limit_usd[w] <= 0 or days.stop > len(cost):
            continue
        c = float(np.sum([cost[d] for d in days]))
        dc = [cov[d] for d in days if d < len(cov)]
        wm = Metrics(cost_usd=c, coverage=float(np.mean(dc)) if dc else float("nan"), idle_ratio=0.0, unmet=0.0,
                     daily_coverage=dc or None)
        pen = penalty * 100.0 * coverage_shortfall(wm, coverage_target, by) * ev.reference_usd[w]
        out[w] = (c + pen) / ev.limit_usd[w]
    return out


def weekly_score(ev: WeekEvidence, coverage_target: float, penalty: float, by: str = "lcb", fallback=None):
    """``score(metrics)``: the worst week's regret (:func:`week_regrets`, module docstring), a
    ratio, lower is better. Without a week that has a positive limit it is ``fallback(metrics)``
    (e.g. the cost objective over the reference cost), or infinite coverage-free cost."""
    def score(m: Metrics) -> float:
        r = week_regrets(m, ev, coverage_target, penalty, by)
        r = r[np.isfinite(r)]
        if len(r):
            return float(r.max())
        return float(fallback(m)) if fallback is not None else float(m.cost_usd)
    return score


def spread(values) -> dict:
    """``{"weeks", "min", "max", "mean", "range"}`` of the finite ``values`` (null figures with none)."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], float)
    if not len(v):
        return {"weeks": 0, "min": None, "max": None, "mean": None, "range": None}
    return {"weeks": int(len(v)), "min": float(v.min()), "max": float(v.max()), "mean": float(v.mean()),
            "range": float(v.max() - v.min())}


def walk_forward_check(regrets: dict[tuple, np.ndarray], chosen: tuple | None) -> dict:
    """Over the scanned policies' week regrets ``regrets`` (key -> :func:`week_regrets`), for each
    pair of consecutive weeks ``(k, k + 1)``: ``spearman`` (the rank correlation of the policies'
    regrets in the two weeks), ``one_week_pick_next`` (week ``k + 1``'s regret of the policy week
    ``k`` alone ranks first, over the best week-``k + 1`` regret: 1.0 when its rank held), and
    for ``chosen`` its regret per week (``chosen_week_regret``) with their ``spread``."""
    keys = [k for k, r in regrets.items() if np.all(np.isfinite(r))]
    n = len(next(iter(regrets.values()))) if regrets else 0
    steps = []
    for k in range(n - 1):
        a = np.array([regrets[x][k] for x in keys])
        b = np.array([regrets[x][k + 1] for x in keys])
        if len(keys) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
            steps.append({"week": k + 2, "spearman": None, "one_week_pick_next": None})
            continue
        rho = float(spearmanr(a, b).statistic)
        steps.append({"week": k + 2, "spearman": rho, "one_week_pick_next": float(b[int(np.argmin(a))] / b.min())})
    mine = regrets.get(chosen) if chosen is not None else None
    vals = [float(x) for x in mine] if mine is not None else []
    return {"weeks": n, "walk_forward": steps, "chosen_week_regret": [v if math.isfinite(v) else None for v in vals],
            "spread": spread(vals)}
