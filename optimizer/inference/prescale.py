"""What an inference plan takes from the 7-day forecast: pre-scaling windows and the
replica count to hold while the metric source is down.

**Pre-scaling windows** (:func:`prescale_windows`). The replay
(:func:`optimizer.engine.replay.prescale_demand`) raises the desired replicas at time
t to ``ceil(forecast(t + lead) / target_utilization)``. A cluster gets the same
effect from KEDA ``cron`` triggers, one per forecast **peak**:

* the hourly need is ``ceil(max of the quantile in the hour / target_utilization)``,
  within ``[min_replicas, max_replicas]``;
* the **base** is the larger of ``min_replicas`` and the lower quartile of the
  hourly need over the horizon: the level the service sits at most of the time,
  which the ``prometheus`` trigger already holds. A flat forecast has no peak,
  so it gets no window (a window spanning the whole week would only pin the
  service at that level until the next plan);
* a peak is a run of consecutive hours whose need is above the base and equal;
  its window is exactly as long as the run, shifted ``lead`` earlier, as the
  replay does: ``[peak start - lead, peak end - lead)``;
* a run longer than :data:`MAX_WINDOW` (one day) is split into day-long
  windows, because a weekly cron window must stay shorter than a day to be
  checked (:mod:`optimizer.exporters.checks.lint`, rule ``cron-trigger``);
* at most ``max_windows`` windows, the largest needs first.

**Fallback replicas** (:func:`fallback_replicas`): KEDA's ``fallback.replicas``
applies when the trigger's query fails. It is the plan's p95 need over the
next :data:`FALLBACK_HORIZON` (24 h, the daily refit cadence), so an outage
keeps the service at forecast demand instead of jumping to ``max_replicas``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from optimizer.plan.policy import InferenceParams

MAX_WINDOW = pd.Timedelta("1D")
FALLBACK_HORIZON = pd.Timedelta("24h")
FALLBACK_QUANTILE = "p95"
BASE_QUANTILE = 0.25


def hourly_need(f: pd.DataFrame, quantile: str, p: InferenceParams) -> pd.Series:
    """Replicas needed per hour: ``ceil(hourly max of column quantile / target_utilization)``
    clipped to ``[min_replicas, max_replicas]``. ``f`` has ``timestamp`` (UTC) and the
    quantile column in replicas at 100 % utilisation."""
    s = f.set_index("timestamp")[quantile].resample("1h").max().dropna()
    return np.ceil(s / p.target_utilization - 1e-9).clip(lower=p.min_replicas, upper=p.max_replicas)


def prescale_windows(f: pd.DataFrame, p: InferenceParams, max_windows: int = 48) -> list[dict]:
    """Pre-scaling windows ``[{start, end, desired_replicas}]`` (UTC ISO strings) for the
    forecast peaks in ``f`` (see the module docstring); ``[]`` when ``prescale_quantile``
    is ``none`` or the forecast has no peak."""
    if p.prescale_quantile == "none" or f.empty:
        return []
    need = hourly_need(f, p.prescale_quantile, p)
    if need.empty:
        return []
    base = max(float(p.min_replicas), float(np.quantile(need.to_numpy(), BASE_QUANTILE)))
    lead = pd.Timedelta(seconds=p.prescale_lead_s)
    hour = pd.Timedelta("1h")
    runs: list[list] = []  # [start, end, replicas]
    for ts, n in need.items():
        if n <= base:
            continue
        last = runs[-1] if runs else None
        if last and last[2] == int(n) and last[1] == ts and last[1] - last[0] < MAX_WINDOW:
            last[1] = ts + hour
        else:
            runs.append([ts, ts + hour, int(n)])
    out = [{"start": (a - lead).isoformat(), "end": (b - lead).isoformat(), "desired_replicas": n}
           for a, b, n in runs]
    out.sort(key=lambda w: -w["desired_replicas"])
    return sorted(out[:max_windows], key=lambda w: w["start"])


def fallback_replicas(f: pd.DataFrame, p: InferenceParams) -> int:
    """Replicas for KEDA ``fallback``: ``ceil(max p95 over the next 24 h / target_utilization)``
    within ``[max(min_replicas, 1), max_replicas]``; ``min_replicas`` (at least 1) when ``f``
    has no p95 in that span."""
    lo = max(int(p.min_replicas), 1)
    if f.empty:
        return lo
    t0 = f["issued_at"].iloc[0] if "issued_at" in f else f["timestamp"].min()
    v = f.loc[f["timestamp"] <= t0 + FALLBACK_HORIZON, FALLBACK_QUANTILE].max()
    if not np.isfinite(v):
        return lo
    return int(min(max(math.ceil(float(v) / p.target_utilization - 1e-9), lo), int(p.max_replicas)))


__all__ = ["prescale_windows", "fallback_replicas", "hourly_need", "MAX_WINDOW"]
