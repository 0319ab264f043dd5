"""Levels taken from a series' recent history that the exported manifests quote.

* :func:`last_nonzero_peak`: the peak of the last day with any demand, the
  Volcano ``capability`` of a pool whose forecast is all zero when its quota is
  unknown (a hard cap of 0 would block the pool's next job).
* :func:`baseline_levels`: what the rules of thumb
  (:mod:`optimizer.rivals.baseline`) would set from the day before the plan, so that
  each tuned number in a manifest can be shown next to the baseline's:
  training capacity ``ceil(1.2 x peak)`` with ``ceil(0.3 x capacity)``
  reserved; inference floor ``ceil(1.5 x peak)`` replicas, scaling at 70 % / 30 %.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from optimizer.rivals import baseline as base


def last_nonzero_peak(h: pd.DataFrame) -> float | None:
    """Peak ``value`` of the last UTC day of ``h`` (columns ``timestamp``, ``value``) whose
    maximum is above 0; None when the history never had demand."""
    v = h.dropna(subset=["value"])
    v = v[v["value"] > 0]
    if v.empty:
        return None
    day = v["timestamp"].max().floor("1D")
    return float(v.loc[v["timestamp"] >= day, "value"].max())


def baseline_levels(kind: str, h: pd.DataFrame) -> dict:
    """The baseline's settings from the last 24 h of ``h`` (GPUs for training, replicas
    for inference): ``{"capacity_gpus", "reserved_gpus"}`` or ``{"floor_replicas",
    "scale_up_percent_util", "scale_down_percent_util"}``."""
    v = h.dropna(subset=["value"])
    peak = 0.0
    if not v.empty:
        peak = float(v.loc[v["timestamp"] > v["timestamp"].max() - pd.Timedelta("1D"), "value"].max())
    peak = peak if np.isfinite(peak) else 0.0
    if kind == "training":
        cap = math.ceil(base.TRAINING_FACTOR * peak - 1e-9)
        return {"capacity_gpus": cap, "reserved_gpus": math.ceil(base.RESERVED_SHARE * cap - 1e-9)}
    return {"floor_replicas": max(math.ceil(base.INFERENCE_FACTOR * peak - 1e-9), 1),
            "scale_up_percent_util": round(100 * base.SCALE_UP_AT), "scale_down_percent_util":
            round(100 * base.SCALE_DOWN_AT)}


__all__ = ["last_nonzero_peak", "baseline_levels"]
