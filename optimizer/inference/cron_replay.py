"""Replay of today's cron pre-scaling as a cluster applies it: the HPA on live utilisation plus
KEDA ``cron`` triggers, one per pre-scaling window (:func:`optimizer.inference.prescale.prescale_windows`)
computed once, at export time, from the plan forecast then available.

A KEDA cron trigger asks for ``desiredReplicas`` inside its window and for nothing outside it
(KEDA docs, "Cron" scaler); the HPA takes the largest proposal of its metrics (Kubernetes HPA docs,
"Algorithm details"). So at step ``t_i`` the controller (:class:`optimizer.engine.hpa_controller.HPA`, the policy's
behaviour) gets the live ratio ``observed demand / replicas / target_utilization`` and, inside a
window ``[start, end)``, the ratio ``desiredReplicas / replicas``.

Which forecast: :func:`windows_before` takes the latest rolling origin issued at or before the
window's start whose forecast covers at least a day (the plan's weekly horizon), so no decision
sees a forecast issued after it (rolling-origin, no look-ahead).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.engine.replay_core import ReplayInput, hpa_from_params, run_controller
from optimizer.inference.prescale import prescale_windows
from optimizer.plan.policy import InferenceParams, Metrics

MIN_HORIZON = pd.Timedelta("1D")


def windows_before(combined: pd.DataFrame, start: pd.Timestamp, p: InferenceParams,
                   span: pd.Timedelta = pd.Timedelta("7D")) -> list[dict]:
    """Pre-scaling windows from the latest origin of ``combined`` (forecast frame, one series)
    issued at or before ``start`` whose forecast reaches at least :data:`MIN_HORIZON` ahead, over
    ``[start, start + span)``; ``[]`` when there is none or the policy has no pre-scaling quantile."""
    if combined.empty or p.prescale_quantile == "none":
        return []
    reach = combined.groupby("issued_at")["timestamp"].max()
    ok = reach[(reach.index <= start) & (reach - reach.index >= MIN_HORIZON)]
    if ok.empty:
        return []
    f = combined[combined["issued_at"] == ok.index.max()]
    f = f[(f["timestamp"] >= start) & (f["timestamp"] < start + span)]
    return prescale_windows(f, p)


def window_replicas(times: pd.DatetimeIndex, windows: list[dict]) -> np.ndarray:
    """Per step, the ``desired_replicas`` of the window holding it (largest if several; 0 outside)."""
    out = np.zeros(len(times))
    for w in windows:
        a, b = pd.Timestamp(w["start"]), pd.Timestamp(w["end"])
        m = (times >= a) & (times < b)
        out[m] = np.maximum(out[m], float(w["desired_replicas"]))
    return out


def replay_cron(inp: ReplayInput, p: InferenceParams, windows: list[dict], cold_start_s: int = 90,
                initial: int | None = None, metrics_lag_s: int = 60) -> tuple[Metrics, dict]:
    """Replay the HPA plus cron windows (module docstring): ``(metrics, {"replicas", "provisioned"})``
    as :func:`optimizer.engine.replay.replay_inference`."""
    hpa = hpa_from_params(p, inp.step_s)
    floor = window_replicas(inp.times, windows)
    t = p.target_utilization

    def decide(now, cur, d, i):
        ratios = [d / max(cur, 1) / t]
        if floor[i] > 0:
            ratios.append(floor[i] / max(cur, 1))
        return hpa.step(now, cur, ratios, inp.step_s)

    return run_controller(inp, decide, cold_start_s, initial or max(p.min_replicas, 1), metrics_lag_s)


__all__ = ["replay_cron", "windows_before", "window_replicas"]
