"""What a cloud will sell: the purchase book's limits applied to a policy's layers, and the mix bought.

A policy (tuned, baseline or peer) asks for per-step GPUs on four layers: the weekly
reservation, the daily on-demand and spot purchase, and the hourly on-demand top-up
(:func:`optimizer.replay.account_training`). The purchase book (:class:`optimizer.prices.GpuPrice`,
per GPU model) says what of that can be had:

* **spot availability**: at most ``spot_cap_gpus`` spot GPUs, and at most ``spot_cap_share``
  of the GPUs bought in the step (reserved + on-demand + spot + top-up). GPU spot capacity is
  scarce and interruptible (the AWS Spot Instance Advisor, aws.amazon.com/ec2/spot/instance-advisor/,
  buckets each instance type's monthly frequency of interruption into <5 %, 5-10 %, 10-15 %,
  15-20 % and >20 %, and GPU types are often in the upper buckets). Spot the cap refuses is
  **bought on demand instead**, at the on-demand price, in the same step (the daily purchase
  cannot wait); the mix reports it as ``spot_refused_gpu_hours``. No cap is set by default:
  the cap is the user's own (what their account was granted), and the report says when the plan
  relies on uncapped spot;
* **reservation minimum term**: a reserved GPU, once committed, is held (and paid) for
  ``reserved_min_term_days``; a reservation the policy lowers before its term ends stays at its
  committed level until then. The default, 7 days, is the replay's weekly reservation cadence
  and lies inside what AWS sells as EC2 Capacity Blocks for ML (durations in 1-day increments up
  to 14 days and 7-day increments up to 182 days; AWS EC2 User Guide, "Find and purchase Capacity
  Blocks"); a 1-year reserved instance or savings plan is ``365``;
* **interruptions**: ``interruption_rate`` (per spot GPU-hour) and ``recovery_s`` (GPU-seconds
  lost per interruption, re-bought on demand) per GPU model override the plan's global ones
  (``plan.interruption_rate``, ``plan.recovery_s``).

:func:`purchase_mix` is what was bought, per layer, in GPU-hours and USD (``report.json``'s
policy figures and ``policy.yaml``'s ``expected`` block carry it for training pools).
"""

from __future__ import annotations

import numpy as np

from optimizer.prices import GpuPrice

MIX_LAYERS = ("reserved", "spot", "on_demand")


def spot_terms(price: GpuPrice, interruption_rate: float, recovery_s: int) -> tuple[float, int]:
    """``(interruption rate per spot GPU-hour, recovery seconds)``: the GPU model's own when its
    price book entry sets them, else the plan's."""
    rate = price.interruption_rate if price.interruption_rate is not None else interruption_rate
    rec = price.recovery_s if price.recovery_s is not None else recovery_s
    return float(rate), int(rec)


def held_reservation(reserved: np.ndarray, step_s: int, min_term_days: float) -> np.ndarray:
    """Per step, the reserved GPUs held when each commitment runs for ``min_term_days``: where
    the policy asks more than the unexpired commitments hold, it commits the difference for a
    term from that step; where it asks less, the commitments still run until they expire. A
    policy that changes its level only at term boundaries (the replay's weekly reservation with
    a 7-day term) gets exactly what it asked. GPUs per step, float."""
    n = int(round(min_term_days * 86400 / step_s))
    r = np.asarray(reserved, float)
    if n <= 1 or not np.any(r > 0):
        return r
    changes = list(np.flatnonzero(np.diff(r)) + 1) + [len(r)]
    held = np.empty(len(r))
    tranches: list[tuple[int, float]] = []  # (first step after its term, GPUs)
    i, c = 0, 0
    while i < len(r):
        tranches = [(e, a) for e, a in tranches if e > i]
        h = sum(a for _, a in tranches)
        if r[i] > h + 1e-9:
            tranches.append((i + n, r[i] - h))
            h = r[i]
        while changes[c] <= i:
            c += 1
        nxt = min([changes[c]] + [e for e, _ in tranches])
        held[i:nxt] = h
        i = nxt
    return held


