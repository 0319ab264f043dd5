"""The rules of thumb of enterprise GPU planning guides, turned into replayable policies that know only the past.

* **Training reserve = request x 1.2.** "Request" is the peak demand (GPUs)
  observed over the 24 hours before each day; capacity for the day is
  ``ceil(1.2 * request)``.
* **30 % reserved, the rest on spot.** The reservation is fixed per week at
  ``ceil(0.3 * capacity)`` as computed at the week's first day; the rest of each
  day's capacity is spot (interruptions as in the replay).
* **Inference reserve = peak x 1.5.** "Peak" is the peak replicas needed over
  the 24 hours before each day; the service keeps at least
  ``ceil(1.5 * peak)`` replicas that day.
* **Scale up above 70 %, down below 30 %.** On top of that floor a threshold
  autoscaler adds replicas when utilisation exceeds 0.7 and removes them below
  0.3 (:func:`optimizer.engine.replay.replay_threshold`), with the same 90 s cold start.

Where less than a day of history precedes a decision, the available past is
used (stated by the pipeline).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.engine.replay import account_training, replay_threshold
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics

TRAINING_FACTOR = 1.2
INFERENCE_FACTOR = 1.5
RESERVED_SHARE = 0.3
SCALE_UP_AT = 0.7
SCALE_DOWN_AT = 0.3


def trailing_day_peak(inp: ReplayInput) -> np.ndarray:
    """Per step: the peak demand in the 24 h before the first step of its UTC day
    (only values before that step; NaN ignored; 0 when nothing is known)."""
    before = inp.history_before if inp.history_before is not None else np.array([])
    step = pd.Timedelta(seconds=inp.step_s)
    allv = np.concatenate([before, inp.demand])
    offset = len(before)
    n_day = int(pd.Timedelta("1D") / step)
    days = inp.times.floor("1D")
    out = np.zeros(len(inp.times))
    for d in days.unique():
        idx = np.flatnonzero(days == d)
        i0 = idx[0] + offset
        past = allv[max(0, i0 - n_day):i0]
        past = past[np.isfinite(past)]
        out[idx] = past.max() if len(past) else 0.0
    return out


def training_baseline(inp: ReplayInput, interruption_rate: float = 0.01, recovery_s: int = 1800,
                      queue_unmet: bool = False, seed: int = 0) -> tuple[Metrics, dict]:
    """Replay the training rules of thumb (see module docstring)."""
    cap = np.ceil(TRAINING_FACTOR * trailing_day_peak(inp) - 1e-9)
    weeks = ((inp.times - inp.times[0]) // pd.Timedelta("7D")).to_numpy()
    reserved = np.zeros_like(cap)
    for w in np.unique(weeks):
        m = weeks == w
        reserved[m] = np.ceil(RESERVED_SHARE * cap[m][0] - 1e-9)
    spot = np.maximum(cap - reserved, 0.0)
    od = np.zeros_like(cap)
    return account_training(inp, reserved, od, spot, interruption_rate, recovery_s, queue_unmet, seed)


def inference_baseline(inp: ReplayInput, cold_start_s: int = 90, metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """Replay the inference rules of thumb (see module docstring), on the
    replay's timeline (metrics ``metrics_lag_s`` old, new replicas after the cold start)."""
    floor = np.ceil(INFERENCE_FACTOR * trailing_day_peak(inp) - 1e-9)
    return replay_threshold(inp, floor, SCALE_UP_AT, SCALE_DOWN_AT, cold_start_s, metrics_lag_s=metrics_lag_s)
