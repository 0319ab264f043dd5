"""The recommendation checked on its evaluation window against what a cloud sells and a cluster grants.

* **Spot**: a training plan that buys spot says so, with the share of its GPU-hours, why (the
  spot price with its interruption losses against reserved and on-demand) and what bounds it
  (:func:`optimizer.book.purchase.mix_note`).
* **Reserved**: a training plan that reserves GPUs says why: the spot cap whose refused GPUs a
  reservation buys for less than on demand, or a reservation cheaper than spot, with its minimum
  term (:func:`optimizer.training.committed.committed_note`).
* **Quota**: the pool's quota (``SeriesMeta.quota_gpus``; on the Helios traces the VC's
  ``total_gpu_num``) is what the exported Volcano Queue's ``capability`` allows
  (``export.capability_limit: quota``, :mod:`optimizer.exporters.volcano`). The plan is tuned
  and scored **uncapped**, against the uncapped perfect-foresight limit: the demand counts the
  jobs queued above the quota (Helios' ``pending_gpu_num``: in a VC, pending jobs wait for the
  VC's own GPUs), which is what a larger quota would serve, so those are the figures of the plan
  the team is asked to adopt. Tuning held to the quota would instead rank policies on a window
  whose demand above the quota no policy may serve, and pick on noise. When the plan asks more
  than the quota at some step, the recommendation is replayed once more held to it (as the
  exported Queue holds it, :func:`optimizer.book.purchase.within_quota`), and the report carries
  both: the note says "raise the quota to N", and :class:`QuotaCheck` the figures held to it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np
from pydantic import BaseModel, Field

from optimizer.book.purchase import mix_note, spot_terms
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics
from optimizer.search.settings import SearchSettings
from optimizer.training.committed import committed_note
from optimizer.training.newsvendor import effective_spot_price

#: what ``QuotaCheck.need_gpus`` is, in the words the summary and the Volcano export's warning use
NEED_BASIS = "the most GPUs the plan held at once on the evaluation window"


class QuotaCheck(BaseModel):
    """A recommendation that needs more than its pool's quota.

    ``quota_gpus``: the quota (GPUs); ``need_gpus``: the most GPUs the plan holds at once
    uncapped, the quota to ask for; ``capped``: its figures on the evaluation window held to the
    quota (what the exported Volcano Queue allows; demand above it queues and counts as unmet)."""

    quota_gpus: float
    need_gpus: int
    capped: Metrics = Field(description="the recommendation held to the quota, on the evaluation window")


def recommended_replay(pr, chosen: str, params) -> Callable[[ReplayInput], tuple[Metrics, dict]]:
    """The replay of the recommended policy on any window: ``pr`` an
    :class:`optimizer.search.tuning.PolicyReplay`, ``chosen`` ``searched``, ``baseline`` or a peer's name,
    ``params`` the searched policy."""
    if chosen == "searched":
        return lambda inp: pr.replay(params, inp)
    if chosen == "baseline":
        return pr.baseline
    return lambda inp: pr.peers(inp)[chosen]


def quota_check(evalw: ReplayInput, rec_series: dict, replay: Callable[[ReplayInput], tuple[Metrics, dict]]
                ) -> QuotaCheck | None:
    """:class:`QuotaCheck` when the recommendation (its uncapped replay's ``rec_series["asked"]``,
    GPUs per step) needs more than ``evalw.quota`` at some step; None otherwise, for a pool with no
    known quota, or an inference service. ``replay``: :func:`recommended_replay`."""
    asked = rec_series.get("asked")
    quota = evalw.quota
    if quota is None or quota <= 0 or asked is None or not len(asked):
        return None
    need = int(math.ceil(float(np.max(asked)) - 1e-9))
    if need <= quota:
        return None
    capped, _ = replay(dataclasses.replace(evalw, hold_to_quota=True))
    return QuotaCheck(quota_gpus=float(quota), need_gpus=need, capped=capped)


def quota_note(q: QuotaCheck, uncapped: Metrics) -> str:
    """The report's note for a plan above its quota: the quota to ask for and both sets of figures."""
    return (f"quota: the plan needs up to {q.need_gpus} GPUs, above the pool's quota of {q.quota_gpus:g}: raise the "
            f"quota to {q.need_gpus}. Its figures are the plan's uncapped ({uncapped.cost_usd:,.2f} USD, coverage "
            f"{uncapped.coverage:.3f}), what a quota of {q.need_gpus} buys; held to the quota, as the exported "
            f"Volcano Queue's capability holds it, it costs {q.capped.cost_usd:,.2f} USD at coverage "
            f"{q.capped.coverage:.3f}, and the demand above the quota queues")


def purchase_check(evalw: ReplayInput, rec: Metrics, rec_series: dict,
                   replay: Callable[[ReplayInput], tuple[Metrics, dict]], settings: SearchSettings,
                   params: dict | None = None) -> tuple[QuotaCheck | None, list[str]]:
    """``(quota check, notes)`` of the recommendation ``rec`` (its replay ``rec_series``; ``params``
    its policy when it is the searched one) on the evaluation window ``evalw`` (module docstring).
    The spot terms are the ``settings``' ``interruption_rate`` (per spot GPU-hour) and
    ``recovery_s``, unless the GPU model's price book entry sets its own."""
    terms = spot_terms(evalw.price, settings.interruption_rate, settings.recovery_s)
    notes = [mix_note(rec.mix, evalw.price, rec.spot_refused_gpu_hours or 0.0,
                      effective_spot_price(evalw.price, *terms), *terms),
             committed_note(rec.mix, evalw.price, params, *terms)]
    q = quota_check(evalw, rec_series, replay)
    if q is not None:
        notes.append(quota_note(q, rec))
    return q, [n for n in notes if n]
