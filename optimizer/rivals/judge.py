"""When a rival (the baseline or a peer) has beaten the searched policy on the tuning window.

"Never worse than the status quo" (:mod:`optimizer.search.tuning`): a rival
that beats the searched policy on the tuning window is recommended instead.
A tuning window is one week, seven days of demand; a rival that is cheaper by
what one day happened to bring has not shown that it is cheaper: on an idle
tuning week a peer cheaper by one on-demand GPU-hour, all of it on one day, would
otherwise be recommended for whatever week comes next (docs/method.md, "Measured
on the sample: rivals and intermittent windows").

**Rule (a paired comparison over the days).** Each day of the tuning window is
one demand scenario (as :func:`optimizer.search.policy_search.daily_regret_score` treats
them). With ``d_k`` = searched policy's cost on day ``k`` minus the rival's
(USD), ``n`` days and ``s`` their sample standard deviation, the rival wins
when its objective is lower than the searched policy's by more than
:data:`Z` standard errors of the window's total, ``Z x sqrt(n) x s``
(the paired t-statistic of the daily differences above ``Z``; e.g. Montgomery,
*Design and Analysis of Experiments*, 8th ed., 2013, section 2.5.1, the paired
comparison design). :data:`Z` = 1.645, the one-sided 95 % normal quantile. A
difference that comes from a single day has a t-statistic of exactly 1, so it
never decides; a rival that is cheaper day after day does.

Beside the calibrated rule (:mod:`optimizer.rivals.incumbent`) the differences are those of the policies'
daily objectives, each day's cost plus its share of the week's coverage penalty (:func:`days_totals`), so a rival
that covered one more day does not win on that day alone either, and the critical value is Student's
t with ``n - 1`` degrees of freedom (1.943 for 7 days), as the paired t-test has it for so few days
(Montgomery, section 2.5.1). The cost-only margin above keeps :data:`Z`: the benchmarks' figures were
made with it, and it applies where the rule is not used (``plan.training_incumbent: none``, narrowed bounds).

The tuning (:mod:`optimizer.search.tuning`) applies it to training pools under the
default ``cost`` objective only. :func:`rival_margin` is 0, leaving the plain
comparison (the rival wins when its objective is lower), when either policy
carries no daily costs or the window has fewer than two days. The tuning
records ``tuning["rival_margin"]``, the margin it asked for (USD; 0 where the
rule does not apply).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import t as student_t

from optimizer.plan.policy import Metrics

Z = 1.645  # one-sided 95 % standard normal quantile (module docstring)
ALPHA = 0.05  # the day-by-day test's one-sided level (Student's t, days_totals)
#: how the tuning's note on a rival that was cheaper by less than the margin ends: the exports keep the
#: searched policy (capplan.report.notes files such a note under information, not under which policy is carried)
SEARCHED_KEPT = "so the searched policy is kept"
#: the same ending when the tuning kept the calibrated rule of optimizer.rivals.incumbent instead of the searched policy
RULE_KEPT = "so the calibrated rule is kept"


def paired_margin(a, b, z: float | None = Z) -> float:
    """``z x sqrt(n) x sd`` of the paired differences ``a[k] - b[k]`` of two per-day figures (USD; module
    docstring), or 0 when the rule does not apply (either is None, unequal lengths, fewer than two days,
    a non-finite difference). ``z=None``: the one-sided 95 % quantile of Student's t with ``n - 1``
    degrees of freedom (1.943 for 7 days), the paired t-test's own critical value."""
    if a is None or b is None or len(a) != len(b) or len(a) < 2:
        return 0.0
    d = np.asarray(a, float) - np.asarray(b, float)
    if not np.all(np.isfinite(d)):
        return 0.0
    z = float(student_t.ppf(1.0 - ALPHA, len(d) - 1)) if z is None else z
    return float(z * math.sqrt(len(d)) * np.std(d, ddof=1))


def rival_margin(searched: Metrics, rival: Metrics, z: float = Z) -> float:
    """:func:`paired_margin` of the two policies' daily costs (USD; module docstring), or 0 when the
    rule does not apply (no daily costs on either side, unequal day counts, fewer than two days)."""
    return paired_margin(searched.daily_cost_usd, rival.daily_cost_usd, z)


def days_totals(kept: Metrics, rivals: dict[str, Metrics], days) -> tuple[float, dict[str, float], str, float]:
    """The rivals judged day by day (:mod:`optimizer.rivals.incumbent`): ``days(metrics)`` gives a policy's daily
    objectives (:func:`optimizer.search.objective.daily_objectives`, USD per day). Returns ``(the kept policy's
    total, rival name -> total, the rival of the lowest total, the margin that rival must beat)``: the
    paired t-test's margin of the two policies' daily objectives (:func:`paired_margin` with Student's t,
    module docstring). A policy without daily figures totals ``inf`` (it cannot win)."""
    def total(m):
        d = days(m)
        return float(np.sum(d)) if d is not None else math.inf
    totals = {name: total(m) for name, m in rivals.items()}
    best = min(totals, key=totals.get)
    return total(kept), totals, best, paired_margin(days(kept), days(rivals[best]), None)


def rival_wins(searched_objective: float, rival_objective: float, margin: float) -> bool:
    """True when the rival's objective is below the searched policy's by more than ``margin``
    (and by more than float noise, relative 1e-9)."""
    noise = 1e-9 * max(1.0, abs(searched_objective))
    return bool(rival_objective < searched_objective - max(margin, 0.0) - noise)


__all__ = ["RULE_KEPT", "SEARCHED_KEPT", "Z", "days_totals", "paired_margin", "rival_margin", "rival_wins"]
