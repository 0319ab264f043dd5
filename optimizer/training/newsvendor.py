"""Cost-optimal layers: newsvendor critical ratios from the price book, and
the decision inputs (lookups) they need.

A GPU bought on a slower, cheaper layer is worth it when it would otherwise
be bought on the faster layer above it often enough (the newsvendor critical
ratio; e.g. Porteus, *Foundations of Stochastic Inventory Theory*, 2002, ch. 1):

* a **daily spot** GPU costs ``spot_eff x 24`` per day; the hourly on-demand
  top-up would cost ``on_demand`` for each hour it is needed. So spot is worth
  buying up to the level the day's demand exceeds in at least
  ``spot_eff / on_demand`` of its hours;
* ``spot_eff`` = spot price + the interruption risk: each spot GPU-hour loses
  ``interruption_rate x recovery hours`` GPU-hours, bought back on demand;
* a **weekly reserved** GPU is worth it up to the level the week's daily levels
  exceed in at least ``reserved / spot_eff`` of its days (never, when the
  ratio is above 1: with the default prices spot beats a reservation).

:func:`period_level_lookup` turns a forecast into those levels per decision
period, from the latest forecast issued before the period, so the policy
sizes its layers before any search runs (:class:`optimizer.plan.policy.TrainingParams`
``daily_rule="newsvendor"``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from optimizer.book.prices import GpuPrice
from optimizer.book.purchase import spot_terms
from optimizer.engine.replay_core import period_reduce


def redo_per_spot_hour(interruption_rate: float, recovery_s: int) -> float:
    """GPU-hours of work lost to interruptions per spot GPU-hour (``interruption_rate`` per spot
    GPU-hour x ``recovery_s`` in hours), which the cluster buys back on demand."""
    return float(interruption_rate * recovery_s / 3600.0)


def effective_spot_price(price: GpuPrice, interruption_rate: float, recovery_s: int) -> float:
    """Spot price plus the expected on-demand cost of the GPU-hours that
    interruptions lose (USD per spot GPU-hour)."""
    return float(price.spot + price.on_demand * redo_per_spot_hour(interruption_rate, recovery_s))


def spot_pays(price: GpuPrice, interruption_rate: float = 0.01, recovery_s: int = 1800) -> bool:
    """Whether a spot GPU-hour costs less than an on-demand one once its interruptions are paid
    (:func:`effective_spot_price` below ``price.on_demand``; the GPU model's own interruption terms win,
    :func:`optimizer.book.purchase.spot_terms`). When it does not, the replay and the exported plan buy
    the day's flexible GPUs on demand whatever ``spot_fraction`` says (:func:`spot_split`), so the plan
    asks for what the replayed figures bought."""
    return effective_spot_price(price, *spot_terms(price, interruption_rate, recovery_s)) < price.on_demand


def spot_split(flex, spot_fraction: float, pays: bool):
    """``(on_demand, spot)`` GPUs of a day's flexible layer ``flex`` (scalar or array): ``round(spot_fraction x
    flex)`` on spot when spot pays (:func:`spot_pays`), else none; the rest on demand. The one rule the replay
    (:func:`optimizer.engine.replay.replay_training`) and the plan (:func:`optimizer.plan.capacity.capacity_plan`)
    share."""
    spot = np.round(spot_fraction * np.asarray(flex, float)) if pays else np.zeros_like(np.asarray(flex, float))
    return np.asarray(flex, float) - spot, spot


def critical_ratios(price: GpuPrice, interruption_rate: float = 0.01, recovery_s: int = 1800) -> dict[str, float]:
    """``spot``: share of a day's hours the demand must exceed a level for a
    daily spot GPU at that level to pay; ``reserved``: share of a week's days
    its daily level must exceed for a reservation to pay (ratios, capped at 1). The GPU model's own
    interruption terms win when its price book entry sets them (:func:`optimizer.book.purchase.spot_terms`)."""
    se = effective_spot_price(price, *spot_terms(price, interruption_rate, recovery_s))
    return {"spot": min(1.0, se / price.on_demand), "reserved": min(1.0, price.reserved / se)}


def exceeded_level(values: np.ndarray, share: float) -> float:
    """The highest level that at least ``share`` of ``values`` reach (the
    ``ceil(share x n)``-th largest); 0 for no values."""
    v = np.sort(np.asarray(values, float)[np.isfinite(values)])[::-1]
    if len(v) == 0:
        return 0.0
    k = min(len(v), max(1, math.ceil(share * len(v) - 1e-9)))
    return float(v[k - 1])


def period_level_lookup(forecasts: pd.DataFrame, times: pd.DatetimeIndex, period_starts: pd.DatetimeIndex,
                        period_len: pd.Timedelta, sub: pd.Timedelta, share: float) -> dict[str, np.ndarray]:
    """Per time step, the newsvendor level of its decision period: from the
    latest forecast issued before the period began, the maxima of each
    quantile over the period's ``sub`` intervals (hours of a day), and the
    highest level at least ``share`` of them reach (:func:`exceeded_level`).

    Returns quantile column -> float array aligned with ``times`` (NaN where
    no forecast was available).
    """
    def level(g: pd.DataFrame, q: str, ps: pd.Timestamp) -> float:
        return exceeded_level(g.groupby(((g["timestamp"] - ps) // sub).to_numpy())[q].max().to_numpy(), share)

    return period_reduce(forecasts, times, period_starts, period_len, level)
