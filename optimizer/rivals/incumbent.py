"""The incumbent of a training pool: a calibrated rule that the search must beat by more than the days' noise.

A tuning window is one week. Ranked on it, thousands of scanned policies are mostly told apart by what that week
happened to bring: a policy picked on the tuning week can cost more on the evaluation week than one fixed rule with no
tuned parameter, and which seed drew the forecasts can move the pick (docs/method.md, "Measured on the sample: the
incumbent rule"). So a training pool starts from a rule whose every level is set by the price book and the forecast's
own realised errors, in GPUs, and the searched policy replaces it only with evidence:

* **The rule** (:data:`INCUMBENT_RULE`): no weekly reservation; the day's level on spot is the
  calibrated daily level at the spot critical ratio (``daily_rule="calibrated"``,
  :mod:`optimizer.training.calibrated_day`); the hourly on-demand top-up is the adaptive calibrated level
  ``a95`` (:mod:`optimizer.training.adaptive`), whose error quantile moves hour by hour so that the rule's
  capacity covers the coverage target (0.95) of the intervals. There is no headroom, and nothing
  is chosen from the tuning week.
* **Under a book that caps spot** (:func:`optimizer.training.committed.basis` is ``spot_cap``) the rule also reserves,
  per week, the GPUs the cap refuses at the weekly forecast's median level (:data:`CAPPED_RESERVATION`:
  ``reservation_basis="spot_cap"``, ratio 1, ``quantile`` p50). Without it the rule buys every refused GPU on demand, at
  1.0 x, where a reservation costs 0.60 x. Ratio 1 is the newsvendor level of :mod:`optimizer.training.committed` for a
  demand flat at the weekly level; the search's :data:`optimizer.training.committed.CAP_LEVELS` try the others. A book
  where a reservation is cheaper than spot (basis ``forecast``) leaves the rule as above: there the newsvendor level
  depends on how far below spot the reservation is, which no fixed ratio holds, and the search's reservation levels must
  beat the rule.
* **The challenge, day by day.** Each day of the tuning week is one demand scenario, charged its own
  cost and its share of the week's coverage penalty at the plain coverage target, on the week's
  coverage plus one standard error of its days and shared by the days' misses
  (:func:`optimizer.search.objective.daily_objectives`). The searched policy is recommended instead when its
  daily objectives total less than the rule's by more than the paired t-test's margin of the two
  (:func:`optimizer.rivals.judge.paired_margin`, Student's t with 6 degrees of freedom for 7 days). The
  rivals (baseline, peers) are then judged against the policy kept by the same test
  (:func:`optimizer.rivals.judge.days_totals`). On the window objective one day of misses could decide
  alone, so which seed drew the forecasts decided which pools flipped, and the search's stricter tuning
  target (``lcb``) charged a rule that aims at the plain target on most weeks. Judged day by day at the
  plain target, that day is one scenario in seven, and the rule, which adapts after its misses
  (:mod:`optimizer.training.adaptive`), is kept until it loses steadily.

Setting ``plan.training_incumbent`` (``calibrated``, the default, or ``none``: the searched
policy as before). The rule is also left out when the training bounds do not allow the
calibrated daily rule or the ``a95`` top-up (a user who narrowed the search gets the search), under
another ``plan.selection_score`` than ``cost`` (the noise margin is in USD), and for a replay input
built without the calibrated lookup (by hand; :func:`optimizer.engine.inputs.replay_input` always builds it).
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.book.prices import GpuPrice
from optimizer.plan.policy import Metrics, TrainingParams
from optimizer.rivals.judge import days_totals, rival_wins
from optimizer.training.committed import basis

INCUMBENT_RULE = {"reservation_ratio": 0.0, "reservation_basis": "forecast", "quantile": "p50",
                  "daily_rule": "calibrated", "daily_cap": "none", "headroom": 1.0, "spot_fraction": 1.0,
                  "topup_quantile": "a95", "topup_headroom": 1.0}
INCUMBENTS = ("calibrated", "none")
#: the rule's weekly reservation under a book that caps spot: the GPUs the cap refuses at the weekly median level
CAPPED_RESERVATION = {"reservation_ratio": 1.0, "reservation_basis": "spot_cap", "quantile": "p50"}


@dataclass
class Challenge:
    """What :func:`challenge` decided: ``params``/``objective``/``metrics`` of the policy kept (its replay on the
    tuning window), whether the incumbent was kept, the incumbent's objective, the margin asked of the search, a
    note, and the searched policy's objective (objectives: USD, daily objectives totalled over the tuning window)."""

    params: TrainingParams
    objective: float
    incumbent_kept: bool
    incumbent_objective: float
    margin: float
    note: str
    searched_objective: float
    metrics: Metrics


