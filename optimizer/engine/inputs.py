"""Replay inputs: one series' demand and its decision-time forecast lookups on a window.

:func:`replay_input` turns a history slice and the combined rolling-origin
forecasts into the :class:`optimizer.engine.replay_core.ReplayInput` the simulator steps
through. Decision inputs come only from forecasts issued before each decision
(docs/method.md, "Replay simulator"):

* training pools: per week the mean, per day and per hour the maximum of the
  latest forecast issued before the period starts
  (:func:`optimizer.engine.replay.period_lookup`), per day the newsvendor level
  (:func:`optimizer.training.newsvendor.period_level_lookup`) and the calibrated level
  (:mod:`optimizer.training.calibrated_day`); the hourly top-up's maxima
  come from the latest forecast's first hour moved to the newest observation
  (:func:`optimizer.training.fresh_hour.refreshed_hour_max`), as the plan forecasts the
  next hour and a dispatcher refreshing its forecast every hour would see it;
* inference services: the latest forecast issued before each step, its
  first 12 five-minute steps (1 h, the pre-scaling horizon). The demand is
  replayed at the data's native resolution (:func:`native_grid`: 1-minute
  inputs stay 1-minute; the forecasts stay on their 5-minute grid).

Used by the pipeline's search stage and by the dashboard's what-if.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.regularise import regularise
from forecasting.types import QCOLS, STEP, SeriesMeta
from optimizer.book.prices import GpuPrice, price_for
from optimizer.book.purchase import spot_terms
from optimizer.engine.replay_core import ReplayInput, latest_before, period_lookup
from optimizer.training.calibrated import calibrated_hour_max
from optimizer.training.calibrated_day import calibrated_day_level
from optimizer.training.fresh_hour import refreshed_hour_max
from optimizer.training.newsvendor import critical_ratios, period_level_lookup, redo_per_spot_hour


def median_spacing(frame: pd.DataFrame) -> pd.Timedelta | None:
    """The median spacing of one series' distinct ``timestamp`` values (None with fewer than 3):
    its sampling step, robust to gaps and outages."""
    ts = pd.DatetimeIndex(frame["timestamp"]).sort_values().unique()
    if len(ts) < 3:
        return None
    return pd.Series(ts).diff().dropna().median()


def native_grid(frame: pd.DataFrame) -> pd.DataFrame | None:
    """One series' raw samples (``series_id, timestamp, value``) on its own grid
    when it is sampled finer than 5 minutes (the median spacing, whole seconds,
    regularised by :func:`forecasting.regularise.regularise` at that step);
    None when it is not (the 5-minute grid is then native)."""
    step = median_spacing(frame)
    if step is None or step >= STEP or step < pd.Timedelta("1s"):
        return None
    g, _ = regularise(frame, step=f"{int(step.total_seconds())}s")
    return g.reset_index(drop=True)


def replay_input(history: pd.DataFrame, combined: pd.DataFrame, meta: SeriesMeta, price_book: dict[str, GpuPrice],
                 start: pd.Timestamp, end: pd.Timestamp, interruption_rate: float = 0.01, recovery_s: int = 1800,
                 spot_outage: str = "replacement", replacement_s: int = 90) -> tuple[ReplayInput, list[str]]:
    """The replay input of one series on ``[start, end]`` and notes on its fallbacks.

    ``history``: the series' rows of a history frame on the 5-minute grid
    (``timestamp``, ``value``, sorted); ``combined``: its combined rolling
    forecasts (forecast frame); ``meta``: its kind, GPU model and GPUs per
    replica; ``price_book``: GPU model -> USD per GPU-hour
    (:func:`optimizer.book.prices.price_for` states a fallback price in the notes);
    ``interruption_rate`` (per spot GPU-hour) and ``recovery_s`` price the
    spot risk into the newsvendor ratio (:func:`optimizer.training.newsvendor.critical_ratios`);
    ``spot_outage`` and ``replacement_s`` (seconds) say what an interruption costs in the training
    replay (:func:`optimizer.engine.replay.spot_outage`); under ``replacement`` ``ReplayInput.spot_redo`` is
    the expected redone work per spot GPU-hour, which the perfect-foresight limit pays
    (:mod:`optimizer.rivals.perfect_foresight`).
    """
    ts = pd.DatetimeIndex(history["timestamp"])
    m = (ts >= start) & (ts <= end)
    times = ts[m]
    price, note = price_for(price_book, meta.gpu_model)
    step_s = int(pd.Series(ts).diff().median().total_seconds()) if len(ts) > 1 else int(STEP.total_seconds())
    inp = ReplayInput(times=times, demand=history["value"].to_numpy()[m], step_s=step_s,
                      fc_step_s=int(STEP.total_seconds()), price=price,
                      gpus_per_unit=meta.gpus_per_replica if meta.kind == "inference" else 1.0,
                      history_before=history["value"].to_numpy()[ts < start], spot_outage=spot_outage,
                      replacement_s=replacement_s)
    if spot_outage == "replacement":  # the limit pays the expected redone work too (optimizer.rivals.perfect_foresight)
        inp.spot_redo = redo_per_spot_hour(*spot_terms(price, interruption_rate, recovery_s))
    notes = [note] if note else []
    comb = combined
    if meta.kind == "training":
        inp.quota = meta.quota_gpus  # scored uncapped; optimizer.book.purchase_check holds the recommendation to it
        week_starts = pd.date_range(start, end, freq="7D")
        day_starts = pd.date_range(start, end, freq="1D")
        hour_starts = pd.date_range(start, end, freq="1h")
        inp.week_mean = period_lookup(comb, times, week_starts, pd.Timedelta("7D"), "mean")
        inp.day_max = period_lookup(comb, times, day_starts, pd.Timedelta("1D"), "max")
        ratio = critical_ratios(price, interruption_rate, recovery_s)["spot"]
        inp.day_level = period_level_lookup(comb, times, day_starts, pd.Timedelta("1D"), pd.Timedelta("1h"), ratio)
        actual = pd.Series(history["value"].to_numpy(), index=ts)
        inp.hour_max = refreshed_hour_max(comb, times, hour_starts, actual)
        day_floor = lambda hours: np.ceil(calibrated_day_level(  # noqa: E731  the rule's day layer under a95
            comb, actual, hours, hours[0], hours[-1], ratio, meta.timezone).level - 1e-9)
        calibrated, inp.topup_margin, n_fallback = calibrated_hour_max(comb, actual, times, start, end, day_floor)
        inp.hour_max.update(calibrated)
        cal = calibrated_day_level(comb, actual, times, start, end, ratio, meta.timezone)
        inp.day_calibrated, n_days, inp.day_errors = cal.level, cal.fell_back, cal.next_errors
        if cal.untyped:
            notes.append(f"replay: the calibrated daily level (optimizer.training.calibrated_day) pooled the past "
                         f"errors of {cal.untyped} day(s) of the window without the weekday/weekend split: one day "
                         "type had less than a day of errors in the week before, or that week's demand was "
                         "intermittent")
        if n_days:
            days = f"{n_days} days of the window; those days" if n_days != 1 else "1 day of the window; that day"
            notes.append(f"replay: the calibrated daily level (optimizer.training.calibrated_day) had less than a day "
                         f"of past errors for {days} used the p90 newsvendor level instead")
        if n_fallback:
            notes.append(f"replay: the calibrated top-up (optimizer.training.calibrated) had less than a day of past "
                         f"errors for {n_fallback} hours of the window; those hours used the fresh p90 instead")
        if any(np.isnan(v).any() for v in inp.week_mean.values()):
            notes.append("replay: no weekly forecast before part of the window; the last observed demand was used")
    else:
        # forecasts issued after the window's last step serve no step of it; leaving them out keeps the
        # tuning window's input unchanged when new data arrives (capplan.run.cache reuses its tuned policy)
        hr = comb[((comb["timestamp"] - comb["issued_at"]) <= pd.Timedelta("1h")) & (comb["issued_at"] <= end)]
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
