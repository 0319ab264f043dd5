"""Peer policies: what a careful engineer would set up without capplan.

Each peer is replayed with the same replay, timing and price book as the
recommended policy and the baseline (:mod:`optimizer.engine.replay`,
:mod:`optimizer.book.prices`), on the same window; a recommendation is only worth
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

* **empirical** (training pools only; no model) — each day, spot GPUs at the level
  the last 7 days' hourly maxima reach in at least the spot critical ratio of their
  hours; each hour, on-demand GPUs up to the last value plus the 0.95 quantile of the
  rises to each interval of an hour above them (:mod:`optimizer.training.empirical`). It is replayed as the training
  policy :data:`EMPIRICAL_PARAMS`, which the exports carry when it is recommended (:mod:`optimizer.rivals.expressed`).
  Every level is a quantile of the pool's own demand,
  in GPUs, so it holds at any pool size. Not a peer of inference services
  (``inference=None``).

All fall back to the history before the window for their first decisions;
with no history at all, the first decisions see 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from forecasting.plugins import Registry
from optimizer.engine.replay import account_training, replay_training
from optimizer.engine.replay_core import ReplayInput, observed_demand, run_controller
from optimizer.plan.policy import Metrics, TrainingParams
from optimizer.training.empirical import WINDOW, conformal_offset, trailing_max

REACTIVE_FACTOR = 1.05
CONFORMAL_LEVEL = 0.95
CONFORMAL_WINDOW = WINDOW
#: the empirical peer as a training policy: no reservation, the empirical daily level on spot, the
#: naive-conformal hourly top-up (``quantile`` is unused by the empirical daily rule)
EMPIRICAL_PARAMS = {"reservation_ratio": 0.0, "reservation_basis": "forecast", "daily_rule": "empirical",
                    "daily_cap": "none", "headroom": 1.0, "spot_fraction": 1.0, "topup_quantile": "n95",
                    "topup_headroom": 1.0, "topup_margin_gpus": None}


def _known(inp: ReplayInput) -> tuple[np.ndarray, int]:
    """History before the window followed by the window's demand, and the window's offset in it."""
    before = inp.history_before if inp.history_before is not None else np.array([])
    return np.concatenate([np.asarray(before, float), np.asarray(inp.demand, float)]), len(before)


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
    :func:`optimizer.engine.replay.account_training` takes them."""
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


def empirical_training(inp: ReplayInput, **replay_opts) -> tuple[Metrics, dict]:
    """Empirical (model-free) peer for a training pool (module docstring): the replay of
    :data:`EMPIRICAL_PARAMS`."""
    return replay_training(inp, TrainingParams(quantile="p90", **EMPIRICAL_PARAMS), **replay_opts)


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
    ``(Metrics, per-step series)`` like the replay; None where the peer has no rule for that kind."""

    name: str
    description: str
    training: Callable[..., tuple[Metrics, dict]] | None
    inference: Callable[..., tuple[Metrics, dict]] | None


#: The peer registry (:class:`forecasting.plugins.Registry`): name -> :class:`Peer`, in the report's order.
PEERS: Registry[Peer] = Registry("peer")
PEERS.register("reactive", Peer("reactive", "max of the last hour x 1.05, on demand, decided per hour / per HPA sync",
                                reactive_training, reactive_inference))
PEERS.register("naive_conformal", Peer("naive_conformal", "last value + trailing 7-day q95 of the change over the "
                                       "lead time", conformal_training, conformal_inference))
PEERS.register("empirical", Peer("empirical", "no model: daily spot at the newsvendor quantile of the last 7 days' "
                                 "hourly maxima, hourly on-demand top-up to last value + q95 of the rises over an hour",
                                 empirical_training, None))


def replay_peers(inp: ReplayInput, kind: str, interruption_rate: float = 0.01, recovery_s: int = 1800,
                 queue_unmet: bool = False, seed: int = 0, cold_start_s: int = 90, metrics_lag_s: int = 60
                 ) -> dict[str, tuple[Metrics, dict]]:
    """Every registered peer with a rule for ``kind`` (``training`` or ``inference``) replayed
    on ``inp``: name -> ``(Metrics, series)``."""
    if kind == "training":
        opts = {"interruption_rate": interruption_rate, "recovery_s": recovery_s, "queue_unmet": queue_unmet,
                "seed": seed}
        return {n: p.training(inp, **opts) for n, p in PEERS.items() if p.training is not None}
    return {n: p.inference(inp, cold_start_s, metrics_lag_s) for n, p in PEERS.items() if p.inference is not None}