def incumbent(bounds: dict, price: GpuPrice | None = None, interruption_rate: float = 0.01,
              recovery_s: int = 1800) -> TrainingParams | None:
    """The rule (:data:`INCUMBENT_RULE`; with :data:`CAPPED_RESERVATION` when ``price``, the GPU model's price
    book entry, caps spot: module docstring, its ratio held within ``bounds``' ``reservation_ratio``), or None
    when ``bounds`` (``plan.training_bounds`` as set) exclude the calibrated daily rule or the ``a95`` top-up.
    ``interruption_rate`` (per spot GPU-hour) and ``recovery_s`` (seconds lost each) price spot, as the search's
    committed layer does (:func:`optimizer.training.committed.basis`)."""
    if ("calibrated" not in bounds.get("daily_rule", ["calibrated"])
            or "a95" not in bounds.get("topup_quantile", ["a95"])):
        return None
    rule = dict(INCUMBENT_RULE)
    if price is not None and basis(price, interruption_rate, recovery_s) == "spot_cap":
        lo, hi = bounds.get("reservation_ratio") or (0.0, float("inf"))
        rule.update(CAPPED_RESERVATION, reservation_ratio=min(max(CAPPED_RESERVATION["reservation_ratio"], lo), hi))
    return TrainingParams(**rule)


def challenge(searched: TrainingParams, searched_metrics: Metrics, rule: TrainingParams, evaluate, days) -> Challenge:
    """Keep the incumbent ``rule`` (module docstring) unless the searched policy's daily objectives on the
    tuning window total less than the rule's by more than :func:`optimizer.rivals.judge.paired_margin` of the two.
    ``evaluate(params) -> Metrics`` replays on the tuning window; ``days(metrics)`` gives the daily
    objectives (USD per day, :func:`optimizer.search.objective.daily_objectives`)."""
    m = evaluate(rule)
    inc_obj, totals, _, margin = days_totals(m, {"searched": searched_metrics}, days)
    searched_objective = totals["searched"]
    if rival_wins(inc_obj, searched_objective, margin):
        note = (f"policy: the searched policy beat the calibrated rule (optimizer.rivals.incumbent) on the tuning "
                f"window by more than the days' noise (objective {searched_objective:,.2f} vs {inc_obj:,.2f} USD "
                f"day by day, margin {margin:,.2f}), so it replaces it")
        return Challenge(searched, searched_objective, False, inc_obj, margin, note, searched_objective,
                         searched_metrics)
    reserve = (", the GPUs the spot cap refuses at the weekly median level reserved"
               if rule.reservation_basis == "spot_cap" and rule.reservation_ratio > 0 else "")
    note = ("policy: the calibrated rule is recommended (optimizer.rivals.incumbent: the day on spot at the calibrated "
            f"level, the adaptive a95 top-up, no headroom{reserve}); the searched policy did not beat it on the "
            "tuning window by more than the days' noise (tuning.day_by_day in report.json)")
    return Challenge(rule, inc_obj, True, inc_obj, margin, note, searched_objective, m)


def incumbent_for(kind: str, settings, usd_objective: bool, has_lookup: bool,
                  price: GpuPrice | None = None) -> tuple[TrainingParams | None, str | None]:
    """The rule for one series' tuning, and a note when ``settings.training_incumbent`` asks for it but it is
    left out (module docstring): ``(rule, None)``, ``(None, note)``, or ``(None, None)`` for an inference
    service, ``training_incumbent: none`` or a hand-built input without the calibrated lookup
    (``has_lookup`` False: a library caller's own input, where the search alone was asked for).
    ``settings``: :class:`optimizer.search.settings.SearchSettings`; ``usd_objective``: the selection
    score is ``cost``; ``price``: the pool's price book entry (:func:`incumbent`), None for the default rule."""
    if kind != "training" or settings.training_incumbent != "calibrated" or not has_lookup:
        return None, None
    if not usd_objective:
        return None, ("tuning: the calibrated rule (optimizer.rivals.incumbent) was left out: its noise test is in "
                      f"USD and plan.selection_score is {settings.selection_score}; the searched policy stands alone")
    rule = incumbent(settings.training_bounds.as_dict(), price, settings.interruption_rate, settings.recovery_s)
    if rule is None:
        return None, ("tuning: the calibrated rule (optimizer.rivals.incumbent) was left out: plan.training_bounds "
                      "exclude the calibrated daily rule or the a95 top-up; the searched policy stands alone")
    return rule, None


def kept_name(tuning: dict) -> str:
    """What the tuning kept before the rivals, for the notes: ``calibrated rule`` when ``tuning["incumbent_kept"]``,
    else ``searched policy``."""
    return "calibrated rule" if tuning.get("incumbent_kept") else "searched policy"


def recommended_name(policy: str, tuning: dict) -> str:
    """The recommendation's name for tables: ``policy`` (``SearchOutcome.recommended_policy``: ``searched``, the
    baseline or a peer), with ``searched`` read as ``rule`` when the tuning kept the calibrated rule."""
    return "rule" if policy == "searched" and tuning.get("incumbent_kept") else policy


__all__ = ["CAPPED_RESERVATION", "INCUMBENTS", "incumbent_for", "kept_name", "recommended_name", "INCUMBENT_RULE",
           "Challenge", "challenge", "incumbent"]
