"""Replay inputs: one series' demand and its decision-time forecast lookups on a window.

:func:`replay_input` turns a history slice and the combined rolling-origin
forecasts into the :class:`optimizer.replay.ReplayInput` the simulator steps
through. Decision inputs come only from forecasts issued before each decision
(DESIGN.md, "Replay simulator"):

* training pools: per week the mean, per day and per hour the maximum of the
  latest forecast issued before the period starts
  (:func:`optimizer.replay.period_lookup`);
* inference services: the latest forecast issued at or before each step, its
  first 12 steps (1 h, the pre-scaling horizon).

Used by the pipeline's search stage and by the dashboard's what-if.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.types import QCOLS, SeriesMeta
from optimizer.prices import GpuPrice, price_for
from optimizer.replay import ReplayInput, latest_before, period_lookup

STEP = pd.Timedelta("5min")


def replay_input(history: pd.DataFrame, combined: pd.DataFrame, meta: SeriesMeta, price_book: dict[str, GpuPrice],
                 start: pd.Timestamp, end: pd.Timestamp) -> tuple[ReplayInput, list[str]]:
    """The replay input of one series on ``[start, end]`` and notes on its fallbacks.

    ``history``: the series' rows of a history frame on the 5-minute grid
    (``timestamp``, ``value``, sorted); ``combined``: its combined rolling
    forecasts (forecast frame); ``meta``: its kind, GPU model and GPUs per
    replica; ``price_book``: GPU model -> USD per GPU-hour
    (:func:`optimizer.prices.price_for` states a fallback price in the notes).
    """
    ts = pd.DatetimeIndex(history["timestamp"])
    m = (ts >= start) & (ts <= end)
    times = ts[m]
    price, note = price_for(price_book, meta.gpu_model)
    inp = ReplayInput(times=times, demand=history["value"].to_numpy()[m], step_s=int(STEP.total_seconds()),
                      price=price, gpus_per_unit=meta.gpus_per_replica if meta.kind == "inference" else 1.0,
                      history_before=history["value"].to_numpy()[ts < start])
    notes = [note] if note else []
    comb = combined
    if meta.kind == "training":
        week_starts = pd.date_range(start, end, freq="7D")
        day_starts = pd.date_range(start, end, freq="1D")
        hour_starts = pd.date_range(start, end, freq="1h")
        inp.week_mean = period_lookup(comb, times, week_starts, pd.Timedelta("7D"), "mean")
        inp.day_max = period_lookup(comb, times, day_starts, pd.Timedelta("1D"), "max")
        # the hourly top-up: the latest forecast issued before each hour (rolling origins of training
        # pools are 4 h apart, so its lead is 1-5 h in the replay; a live run refreshes it every hour)
        inp.hour_max = period_lookup(comb, times, hour_starts, pd.Timedelta("1h"), "max")
        if any(np.isnan(v).any() for v in inp.week_mean.values()):
            notes.append("replay: no weekly forecast before part of the window; the last observed demand was used")
    else:
        hr = comb[(comb["timestamp"] - comb["issued_at"]) <= pd.Timedelta("1h")]
        if len(hr):
            issued, idx = latest_before(hr, times)
            hr = hr.sort_values(["issued_at", "timestamp"])
            n_o = len(issued)
            for q in QCOLS:
                arr = np.full((n_o, 12), np.nan)
                for k, (_, gg) in enumerate(hr.groupby("issued_at", sort=True)):
                    v = gg[q].to_numpy()[:12]
                    arr[k, : len(v)] = v
                inp.hourly_fc[q] = arr
            inp.hourly_origin_idx = idx
            o_times = issued[np.clip(idx, 0, None)]
            inp.hourly_offset = np.asarray((times - o_times) // STEP, dtype=int)
    return inp, notes
