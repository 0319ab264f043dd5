"""Fresh hourly forecasts for the training top-up, without refitting.

Rolling origins of training pools are 4 hours apart (:func:`capplan.pipeline.origin_map`),
so the latest forecast before an hour is 1 to 5 hours old. A live dispatcher
issues one every hour. The cheap equivalent used here is a level update: the
latest forecast is shifted by its error on the newest observed step, as the
level equation of an exponential-smoothing model with smoothing weight 1 would
do (Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed.,
section 8.1) — no model is refitted, and nothing later than the hour's start
is used.

Timeline for the hour starting at ``h``: the newest observed step is the one
that ended at least one step before ``h`` (a scrape and sync interval of
slack); the forecast is the latest issued strictly before ``h``; the error is
``observed - forecast p50`` at that step when the forecast covers it (0
otherwise); every quantile is shifted by it and clipped at 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.types import QCOLS
from optimizer.replay import latest_before


def refreshed_hour_max(forecasts: pd.DataFrame, times: pd.DatetimeIndex, hour_starts: pd.DatetimeIndex,
                       actual: pd.Series) -> dict[str, np.ndarray]:
    """Per time step, each quantile's max over its hour of the level-updated
    forecast (module docstring). ``forecasts``: rolling rows (``issued_at,
    timestamp`` and the quantile columns) of one series; ``actual``: demand
    (GPUs) indexed by timestamp on the same grid. Returns quantile column ->
    float array aligned with ``times`` (NaN where no forecast was issued
    before the hour)."""
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
        g = by_issue[issued[k_of[i]]]
        hour = g[(g.index >= hs) & (g.index < hs + pd.Timedelta("1h"))]
        if hour.empty:
            continue
        seen = known[known.index <= hs - 2 * step]
        shift = 0.0
        if len(seen) and seen.index[-1] in g.index:
            shift = float(seen.iloc[-1] - g.at[seen.index[-1], "p50"])
        mask = pidx == i
        for q in QCOLS:
            out[q][mask] = max(0.0, float(hour[q].max()) + shift)
    return out