def sellable_layers(price: GpuPrice, step_s: int, reserved: np.ndarray, od: np.ndarray, spot: np.ndarray,
                    hourly: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The layers a cloud sells for what a policy asked (module docstring): ``(reserved, on-demand,
    spot, spot refused)`` per step, GPUs. Reservations are held for their minimum term; spot above
    ``spot_cap_gpus`` or above ``spot_cap_share`` of the step's GPUs is refused and moved to
    on-demand (``od`` includes it; ``spot refused`` says how much). The hourly top-up is unchanged."""
    reserved = held_reservation(reserved, step_s, price.reserved_min_term_days)
    spot = np.asarray(spot, float)
    allowed = np.full(len(spot), np.inf)
    if price.spot_cap_gpus is not None:
        allowed = np.minimum(allowed, float(price.spot_cap_gpus))
    if price.spot_cap_share is not None:
        total = reserved + od + spot + hourly
        allowed = np.minimum(allowed, np.floor(price.spot_cap_share * total + 1e-9))
    refused = np.maximum(spot - allowed, 0.0)
    return reserved, od + refused, spot - refused, refused


def purchase_mix(series: dict, price: GpuPrice, step_s: int, gpus_per_unit: float = 1.0) -> dict[str, float]:
    """GPU-hours and USD per layer of a training replay's ``series`` (``reserved``, ``on_demand``,
    ``on_demand_hourly``, ``spot`` and, when present, ``spot_refused``; GPUs per step):
    ``{layer}_gpu_hours`` and ``{layer}_usd`` for ``reserved``, ``spot`` and ``on_demand`` (daily
    and hourly together), ``spot_share`` (spot GPU-hours / all GPU-hours bought, 0-1) and
    ``spot_refused_gpu_hours`` (spot the cap refused, bought on demand instead). The USD add up to
    the replay's cost."""
    h = step_s / 3600.0 * gpus_per_unit
    gh = {"reserved": float(np.sum(series["reserved"])) * h, "spot": float(np.sum(series["spot"])) * h,
          "on_demand": float(np.sum(series["on_demand"]) + np.sum(series["on_demand_hourly"])) * h}
    unit = {"reserved": price.reserved, "spot": price.spot, "on_demand": price.on_demand}
    out: dict[str, float] = {}
    for k in MIX_LAYERS:
        out[f"{k}_gpu_hours"] = round(gh[k], 3)
        out[f"{k}_usd"] = round(gh[k] * unit[k], 2)
    total = sum(gh.values())
    out["spot_share"] = round(gh["spot"] / total, 4) if total > 0 else 0.0
    out["spot_refused_gpu_hours"] = round(float(np.sum(series.get("spot_refused", 0.0))) * h, 3)
    return out


def mix_note(mix: dict[str, float] | None, price: GpuPrice) -> str | None:
    """A note for the report when a training plan buys spot without a cap in the price book:
    the share it relies on, why (the prices), and the setting that bounds it. None otherwise."""
    if not mix or price.spot_cap_gpus is not None or price.spot_cap_share is not None or mix["spot_share"] <= 0:
        return None
    return (f"purchase: {mix['spot_share']:.0%} of the GPU-hours bought are spot ({mix['spot_gpu_hours']:,.0f} of "
            f"{mix['reserved_gpu_hours'] + mix['spot_gpu_hours'] + mix['on_demand_gpu_hours']:,.0f}), reserved "
            f"{mix['reserved_gpu_hours']:,.0f}: spot at {price.spot:g} against {price.reserved:g} reserved and "
            f"{price.on_demand:g} on demand USD per GPU-hour, and the price book sets no spot cap; set "
            "prices.<gpu model>.spot_cap_share or spot_cap_gpus to what the account can get")


def within_quota(quota: float | None, reserved: np.ndarray, od: np.ndarray, spot: np.ndarray, hourly: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The layers a pool's quota lets it hold: at most ``quota`` GPUs per step (the Volcano
    Queue's ``capability``, :mod:`optimizer.exporters.volcano`, which the cluster enforces), cut
    from the most flexible layer first (the hourly top-up, then the daily on-demand, spot, and
    last the reservation). ``quota`` None or not positive: unchanged. Returns ``(reserved,
    on-demand, spot, hourly)``, GPUs per step."""
    if quota is None or quota <= 0:
        return reserved, od, spot, hourly
    over = np.maximum(reserved + od + spot + hourly - float(quota), 0.0)
    out = []
    for layer in (hourly, od, spot, reserved):
        cut = np.minimum(layer, over)
        out.append(layer - cut)
        over = over - cut
    return out[3], out[1], out[2], out[0]


def quota_need(quota: float | None, series: dict) -> int | None:
    """The GPUs a quota must allow for the policy of a replay's ``series`` (its ``asked``: GPUs per
    step before the quota) to run uncapped: ``ceil(max asked)`` when that is above ``quota``,
    else None."""
    asked = series.get("asked")
    if quota is None or quota <= 0 or asked is None or not len(asked):
        return None
    need = int(np.ceil(float(np.max(asked)) - 1e-9))
    return need if need > quota else None


def quota_note(quota: float, need: int, capped, uncapped) -> str:
    """The report's note for a plan above its quota: the quota to ask for and both sets of figures
    (``capped``/``uncapped``: :class:`optimizer.policy.Metrics` on the evaluation window)."""
    return (f"quota: the plan needs up to {need} GPUs, above the pool's quota of {quota:g}; raise the quota to "
            f"{need}. Held to the quota (the figures shown) it costs {capped.cost_usd:,.2f} USD at coverage "
            f"{capped.coverage:.3f}; uncapped {uncapped.cost_usd:,.2f} USD at coverage {uncapped.coverage:.3f}")
