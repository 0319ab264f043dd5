"""Rolling-origin comparison of the predictive rule with today's cron pre-scaling.

Rules (each replayed on the data's own grid, decisions seeing only forecasts issued before them):

* ``cron``: the HPA plus KEDA cron windows computed once, from the weekly forecast issued before
  the window (:mod:`optimizer.inference.cron_replay`): what ``capplan export`` writes today;
* ``prescale``: the ``hpa`` family with forecast pre-scaling as :mod:`optimizer.engine.replay` scores it
  (the latest hourly forecast at ``prescale_lead_s``);
* ``predictive``: the ``predictive`` family (:mod:`optimizer.inference.predictive`): the larger of live demand
  and capplan serve's forecast at the cold start + metrics lag;
* ``lookahead``: the ``lookahead`` family (:mod:`optimizer.inference.lookahead`): a KEDA trigger on a metric
  predicted in PromQL from the service's own recent errors (the level plus a quantile of its rise
  over the lead), the rule that expresses the naive-conformal peer (:mod:`optimizer.rivals.expressed`).

Each rule gets the same small grid (:data:`TARGETS` x :data:`QUANTILES`, and :data:`LEADS` for the
two pre-scaling rules; :data:`TARGETS` x :data:`HEADROOM_QUANTILES` x :data:`LEVEL_WINDOWS` for
``lookahead``), the rest of the policy (bounds, behaviour) from ``base``. Its setting is
chosen on the **tuning** window (the cheapest whose coverage reaches ``coverage_target``, else the
highest coverage) and scored on the **evaluation** window, which selection never sees
(docs/method.md, "Evaluation protocol (no leakage)"). :func:`frontier` scores every setting of a rule on one window
and keeps the cost/coverage Pareto front: a hindsight measurement of what a rule *could* reach on
that window, for evidence only, never for choosing a setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from optimizer.engine.replay import replay_inference
from optimizer.engine.replay_core import ReplayInput
from optimizer.inference.cron_replay import replay_cron, windows_before
from optimizer.plan.policy import InferenceParams, Metrics

TARGETS = (0.6, 0.7, 0.8, 0.9, 0.95)
QUANTILES = ("p50", "p90", "p95", "p99")
LEADS = (300, 600, 900)
HEADROOM_QUANTILES = (0.5, 0.8, 0.9, 0.95, 0.99)
LEVEL_WINDOWS = (0, 300, 900)
RULES = ("cron", "prescale", "predictive", "lookahead")


@dataclass
class RuleResult:
    """A rule's chosen params and its figures (:class:`optimizer.plan.policy.Metrics`) on both windows."""

    rule: str
    params: dict
    tuning: Metrics
    evaluation: Metrics


def candidates(rule: str, base: InferenceParams) -> list[InferenceParams]:
    """The grid of ``rule`` (module docstring) around ``base``."""
    if rule == "lookahead":
        return [base.model_copy(update={"target_utilization": t, "headroom_quantile": q, "level_window_s": lv,
                                        "family": "lookahead", "prescale_quantile": "none"})
                for t in TARGETS for q in HEADROOM_QUANTILES for lv in LEVEL_WINDOWS]
    leads = LEADS if rule in ("cron", "prescale") else (base.prescale_lead_s,)
    fam = "predictive" if rule == "predictive" else "hpa"
    return [base.model_copy(update={"target_utilization": t, "prescale_quantile": q, "prescale_lead_s": lead,
                                    "family": fam})
            for t in TARGETS for q in QUANTILES for lead in leads]


def _score(rule: str, inp: ReplayInput, p: InferenceParams, combined: pd.DataFrame, cold_start_s: int,
           metrics_lag_s: int) -> Metrics:
    if rule == "cron":
        win = windows_before(combined, inp.times[0], p) if len(inp.times) else []
        return replay_cron(inp, p, win, cold_start_s, metrics_lag_s=metrics_lag_s)[0]
    return replay_inference(inp, p, cold_start_s, metrics_lag_s=metrics_lag_s)[0]


def choose(scored: list[tuple[InferenceParams, Metrics]], coverage_target: float) -> tuple[InferenceParams, Metrics]:
    """The cheapest setting whose coverage reaches ``coverage_target``; else the highest coverage
    (ties: cheaper)."""
    ok = [x for x in scored if x[1].coverage >= coverage_target - 1e-12]
    if ok:
        return min(ok, key=lambda x: x[1].cost_usd)
    return max(scored, key=lambda x: (x[1].coverage, -x[1].cost_usd))


def compare(tune: ReplayInput, evaluation: ReplayInput, combined: pd.DataFrame, base: InferenceParams,
            coverage_target: float = 0.95, cold_start_s: int = 90, metrics_lag_s: int = 60,
            rules: tuple[str, ...] = RULES, progress: Callable[[str], None] | None = None) -> dict[str, RuleResult]:
    """Per rule, the setting chosen on ``tune`` and its figures on ``evaluation`` (module docstring).
    ``combined``: the series' combined rolling-origin forecasts (forecast frame), for the cron windows."""
    out = {}
    for rule in rules:
        scored = [(p, _score(rule, tune, p, combined, cold_start_s, metrics_lag_s)) for p in candidates(rule, base)]
        p, m_tune = choose(scored, coverage_target)
        m_eval = _score(rule, evaluation, p, combined, cold_start_s, metrics_lag_s)
        out[rule] = RuleResult(rule, p.model_dump(), m_tune, m_eval)
        if progress:
            progress(f"{rule}: tuning cost {m_tune.cost_usd:.0f} coverage {m_tune.coverage:.3f}; evaluation cost "
                     f"{m_eval.cost_usd:.0f} coverage {m_eval.coverage:.3f}")
    return out


def frontier(rule: str, inp: ReplayInput, combined: pd.DataFrame, base: InferenceParams, cold_start_s: int = 90,
             metrics_lag_s: int = 60) -> list[tuple[InferenceParams, Metrics]]:
    """Every setting of ``rule``'s grid (:func:`candidates`) scored on ``inp``, reduced to its Pareto front
    (no other setting is at most as dear with at least the coverage and better in one), sorted by cost.
    A hindsight measurement (module docstring): never use it to choose a setting."""
    scored = sorted(((p, _score(rule, inp, p, combined, cold_start_s, metrics_lag_s)) for p in candidates(rule, base)),
                    key=lambda x: (x[1].cost_usd, -x[1].coverage))
    front, best = [], -1.0
    for p, m in scored:
        if m.coverage > best + 1e-12:
            front.append((p, m))
            best = m.coverage
    return front


__all__ = ["compare", "choose", "candidates", "frontier", "RuleResult", "RULES"]
