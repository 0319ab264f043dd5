"""Fresh hourly forecasts for the training top-up: the next hour as the plan forecasts it, without refitting.

The top-up decides one hour at a time. The plan sizes the next hour from its own forecast's first
hour (:func:`optimizer.plan.capacity.capacity_plan`), and a dispatcher that refreshes capplan's forecast
every hour reads the same thing: the ``1h`` lead band, which the combination builds from the
hourly tier and persistence alone (:data:`forecasting.combining.weights.PRIOR_MEMBERS`; on step-shaped
GPU demand the hourly ETS forecasts the last value wherever it cannot beat it,
:mod:`forecasting.tiers.hourly_ets`). The replay scores that decision, so it reads that band too.

Rolling origins of training pools are 4 hours apart (:func:`capplan.run.stages.forecast.origin_map`),
so the latest forecast before an hour was issued 1 to 5 hours earlier, and its rows for the hour
itself lie in the ``24h`` band. Those rows carry the day tier's shape (the daily LSTM and the
robust levels), which the plan never uses for the next hour, and which moves with the LSTM's seed,
enough to flip whole-GPU top-up hours. They also forecast the hour's maximum less well than the last
value (``python -m benchmarks fresh-hour``; the figures: docs/method.md, "Measured on the sample: fresh
hourly forecasts").

So the fresh forecast of the hour starting at ``h`` is the latest forecast's own first hour (its
``1h`` band, leads ``(0, 1 h]`` after its origin ``o``), moved to the newest observation, as the
level equation of exponential smoothing with smoothing weight 1 moves a level (Hyndman &
Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed., section 8.1)::

    fresh_q = y(newest) + max over the band of (F_q(o + lead) - y(o))

for every quantile ``q``, clipped at 0. ``y(o)`` is the last observation at or before ``o`` (what the
forecast was issued from); the newest observation is the last step that ended at least one step
before ``h`` (a scrape and sync interval of slack). Where the band is persistence, as on every
training pool of the sample, the fresh p50 is the newest observation and each quantile keeps the
band's calibrated width; where the hourly tier forecasts a change, the change is kept. No model is
refitted, and nothing later than the hour's start is used.

Limit: the band's widths are the hourly tier's. A spike kept as demand (:mod:`capplan.sources.implausible`
keeps a suspect value with a warning) inflates the hourly ETS's Gaussian sigma, and with it every
fresh quantile above p50, until the spike leaves the tier's fit window.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.types import QCOLS
from optimizer.engine.replay_core import latest_before

FIRST_HOUR = pd.Timedelta("1h")  # the 1h lead band (forecasting.combining.buckets.BANDS)


def refreshed_hour_max(forecasts: pd.DataFrame, times: pd.DatetimeIndex, hour_starts: pd.DatetimeIndex,
                       actual: pd.Series) -> dict[str, np.ndarray]:
    """Per time step, each quantile's fresh forecast for its hour (module docstring), in GPUs.

    ``forecasts``: rolling rows (``issued_at, timestamp`` and the quantile columns ``p50 ... p99``)
    of one series; ``times``: the replay's steps; ``hour_starts``: the hours they fall in;
    ``actual``: demand (GPUs) indexed by timestamp on the same grid. Returns quantile column ->
    float array aligned with ``times``: NaN in an hour with no forecast issued before it or with
    no ``1h`` band rows in that forecast; the band as issued where nothing was observed yet (at
    the forecast's origin or before the hour).
    """
    out = {q: np.full(len(times), np.nan) for q in QCOLS}
    if forecasts.empty or len(times) < 2:
        return out
    step = times[1] - times[0]
    issued, k_of = latest_before(forecasts, hour_starts)
    by_issue = {k: g.set_index("timestamp") for k, g in forecasts.groupby("issued_at")}
    known = actual.dropna()
    pidx = hour_starts.searchsorted(times, side="right") - 1
    for i, hs in enumerate(hour_starts):
        if k_of[i] < 0:
            continue
        o = issued[k_of[i]]
        g = by_issue[o]
        band = g[(g.index > o) & (g.index <= o + FIRST_HOUR)]
        at_o = known[known.index <= o]
        seen = known[known.index <= hs - 2 * step]
        if band.empty:
            continue
        moved = float(seen.iloc[-1]) - float(at_o.iloc[-1]) if len(at_o) and len(seen) else 0.0  # else as issued
        mask = pidx == i
        for q in QCOLS:
            out[q][mask] = max(0.0, float(band[q].max()) + moved)
    return out
