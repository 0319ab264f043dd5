"""Peer policies: what a careful engineer would set up without capplan.

Each peer is replayed with the same replay, timing and price book as the
recommended policy and the seeds' baseline (:mod:`optimizer.replay`,
:mod:`optimizer.prices`), on the same window; a recommendation is only worth
making if it beats them. Registry: :data:`PEERS` (name -> :class:`Peer`).

* **reactive** — capacity = ``ceil(1.05 x the max demand of the last hour)``,
  all on demand. Training pools: decided per hour from the hour before it
  (paid as the hourly on-demand layer). Inference: decided per HPA sync (every
  data step) from the demand observable then (``metrics_lag_s`` old, new
  replicas serving after the cold start).
* **naive_conformal** — capacity = ``ceil(last observed value + q)``, where
  ``q`` is the empirical 0.95 quantile, over the trailing 7 days, of the change
  over the lead time, ``max(demand over the next lead) - demand now``, counting
  only changes fully observed before the decision. Lead time: one hour for
  training pools (decided per hour, on demand); for inference the time from
  the newest observable step to the first step a new replica can serve
  (``1 + ceil(lag / step) + ceil(cold start / step)`` steps).

Both fall back to the history before the window for their first decisions;
with no history at all, the first decisions see 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from optimizer.policy import Metrics
from optimizer.replay import ReplayInput, account_training, observed_demand, run_controller

REACTIVE_FACTOR = 1.05
CONFORMAL_LEVEL = 0.95
CONFORMAL_WINDOW = pd.Timedelta("7D")


def _known(inp: ReplayInput) -> tuple[np.ndarray, int]:
    """History before the window followed by the window's demand, and the window's offset in it."""
    before = inp.history_before if inp.history_before is not None else np.array([])
    return np.concatenate([np.asarray(before, float), np.asarray(inp.demand, float)]), len(before)


def trailing_max(values: np.ndarray, n: int) -> np.ndarray:
    """Max of ``values[j-n+1 .. j]`` per ``j`` (NaN ignored; NaN where all are NaN)."""
    return pd.Series(values).rolling(n, min_periods=1).max().to_numpy()


def conformal_offset(values: np.ndarray, lead: int, window: int, level: float = CONFORMAL_LEVEL) -> np.ndarray:
    """Per ``j``: the ``level`` quantile of ``max(values[s+1 .. s+lead]) - values[s]``
    over the changes fully observed by ``j`` (``s + lead <= j``) in the trailing
    ``window`` of them; 0 before the first one. NaN values are skipped."""
    s = pd.Series(values)
    ahead = s[::-1].rolling(lead, min_periods=1).max()[::-1].shift(-1)  # max over s+1 .. s+lead
    change = (ahead - s).shift(lead)  # indexed by the step at which it is fully observed
    q = change.rolling(window, min_periods=1).quantile(level)
    return q.fillna(0.0).to_numpy()


def _hour_start_index(inp: ReplayInput) -> np.ndarray:
    """Per step, the index of the first step of its hour (hours counted from the window start)."""
    h = np.asarray((inp.times - inp.times[0]) // pd.Timedelta("1h"), dtype=int)
    return np.searchsorted(h, h)


def _hourly_training(inp: ReplayInput, level_at: np.ndarray, replay_opts: dict) -> tuple[Metrics, dict]:
    """Buy ``level_at[j]`` GPUs on demand for each hour, ``j`` = the last step
    observed before the hour (history included)."""
    allv, off = _known(inp)
    j = off + _hour_start_index(inp) - 1
    want = np.where(j >= 0, level_at[np.clip(j, 0, None)], 0.0) if len(allv) else np.zeros(len(inp.times))
    hourly = np.ceil(np.nan_to_num(want, nan=0.0) - 1e-9).clip(min=0)
    zero = np.zeros(len(inp.times))
    return account_training(inp, zero, zero, zero, od_hourly=hourly, **replay_opts)


def reactive_training(inp: ReplayInput, **replay_opts) -> tuple[Metrics, dict]:
    """Reactive peer for a training pool (module docstring); ``replay_opts`` as
    :func:`optimizer.replay.account_training` takes them."""
    allv, _ = _known(inp)
    n_hour = max(1, int(3600 // inp.step_s))
    return _hourly_training(inp, REACTIVE_FACTOR * trailing_max(allv, n_hour), replay_opts)


def conformal_training(inp: ReplayInput, **replay_opts) -> tuple[Metrics, dict]:
    """Naive conformal peer for a training pool (module docstring)."""
    allv, _ = _known(inp)
    n_hour = max(1, int(3600 // inp.step_s))
    last = pd.Series(allv).ffill().fillna(0.0).to_numpy()
    q = conformal_offset(allv, n_hour, int(CONFORMAL_WINDOW / pd.Timedelta(seconds=inp.step_s)))
    return _hourly_training(inp, last + q, replay_opts)


def _inference_lead(inp: ReplayInput, cold_start_s: int, metrics_lag_s: int) -> int:
    return 1 + int(np.ceil(max(metrics_lag_s, 0) / inp.step_s - 1e-9)) \
        + int(np.ceil(max(cold_start_s, 0) / inp.step_s - 1e-9))


def reactive_inference(inp: ReplayInput, cold_start_s: int = 90, metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """Reactive peer for an inference service (module docstring)."""
    obs = observed_demand(inp, metrics_lag_s)
    allv, off = _known(inp)
    n_hour = max(1, int(3600 // inp.step_s))
    lag = _inference_lead(inp, 0, metrics_lag_s)
    tm = np.nan_to_num(trailing_max(allv, n_hour), nan=0.0)
    j = np.arange(len(inp.times)) + off - lag
    peak = np.maximum(np.where(j >= 0, tm[np.clip(j, 0, None)], 0.0), obs) if len(allv) else obs
    want = np.maximum(np.ceil(REACTIVE_FACTOR * peak - 1e-9), 1).astype(int)
    return run_controller(inp, lambda now, cur, d, i: want[i], cold_start_s, int(want[0]) if len(want) else 1,
                          metrics_lag_s)


def conformal_inference(inp: ReplayInput, cold_start_s: int = 90, metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """Naive conformal peer for an inference service (module docstring)."""
    obs = observed_demand(inp, metrics_lag_s)
    allv, off = _known(inp)
    lead = _inference_lead(inp, cold_start_s, metrics_lag_s)
    q = conformal_offset(allv, lead, int(CONFORMAL_WINDOW / pd.Timedelta(seconds=inp.step_s)))
    j = np.arange(len(inp.times)) + off - _inference_lead(inp, 0, metrics_lag_s)
    qj = np.where(j >= 0, q[np.clip(j, 0, None)], 0.0) if len(allv) else np.zeros(len(obs))
    want = np.maximum(np.ceil(obs + qj - 1e-9), 1).astype(int)
    return run_controller(inp, lambda now, cur, d, i: want[i], cold_start_s, int(want[0]) if len(want) else 1,
                          metrics_lag_s)


@dataclass(frozen=True)
class Peer:
    """One peer policy: ``training(inp, **replay_opts)`` and
    ``inference(inp, cold_start_s, metrics_lag_s)``, each returning
    ``(Metrics, per-step series)`` like the replay."""

    name: str
    description: str
    training: Callable[..., tuple[Metrics, dict]]
    inference: Callable[..., tuple[Metrics, dict]]


PEERS: dict[str, Peer] = {
    "reactive": Peer("reactive", "max of the last hour x 1.05, on demand, decided per hour / per HPA sync",
                     reactive_training, reactive_inference),
    "naive_conformal": Peer("naive_conformal", "last value + trailing 7-day q95 of the change over the lead time",
                            conformal_training, conformal_inference),
}


def replay_peers(inp: ReplayInput, kind: str, interruption_rate: float = 0.01, recovery_s: int = 1800,
                 queue_unmet: bool = False, seed: int = 0, cold_start_s: int = 90, metrics_lag_s: int = 60
                 ) -> dict[str, tuple[Metrics, dict]]:
    """Every registered peer replayed on ``inp`` (``kind``: ``training`` or
    ``inference``): name -> ``(Metrics, series)``."""
    if kind == "training":
        opts = {"interruption_rate": interruption_rate, "recovery_s": recovery_s, "queue_unmet": queue_unmet,
                "seed": seed}
        return {n: p.training(inp, **opts) for n, p in PEERS.items()}
    return {n: p.inference(inp, cold_start_s, metrics_lag_s) for n, p in PEERS.items()}
