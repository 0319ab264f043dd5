"""What a cloud will sell: the purchase book's limits applied to a training policy's layers, and the mix bought.

A training policy (tuned, baseline or peer) asks for per-step GPUs on four layers: the weekly
reservation, the daily on-demand and spot purchase, and the hourly on-demand top-up
(:func:`optimizer.engine.replay.account_training`). The purchase book (:class:`optimizer.book.prices.GpuPrice`,
per GPU model; its defaults and their sources are in :mod:`optimizer.book.prices`) says what of that
can be had:

* **spot availability**: at most ``spot_cap_gpus`` spot GPUs, and at most ``spot_cap_share``
  of the GPUs bought in the step (reserved + on-demand + spot + top-up). Spot the cap refuses is
  **bought on demand instead**, at the on-demand price, in the same step (the daily purchase
  cannot wait); ``spot_refused`` says how much. No cap by default;
* **reservation minimum term**: a reserved GPU, once committed, is held (and paid) for
  ``reserved_min_term_days``; a reservation the policy lowers before its term ends stays at its
  committed level until then. With the default 7 days and the replay's weekly reservation (its
  level changes only at week boundaries) it gets exactly what it asked;
* **interruptions**: ``interruption_rate`` (per spot GPU-hour) and ``recovery_s`` (GPU-seconds
  lost per interruption) per GPU model override the plan's (``plan.interruption_rate``,
  ``plan.recovery_s``).

:func:`purchase_mix` is what was bought, per layer, in GPU-hours and USD: the ``mix`` of
``report.json``'s policy figures and of ``policy.yaml``'s ``expected`` block.
"""

from __future__ import annotations

import numpy as np

from optimizer.book.prices import GpuPrice
from optimizer.book.whole_units import EPS, whole

#: the layers of a purchase mix, in the order readers show them
MIX_LAYERS = ("reserved", "spot", "on_demand")


def spot_terms(price: GpuPrice, interruption_rate: float, recovery_s: int) -> tuple[float, int]:
    """``(interruptions per spot GPU-hour, GPU-seconds lost per interruption)``: the GPU model's
    own when its price book entry sets them, else the plan's ``interruption_rate``/``recovery_s``."""
    rate = price.interruption_rate if price.interruption_rate is not None else interruption_rate
    rec = price.recovery_s if price.recovery_s is not None else recovery_s
    return float(rate), int(rec)


