"""Intermittent tuning windows: only policies that react within the hour are eligible.

A training pool whose tuning window is mostly idle (demand 0 in most of its
steps) says little about the demand to come: every daily layer sized from its
forecasts buys almost nothing, the cheapest policy on the window is the one
with no hourly top-up at all, and the first burst after it goes unmet: below the
baseline's coverage, where requiring an hourly top-up covers the evaluation window
(docs/method.md, "Measured on the sample: rivals and intermittent windows"). A rival
policy must win by more
than the days' noise (:mod:`optimizer.rivals.judge`), so a peer cheaper on an idle tuning
week by one GPU-hour does not replace the searched policy.

**Classification.** A window is intermittent when its *average demand
interval* (ADI: known steps per step with demand above 0) is at least
:data:`ADI_CUTOFF` = 1.32, the cut-off between smooth and intermittent demand
of Syntetos, Boylan and Croston, "On the categorization of demand patterns",
*Journal of the Operational Research Society* 56 (2005), 495-503. A window
with no demand at all is intermittent (ADI infinite); one with no known step
is not classified (nothing to say).

**Consequence.** :func:`intermittent_space` returns the training search space
with the ``none`` choice of ``topup_quantile`` removed, so the scan, the
Gaussian-process refinement and the anchors only consider policies with an
hourly on-demand top-up (:class:`optimizer.plan.policy.TrainingParams`); the
baseline and the peers are still compared as rivals (:mod:`optimizer.search.tuning`).
The caller records the returned note in the series' notes.
"""

from __future__ import annotations

import math

import numpy as np

from optimizer.search.space import Space, training_space

ADI_CUTOFF = 1.32  # Syntetos, Boylan & Croston (2005): smooth / intermittent boundary


def average_demand_interval(demand) -> float:
    """ADI of a demand array (GPUs per step; NaN = unknown): known steps / steps with demand > 0.
    ``inf`` when no known step has demand, ``nan`` when no step is known."""
    d = np.asarray(demand, float)
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return float("nan")
    n = int(np.count_nonzero(d > 0))
    return float(len(d) / n) if n else math.inf


def is_intermittent(demand, cutoff: float = ADI_CUTOFF) -> bool:
    """True when :func:`average_demand_interval` is at least ``cutoff`` (False with no known step)."""
    adi = average_demand_interval(demand)
    return bool(adi == adi and adi >= cutoff)


def intermittent_space(kind: str, bounds: dict, demand) -> tuple[Space | None, str | None]:
    """For a training pool whose tuning-window ``demand`` is intermittent (:func:`is_intermittent`):
    the training space of ``bounds`` (:meth:`optimizer.search.settings.TrainingBounds.as_dict`) without
    the ``none`` top-up, and a note saying so. ``(None, None)`` otherwise: another kind, a smooth
    window, or bounds that allow no top-up besides ``none`` (they are the user's to keep)."""
    if kind != "training" or not is_intermittent(demand):
        return None, None
    choices = bounds.get("topup_quantile") or training_space().labels["topup_quantile"]
    keep = [c for c in choices if c != "none"]
    if not keep:
        return None, None
    adi = average_demand_interval(demand)
    note = (f"tuning: the tuning window's demand is intermittent (average demand interval "
            f"{'inf' if math.isinf(adi) else f'{adi:.2f}'} steps >= {ADI_CUTOFF}; Syntetos-Boylan-Croston), so "
            "only policies with an hourly on-demand top-up were searched (optimizer.training.intermittent)")
    return training_space({**bounds, "topup_quantile": keep}), note


__all__ = ["ADI_CUTOFF", "average_demand_interval", "is_intermittent", "intermittent_space"]
