"""Plan arithmetic: tuned parameters and the 7-day forecast in, capacity per lead time out.

Training pools (GPUs; :class:`optimizer.policy.TrainingParams`):

* ``reserved_gpus`` = ceil(reservation_ratio x mean of the weekly tier's quantile) — the weekly commitment;
* the day's target = ceil(headroom x max of the combined quantile over the next 24 h); what it adds to
  the reservation is bought per day, ``spot_fraction`` of it on spot, the rest on demand;
* with a top-up quantile, ``on_demand_hourly_gpus`` = what the next hour's forecast needs beyond that;
* ``capability_gpus`` (the Volcano Queue's ceiling) covers the week's p99 with headroom; ``deserved_gpus``
  is the next day's p50.

Inference services (replicas; :class:`optimizer.policy.InferenceParams`): the HPA's min/max replicas and
target, plus pre-scaling windows (:func:`prescale_windows`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from optimizer.policy import InferenceParams, TrainingParams


def capacity_plan(kind: str, params: dict, final: pd.DataFrame, weekly: pd.DataFrame,
                  quota_gpus: float | None = None) -> dict:
    """The plan of one series (the ``plan`` of :class:`optimizer.policy.SeriesPlan`).

    ``final``: the series' combined 7-day plan forecast (forecast frame, one
    ``issued_at``); ``weekly``: the weekly tier's plan forecast of the series
    (training only; empty means no reservation). ``valid_from`` is ``issued_at``.

    Raises pydantic.ValidationError when ``params`` do not fit the kind's policy model.
    """
    f = final
    last = f["issued_at"].iloc[0]
    if kind == "training":
        p = TrainingParams(**params)
        day = f[f["timestamp"] <= last + pd.Timedelta("1D")]
        reserved = math.ceil(p.reservation_ratio * float(weekly[p.quantile].mean()) - 1e-9) if len(weekly) else 0
        target = math.ceil(p.headroom * float(day[p.quantile].max()) - 1e-9)
        flex = max(target - reserved, 0)
        spot = int(round(p.spot_fraction * flex))
        capability = max(math.ceil(p.headroom * float(f["p99"].max()) - 1e-9), reserved + flex)
        plan = {"reserved_gpus": reserved, "on_demand_gpus": flex - spot, "spot_gpus": spot}
        if p.topup_quantile != "none":
            hour = f[f["timestamp"] <= last + pd.Timedelta("1h")]
            want = math.ceil(p.topup_headroom * float(hour[p.topup_quantile].max()) - 1e-9)
            plan["on_demand_hourly_gpus"] = max(want - reserved - flex, 0)
            capability = max(capability, math.ceil(p.topup_headroom * float(f["p99"].max()) - 1e-9))
        plan.update({"capability_gpus": int(capability), "deserved_gpus": int(math.ceil(float(day["p50"].max()))),
                     "quota_gpus": quota_gpus, "valid_from": last.isoformat()})
        return plan
    p = InferenceParams(**params)
    return {"min_replicas": p.min_replicas, "max_replicas": p.max_replicas,
            "target_utilization": p.target_utilization, "prescale": prescale_windows(f, p),
            "valid_from": last.isoformat()}


def prescale_windows(f: pd.DataFrame, p: InferenceParams, max_windows: int = 48) -> list[dict]:
    """Hours of the next 7 days whose forecast needs more than ``min_replicas``:
    ``[{start, end, desired_replicas}]`` (ISO times, replicas), starting
    ``prescale_lead_s`` early; at most ``max_windows``, the largest kept."""
    if p.prescale_quantile == "none":
        return []
    s = f.set_index("timestamp")[p.prescale_quantile].resample("1h").max()
    need = np.ceil(s / p.target_utilization - 1e-9).clip(lower=p.min_replicas, upper=p.max_replicas)
    out = []
    lead = pd.Timedelta(seconds=p.prescale_lead_s)
    for ts, n in need.items():
        if n <= p.min_replicas:
            continue
        if out and out[-1]["desired_replicas"] == int(n) and pd.Timestamp(out[-1]["end"]) == ts - lead:
            out[-1]["end"] = (ts + pd.Timedelta("1h") - lead).isoformat()
            continue
        out.append({"start": (ts - lead).isoformat(), "end": (ts + pd.Timedelta("1h") - lead).isoformat(),
                    "desired_replicas": int(n)})
    out.sort(key=lambda w: -w["desired_replicas"])
    return sorted(out[:max_windows], key=lambda w: w["start"])
