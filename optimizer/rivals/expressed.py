"""The exported policy that expresses a peer rule, so that what is exported is what is recommended.

A peer (:mod:`optimizer.rivals.peers`) is replayed as a rule that sets the replica count directly. A
cluster cannot run that rule as such: it runs an autoscaler (KEDA / the HPA, with its tolerance,
stabilisation windows and rate policies, :class:`optimizer.engine.hpa_controller.HPA`) on the metrics the
exporters write (:mod:`optimizer.exporters`). So when a peer wins the comparison with the searched
policy, it is judged, recommended and exported as the inference policy
(:class:`optimizer.plan.policy.InferenceParams`) that expresses it, and the recommended figures are that
policy's replay, the same replay a cluster running the exported objects gets:

* **naive conformal** (last value plus the 0.95 quantile of its rise over the lead time, trailing
  7 days) -> the ``lookahead`` family (:mod:`optimizer.inference.lookahead`) with a one-step level (the last
  observed value), the same 0.95 quantile (:data:`optimizer.rivals.peers.CONFORMAL_LEVEL`) of the rise
  over the steps the decision still covers, the utilisation trigger at 100 %, no stabilisation
  and unlimited rates (``scale_up_percent`` 1000, ``scale_down_percent`` 100). In a cluster:
  the KEDA ``lookahead`` trigger (:func:`optimizer.exporters.keda.lookahead_trigger`);
* **reactive** (``ceil(1.05 x`` the last hour's maximum``)``) -> the ``hpa`` family at a target
  utilisation of ``1 / 1.05`` (:data:`REACTIVE_TARGET`, rounded to the 4 significant digits
  ``policy.yaml`` writes, so the exported value is the replayed one) with a one-hour scale-down
  stabilisation window (the HPA holds the highest proposal of the last hour) and immediate
  scale-up.

* **empirical** (training pools: the daily spot level from the last 7 days' hourly maxima, the
  naive-conformal hourly top-up) -> the training policy :data:`optimizer.rivals.peers.EMPIRICAL_PARAMS`
  (``daily_rule="empirical"``, ``topup_quantile="n95"``, :mod:`optimizer.training.empirical`), whose replay
  is the peer's: the dispatcher policy and the Volcano queue carry its levels.

The baseline (a 70 % / 30 % threshold rule over a floor of 1.5 x the last day's peak) and the
other training peers (hourly on-demand rules) have no expression in the exported objects:
:func:`expressed_params` returns None, and the searched policy's parameters stay in the exports
(the tuning's note says so).
"""

from __future__ import annotations

from optimizer.rivals.peers import CONFORMAL_LEVEL, EMPIRICAL_PARAMS, REACTIVE_FACTOR

REACTIVE_TARGET = float(f"{1.0 / REACTIVE_FACTOR:.4g}")  # 0.9524: what policy.yaml shows (4 significant digits)

_COMMON = {"min_replicas": 1, "scale_up_window_s": 0, "scale_up_percent": 1000, "scale_down_percent": 100,
           "prescale_quantile": "none", "prescale_lead_s": 0}
_EXPRESSIONS = {
    "naive_conformal": {"family": "lookahead", "target_utilization": 1.0, "level_window_s": 0,
                        "headroom_quantile": CONFORMAL_LEVEL, "scale_down_window_s": 0},
    "reactive": {"family": "hpa", "target_utilization": REACTIVE_TARGET, "scale_down_window_s": 3600},
}
_TRAINING_EXPRESSIONS = {"empirical": EMPIRICAL_PARAMS}


def expressible(name: str, kind: str) -> bool:
    """Whether the rival ``name`` (``baseline`` or a peer of :data:`optimizer.rivals.peers.PEERS`) of a series of
    ``kind`` (``training`` / ``inference``) has an exported expression (module docstring)."""
    return name in (_EXPRESSIONS if kind == "inference" else _TRAINING_EXPRESSIONS)


def expressed_params(name: str, kind: str, searched: dict) -> dict | None:
    """The :class:`optimizer.plan.policy.InferenceParams` fields that express the rival ``name`` (module
    docstring), keeping ``searched``'s fields the rule does not set (``max_replicas``, ``period_s``,
    ``data_step_s``, ``lookahead_lead_s``, ``lookahead_cover_s``: the service's bounds and timeline;
    a training pool's ``quantile``, unused by the empirical rule); None when it has no expression
    (:func:`expressible`)."""
    if not expressible(name, kind):
        return None
    if kind == "training":
        return {**searched, **_TRAINING_EXPRESSIONS[name]}
    return {**searched, **_COMMON, **_EXPRESSIONS[name]}


__all__ = ["expressed_params", "expressible", "REACTIVE_TARGET"]
