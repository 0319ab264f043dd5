"""Plan arithmetic: tuned parameters and the 7-day forecast in, capacity per lead time out.

Training pools (GPUs; :class:`optimizer.plan.policy.TrainingParams`):

* ``reserved_gpus`` = ceil(reservation_ratio x mean of the weekly tier's quantile) — the weekly commitment;
  every ``ceil`` of a forecast level here and in the replay is :func:`optimizer.book.whole_units.whole`: a level
  at most :data:`optimizer.book.whole_units.COUNT_TOLERANCE` above a whole number is that number when the
  history counts whole GPUs;
* the day's target = ceil(headroom x the day's level of the combined quantile over the next 24 h): its
  maximum (``daily_rule="max"``), or its newsvendor level (``"newsvendor"``: the highest of its hourly
  maxima that at least ``spot_share`` of the hours reach, :func:`optimizer.training.newsvendor.exceeded_level`, as
  the replay sizes it), or with ``daily_rule="empirical"`` the level of the demand observed up to
  ``valid_from`` (:func:`optimizer.training.empirical.day_level_at`: the last 7 days' hourly maxima at
  ``spot_share``, no forecast), or with ``"calibrated"`` the level the next 24 h's p50 hour maxima plus the forecast's
  recent errors (``day_errors_gpus``) reach at ``spot_share`` (:func:`optimizer.training.calibrated_day.plan_level`),
  with ``daily_cap="last_day_peak"`` at most the peak of the last 24 h of history; what it adds to the reservation is
  bought per day, ``spot_fraction`` of it on spot, the rest on demand; none on spot when spot does not pay
  (``spot_share`` 1: its effective price is not below on-demand), as the replay buys it;
* with a top-up quantile, ``on_demand_hourly_gpus`` = what the next hour's forecast needs beyond that
  (a calibrated level, :mod:`optimizer.training.calibrated`: the next hour's p50 plus ``topup_margin_gpus``;
  ``n95``: the last observed value plus the 7-day q95 of the rises over an hour,
  :func:`optimizer.training.empirical.conformal_level`);
* ``capability_gpus`` (the Volcano Queue's ceiling) covers the week's p99 with headroom; ``deserved_gpus``
  is the next day's p50; ``last_peak_gpus`` is the peak of the last day with demand
  (:func:`optimizer.plan.history_levels.last_nonzero_peak`). How the Queue's fields follow from these and the
  quota: :mod:`optimizer.exporters.volcano`.

Inference services (replicas; :class:`optimizer.plan.policy.InferenceParams`): the HPA's min/max replicas and
target, pre-scaling windows for the forecast peaks and the replicas to hold when the metric source fails
(:mod:`optimizer.inference.prescale`).

Both carry ``baseline``: what the rules of thumb would set from the last day of history
(:func:`optimizer.plan.history_levels.baseline_levels`), quoted next to the tuned numbers in the manifests.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from optimizer.book.prices import GpuPrice
from optimizer.book.purchase import reserved_level, sellable_layers
from optimizer.book.whole_units import count_tolerance, whole
from optimizer.inference.prescale import fallback_replicas, prescale_windows
from optimizer.plan.history_levels import baseline_levels, last_nonzero_peak
from optimizer.plan.policy import InferenceParams, TrainingParams
from optimizer.training.calibrated import FALLBACK, NAMES
from optimizer.training.calibrated_day import FALLBACK as CAL_FALLBACK
from optimizer.training.calibrated_day import plan_level
from optimizer.training.empirical import conformal_level, day_level_at
from optimizer.training.newsvendor import exceeded_level, spot_split


def capacity_plan(kind: str, params: dict, final: pd.DataFrame, weekly: pd.DataFrame,
                  quota_gpus: float | None = None, history: pd.DataFrame | None = None,
                  spot_share: float | None = None, price: GpuPrice | None = None) -> dict:
    """The plan of one series (the ``plan`` of :class:`optimizer.plan.policy.SeriesPlan`).

    ``final``: the series' combined 7-day plan forecast (forecast frame, one
    ``issued_at``); ``weekly``: the weekly tier's plan forecast of the series
    (training only; empty means no reservation). ``valid_from`` is ``issued_at``. ``history``: the
    series' regularised history (``timestamp``, ``value``) for ``last_peak_gpus`` and ``baseline``.

    ``spot_share``: the spot critical ratio (:func:`optimizer.training.newsvendor.critical_ratios`), needed by
    ``daily_rule="newsvendor"``, ``"empirical"`` and ``"calibrated"``; ``price``: the GPU model's price book entry,
    needed by ``reservation_basis="spot_cap"`` (:func:`optimizer.book.purchase.reserved_level`); with it the day's spot
    above the book's spot cap is planned on demand, as the replay buys it
    (:func:`optimizer.book.purchase.sellable_layers`).

    Raises pydantic.ValidationError when ``params`` do not fit the kind's policy model, ValueError
    for a newsvendor, empirical or calibrated daily rule without ``spot_share``.
    """
    f = final
    last = f["issued_at"].iloc[0]
    hist = history if history is not None else pd.DataFrame({"timestamp": pd.to_datetime([], utc=True), "value": []})
    if kind == "training":
        p = TrainingParams(**params)
        day = f[f["timestamp"] <= last + pd.Timedelta("1D")]
        tol = count_tolerance(hist["value"].to_numpy())  # as the replay (optimizer.book.whole_units)
        reserved = (reserved_level(p.reservation_ratio, p.reservation_basis, float(weekly[p.quantile].mean()), price,
                                   tol) if len(weekly) else 0)
        if p.daily_rule in ("newsvendor", "empirical", "calibrated") and spot_share is None:
            raise ValueError(f"capacity_plan: daily_rule {p.daily_rule} needs spot_share "
                             "(optimizer.training.newsvendor.critical_ratios)")
        seen, step_s = _observed(hist, last)
        if p.daily_rule == "empirical":
            level = day_level_at(seen, len(seen), step_s, spot_share)
        elif p.daily_rule in ("newsvendor", "calibrated"):
            hours = day.groupby(((day["timestamp"] - last) // pd.Timedelta("1h")).to_numpy())
            level = (exceeded_level(hours[p.quantile].max().to_numpy(), spot_share) if p.daily_rule == "newsvendor"
                     else plan_level(hours["p50"].max().to_numpy(), hours[CAL_FALLBACK].max().to_numpy(),
                                     p.day_errors_gpus, spot_share))
        else:
            level = float(day[p.quantile].max())
        target = whole(p.headroom * level, tol)
        if p.daily_cap == "last_day_peak":  # as the replay: never more than the last 24 h needed
            v = hist.dropna(subset=["value"])
            v = v[v["timestamp"] > v["timestamp"].max() - pd.Timedelta("1D")]["value"] if len(v) else v["value"]
            target = min(target, math.ceil(float(v.max()) - 1e-9) if len(v) else 0)
        flex = max(target - reserved, 0)
        # spot only where it pays, as the replay buys it (optimizer.training.newsvendor.spot_split)
        spot = int(spot_split(flex, p.spot_fraction, spot_share is None or spot_share < 1.0)[1])
        capability = max(math.ceil(p.headroom * float(f["p99"].max()) - 1e-9), reserved + flex)
        plan = {"reserved_gpus": reserved, "on_demand_gpus": flex - spot, "spot_gpus": spot}
        if p.topup_quantile != "none":
            hour = f[f["timestamp"] <= last + pd.Timedelta("1h")]
            if p.topup_quantile == "n95":  # no forecast: the demand's own last value and rises
                level = float(conformal_level(seen, step_s, np.array([len(seen) - 1]))[0]) if len(seen) else 0.0
            # fresh p50 + the calibrated margin (optimizer.training.calibrated), else p90
            elif p.topup_quantile in NAMES:
                level = (float(hour["p50"].max()) + p.topup_margin_gpus if p.topup_margin_gpus is not None
                         else float(hour[FALLBACK].max()))
            else:
                level = float(hour[p.topup_quantile].max())
            want = whole(p.topup_headroom * max(level, 0.0), tol)
            plan["on_demand_hourly_gpus"] = max(want - reserved - flex, 0)
            capability = max(capability, math.ceil(p.topup_headroom * float(f["p99"].max()) - 1e-9))
        if price is not None:  # what the cloud sells: spot above the book's cap is bought on demand, as in the replay
            _, od, sp, _ = sellable_layers(price, 3600, *(np.array([float(x)]) for x in (  # one step: no term to hold
                reserved, plan["on_demand_gpus"], plan["spot_gpus"], plan.get("on_demand_hourly_gpus", 0))))
            plan["on_demand_gpus"], plan["spot_gpus"] = int(round(od[0])), int(round(sp[0]))
        plan.update({"capability_gpus": int(capability), "deserved_gpus": int(math.ceil(float(day["p50"].max()))),
                     "quota_gpus": quota_gpus, "last_peak_gpus": last_nonzero_peak(hist),
                     "valid_from": last.isoformat(), "baseline": baseline_levels(kind, hist)})
        return plan
    p = InferenceParams(**params)
    return {"min_replicas": p.min_replicas, "max_replicas": p.max_replicas,
            "target_utilization": p.target_utilization, "prescale": prescale_windows(f, p),
            "fallback_replicas": fallback_replicas(f, p), "valid_from": last.isoformat(),
            "baseline": baseline_levels(kind, hist)}


def _observed(hist: pd.DataFrame, upto: pd.Timestamp) -> tuple[np.ndarray, int]:
    """The demand observed by ``upto`` (``hist``'s values up to that time, GPUs, NaN = unknown, on its
    regular grid) and the grid's step (s; 300 with fewer than two rows), as the replay's empirical
    levels see the history before a day (:mod:`optimizer.training.empirical`)."""
    h = hist[hist["timestamp"] <= upto].sort_values("timestamp")
    ts = pd.to_datetime(h["timestamp"])
    step_s = int(ts.diff().median().total_seconds()) if len(h) > 1 else 300
    return h["value"].to_numpy(dtype=float), step_s