def held_reservation(reserved: np.ndarray, step_s: int, min_term_days: float) -> np.ndarray:
    """Per step, the reserved GPUs held when each commitment runs for ``min_term_days``: where
    the policy asks more than the unexpired commitments hold, it commits the difference for a
    term from that step; where it asks less, the commitments still run until they expire.
    A policy that changes its level only at term boundaries gets exactly what it asked.
    ``reserved``: GPUs per step of ``step_s`` seconds; returns GPUs per step (float)."""
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
    spot, spot refused)``, GPUs per step. Reservations are held for their minimum term; spot above
    ``spot_cap_gpus`` or above ``floor(spot_cap_share x the step's GPUs)`` is refused and bought on
    demand (``od`` includes it). The hourly top-up is unchanged. Without a cap and with a
    reservation that changes only at term boundaries, the layers come back as asked."""
    reserved = held_reservation(reserved, step_s, price.reserved_min_term_days)
    spot = np.asarray(spot, float)
    allowed = np.full(len(spot), np.inf)
    if price.spot_cap_gpus is not None:
        allowed = np.minimum(allowed, float(price.spot_cap_gpus))
    if price.spot_cap_share is not None:
        allowed = np.minimum(allowed, np.floor(price.spot_cap_share * (reserved + od + spot + hourly) + 1e-9))
    refused = np.maximum(spot - allowed, 0.0)
    return reserved, od + refused, spot - refused, refused


def refused_gpus(level, price: GpuPrice, tol: float = EPS):
    """The GPUs the spot cap refuses when ``level`` GPUs (a float or an array, rounded up to whole
    GPUs by :func:`optimizer.book.whole_units.whole` with ``tol``) are wanted on spot:
    ``max(L - spot_cap_gpus, L - floor(spot_cap_share x L), 0)`` (the share of the step's GPUs, as
    :func:`optimizer.book.purchase.sellable_layers` applies it); 0 without a cap. Same type as ``level``."""
    lv = whole(level, tol)
    out = np.zeros_like(np.asarray(lv, dtype=float))
    if price.spot_cap_share is not None:
        out = np.maximum(out, lv - np.floor(price.spot_cap_share * np.asarray(lv, float) + EPS))
    if price.spot_cap_gpus is not None:
        out = np.maximum(out, np.asarray(lv, float) - float(price.spot_cap_gpus))
    return float(out) if np.ndim(level) == 0 else out


def reserved_level(reservation_ratio: float, reservation_basis: str, level, price: GpuPrice | None,
                   tol: float = EPS):
    """A policy's reserved GPUs (whole) for the weekly forecast's ``level`` (GPUs; a float or an
    array per step): ``reservation_ratio x level`` (basis ``forecast``) or ``reservation_ratio x``
    :func:`refused_gpus` ``(level)`` (basis ``spot_cap``). Raises ValueError for basis ``spot_cap``
    without a ``price`` (its cap is needed)."""
    if reservation_basis == "forecast":
        return whole(reservation_ratio * level, tol)
    if price is None:
        raise ValueError("reserved_level: reservation_basis 'spot_cap' needs the GPU model's price book entry")
    return whole(reservation_ratio * refused_gpus(level, price, tol), tol)


def within_quota(quota: float | None, reserved: np.ndarray, od: np.ndarray, spot: np.ndarray, hourly: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The layers a pool's quota lets it hold: at most ``quota`` GPUs per step (the Volcano
    Queue's ``capability``, :mod:`optimizer.exporters.volcano`, which the cluster enforces), cut
    from the most flexible layer first: the hourly top-up, then the daily on-demand, spot, and
    last the reservation. ``quota`` None or not positive: unchanged. Returns ``(reserved,
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


def layer_mix(gpu_hours: dict[str, float], price: GpuPrice) -> dict[str, dict[str, float]]:
    """The purchase mix (OWNERS.md's shared contract): ``{layer: {"gpu_hours", "cost_usd"}}`` for
    ``reserved``, ``spot`` and ``on_demand`` from GPU-hours per layer (a missing layer is 0), each
    layer's USD at its price (USD per GPU-hour)."""
    unit = {"reserved": price.reserved, "spot": price.spot, "on_demand": price.on_demand}
    return {k: {"gpu_hours": round(float(gpu_hours.get(k, 0.0)), 3),
                "cost_usd": round(float(gpu_hours.get(k, 0.0)) * unit[k], 2)} for k in MIX_LAYERS}


def purchase_mix(series: dict, price: GpuPrice, step_s: int, gpus_per_unit: float = 1.0) -> dict[str, dict[str, float]]:
    """The mix bought by a training replay's ``series`` (``reserved``, ``on_demand``,
    ``on_demand_hourly``, ``spot``, and ``on_demand_redo`` where the replay bought interrupted work
    back: GPUs per step of ``step_s`` seconds): :func:`layer_mix` with the on-demand ones together. Its USD add up to
    the replay's cost."""
    h = step_s / 3600.0 * gpus_per_unit
    return layer_mix({"reserved": float(np.sum(series["reserved"])) * h, "spot": float(np.sum(series["spot"])) * h,
                      "on_demand": float(np.sum(series["on_demand"]) + np.sum(series["on_demand_hourly"])
                                         + np.sum(series.get("on_demand_redo", 0.0))) * h},
                     price)


def mix_total(mixes) -> dict[str, dict[str, float]] | None:
    """The sum of several mixes, layer by layer (e.g. the recommended fleet's); None when none
    of ``mixes`` is recorded (older runs)."""
    got = [m for m in mixes if m]
    if not got:
        return None
    return {k: {f: round(sum(float(m.get(k, {}).get(f, 0.0)) for m in got), 3 if f == "gpu_hours" else 2)
                for f in ("gpu_hours", "cost_usd")} for k in MIX_LAYERS}


def spot_share(mix: dict | None) -> float | None:
    """Spot GPU-hours / all GPU-hours of ``mix`` (0-1); None without a mix or GPU-hours."""
    if not mix:
        return None
    total = sum(float(mix[k]["gpu_hours"]) for k in MIX_LAYERS if k in mix)
    return float(mix["spot"]["gpu_hours"]) / total if total > 0 and "spot" in mix else None


def mix_note(mix: dict | None, price: GpuPrice, spot_refused_gpu_hours: float, effective_spot: float,
             rate: float, rec: int) -> str | None:
    """The report's note on a training plan's spot: the share of its GPU-hours on spot and why
    (``effective_spot``: the spot price with its interruption losses, USD per GPU-hour,
    :func:`optimizer.training.newsvendor.effective_spot_price`, against reserved and on-demand; ``rate`` per
    spot GPU-hour and ``rec`` seconds lost each), and either the setting that bounds it (no cap in
    the price book) or what the cap moved on demand. None when the plan buys no spot."""
    share = spot_share(mix)
    if share is None or share <= 0:
        return None
    eff = effective_spot
    head = (f"purchase: {share:.0%} of the GPU-hours bought are spot ({mix['spot']['gpu_hours']:,.0f} of "
            f"{sum(mix[k]['gpu_hours'] for k in MIX_LAYERS):,.0f}; reserved {mix['reserved']['gpu_hours']:,.0f}, "
            f"on demand {mix['on_demand']['gpu_hours']:,.0f}) because spot, at {price.spot:g} USD per GPU-hour and "
            f"about {eff:.3g} with its interruptions ({rate:g} per GPU-hour, {rec} s lost each), is cheaper than "
            f"reserved ({price.reserved:g}) and on demand ({price.on_demand:g})")
    if price.spot_cap_gpus is None and price.spot_cap_share is None:
        return head + ("; the price book sets no spot cap, so the plan assumes the cloud sells all of it: set "
                       "prices.<gpu model>.spot_cap_share or spot_cap_gpus to what the account can get")
    return head + (f"; the price book's spot cap moved {spot_refused_gpu_hours:,.0f} GPU-hours on demand"
                   if spot_refused_gpu_hours > 0 else "; within the price book's spot cap")
