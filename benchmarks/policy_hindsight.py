"""Capacity policies chosen in hindsight: a diagnostic bound for selection rules, never a recommendation.

For one series and one window (the evaluation window of :mod:`optimizer.search.tuning`), the cheapest
policy of a fixed family that covers at least ``coverage`` (a ratio, default 0.95) of the window's
steps, **chosen on that window itself**. It is not causal: no selection rule that sees only the
tuning window can beat it with the same family, so ``recommended regret - hindsight regret`` is
the selection gap, and a hindsight regret above a target says that no choice within the family
reaches the target there. The analogue for forecasts is
:mod:`benchmarks.forecast_hindsight`.

Families (:func:`hindsight_points`):

* training pools: the scan of :func:`optimizer.search.policy_search.grid_scan`
  (:data:`optimizer.search.policy_search.TRAINING_GRID`), plus the calibrated rule of :mod:`optimizer.rivals.incumbent`
  (its ``a95`` top-up is not on the scan's grid);
* inference services: the scan of :data:`optimizer.search.policy_search.INFERENCE_GRID` widened for the
  ``lookahead`` family (:data:`LOOKAHEAD_HINDSIGHT`: level windows from one step to an hour and
  error quantiles from 0.5 to 0.975 in 0.025 steps, with and without the utilisation trigger's
  extra replica), both families whatever the tuning window's length (the pipeline searches only
  the ``hpa`` family on a tuning window shorter than a day, :func:`optimizer.search.tuning.short_window`;
  the bound asks what the families could do, not what the search may try); plus the peer policies
  of :mod:`optimizer.rivals.peers`, each a family of one.

Every policy is replayed with :class:`optimizer.search.tuning.PolicyReplay` (the same replay, timeline,
prices and seeds as the recommendation), so the figures compare with the report's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics, TrainingParams
from optimizer.rivals.incumbent import INCUMBENT_RULE
from optimizer.search.space import INFERENCE_GRID, Space
from optimizer.search.tuning import PolicyReplay

#: The ``lookahead`` family's wider hindsight grid: level windows (seconds; 0 = one step, i.e. the last
#: observation, then up to an hour), error quantiles 0.5-0.975 (0.025 steps), the utilisation trigger at
#: 0.95 (the search's, ``optimizer.search.policy_search.LOOKAHEAD_TARGET``) or 1.0 (no replica above the observed
#: demand), and the scan's scale-down windows.
LOOKAHEAD_HINDSIGHT = {"level_window_s": [0, 120, 300, 600, 900, 1200, 1800, 2700, 3600],
                       "headroom_quantile": [round(0.5 + 0.025 * k, 3) for k in range(20)],
                       "target_utilization": [0.95, 1.0], "scale_down_window_s": [0, 300, 900]}


@dataclass
class HindsightBest:
    """The cheapest policy of ``family`` covering ``coverage`` of the window: its parameters
    (``params``: a dict, or the peer's name), ``metrics`` (:class:`optimizer.plan.policy.Metrics`) and
    ``regret`` (cost / the window's perfect-foresight limit; NaN when the limit is 0), out of
    ``n_points`` replayed policies (``params`` None and ``metrics`` None when none covers enough)."""

    family: str
    params: dict | str | None
    metrics: Metrics | None
    regret: float
    n_points: int


def hindsight_space(pr: PolicyReplay, tune: ReplayInput) -> Space:
    """The search space of ``pr``'s kind (:meth:`optimizer.search.tuning.PolicyReplay.space`, sized on ``tune``
    as the search does); for inference both families whatever the window's length, and a utilisation
    target up to 1.0 (module docstring)."""
    if pr.kind == "training":
        return pr.space(tune)
    lo = (pr.settings.inference_bounds.target_utilization or (0.4, 0.95))[0]
    return pr.space(tune, {"family": ["hpa", "lookahead"], "target_utilization": (min(lo, 0.4), 1.0)})


def hindsight_points(pr: PolicyReplay, tune: ReplayInput) -> list:
    """The policies (models of ``pr``'s kind) the bound chooses from, without the peers (module docstring)."""
    space = hindsight_space(pr, tune)
    pts = [space.to_params(x) for x in space.grid_points()]
    if pr.kind == "inference":
        look = Space(space.dims, space.build, space.fixed, anchors=space.anchors,
                     grid={**INFERENCE_GRID, **LOOKAHEAD_HINDSIGHT, "family": ["lookahead"],
                           "prescale_quantile": ["none"], "prescale_lead_s": [600]})
        pts = [p for p in pts if p.family == "hpa"] + [space.to_params(x) for x in look.grid_points()]
    else:
        pts.append(TrainingParams(**INCUMBENT_RULE))
    return pts


def hindsight_best(pr: PolicyReplay, tune: ReplayInput, window: ReplayInput, coverage: float = 0.95
                   ) -> dict[str, HindsightBest]:
    """Per family (``hpa``/``lookahead`` for inference, ``scan`` for training, and each peer), the
    cheapest policy covering at least ``coverage`` of ``window`` (module docstring). ``tune`` is the
    tuning window (it sizes the space only). Not causal: a diagnostic."""
    limit = pr.oracle(window).cost_usd
    fams: dict[str, list[tuple[object, Metrics]]] = {}
    for p in hindsight_points(pr, tune):
        fam = p.family if pr.kind == "inference" else "scan"
        fams.setdefault(fam, []).append((p.model_dump(), pr.replay(p, window)[0]))
    for name, (m, _) in pr.peers(window).items():
        fams[name] = [(name, m)]
    out = {}
    for fam, rows in fams.items():
        ok = [(p, m) for p, m in rows if math.isfinite(m.coverage) and m.coverage >= coverage - 1e-12]
        p, m = min(ok, key=lambda r: r[1].cost_usd) if ok else (None, None)
        reg = m.cost_usd / limit if m is not None and limit > 0 else float("nan")
        out[fam] = HindsightBest(fam, p, m, reg, len(rows))
    return out


__all__ = ["HindsightBest", "LOOKAHEAD_HINDSIGHT", "hindsight_best", "hindsight_points", "hindsight_space"]
