"""Data contracts shared by every stage (see docs/method.md, "Data contracts").

History frame
    columns ``series_id`` (str), ``timestamp`` (``datetime64[ns, UTC]``),
    ``value`` (float64, in the series' ``unit``: GPUs or replicas). One row per
    series and grid point after :func:`forecasting.regularise.regularise`; NaN
    marks a missing point (gap or outage), never demand.

Forecast frame
    columns ``series_id``, ``tier``, ``issued_at`` (last history point the model
    saw, UTC), ``timestamp`` (target time, UTC), ``p50``, ``p90``, ``p95``,
    ``p99`` (float64, same unit as the history, never NaN or negative).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

STEP = pd.Timedelta("5min")
"""The grid every series is regularised to (docs/method.md: 5-minute history); forecasts and replays use it."""
STEP_S = int(STEP.total_seconds())
""":data:`STEP` in seconds (300)."""
STEPS_PER_DAY = int(pd.Timedelta("1D") / STEP)
"""5-minute steps per day (288): the daily season, and MASE's seasonal-naive lag."""
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
QCOLS: tuple[str, ...] = ("p50", "p90", "p95", "p99")
HISTORY_COLUMNS = ["series_id", "timestamp", "value"]
FORECAST_COLUMNS = ["series_id", "tier", "issued_at", "timestamp", *QCOLS]

Kind = Literal["training", "inference"]
Unit = Literal["gpu", "replica"]


class SeriesMeta(BaseModel):
    """Metadata of one demand series, kept beside the history frame.

    Attributes
    ----------
    kind: ``training`` (a GPU pool that queues jobs) or ``inference`` (a service
        scaled in replicas).
    unit: ``gpu`` or ``replica``.
    gpu_model: key into the price book, e.g. ``A100-80GB``.
    timezone: IANA zone used for calendar features (hour of day, holidays).
    quota_gpus: the pool's current capacity (training), if known.
    gpus_per_replica: GPUs one replica holds (inference), default 1.
    """

    model_config = ConfigDict(extra="allow")

    kind: Kind = "training"
    unit: Unit = "gpu"
    gpu_model: str = "default"
    timezone: str = "UTC"
    quota_gpus: float | None = None
    gpus_per_replica: float = Field(default=1.0, gt=0)


def empty_forecast() -> pd.DataFrame:
    """An empty frame with the forecast columns and dtypes."""
    f = pd.DataFrame({c: pd.Series(dtype="float64") for c in FORECAST_COLUMNS})
    f["series_id"] = f["series_id"].astype("object")
    f["tier"] = f["tier"].astype("object")
    f["issued_at"] = pd.Series(dtype="datetime64[ns, UTC]")
    f["timestamp"] = pd.Series(dtype="datetime64[ns, UTC]")
    return f


def sanitise_quantiles(q: pd.DataFrame, upper) -> pd.DataFrame:
    """Make a quantile block safe: no NaN, no negatives, non-crossing, bounded.

    ``q`` has the columns :data:`QCOLS`. NaN becomes the row's p50 (or 0),
    values are clipped to ``[0, upper]`` (``upper`` is a sane multiple of the
    history's range, chosen by the caller: one number, or one per row), and each quantile is raised to at
    least the one below it (a running maximum from ``p50`` up). Unlike sorting
    (Chernozhukov et al. 2010, "Quantile and probability curves without
    crossing") this never moves ``p50``, the point forecast that MASE and
    sMAPE score, when an upper quantile was combined or calibrated below it.
    """
    arr = q[list(QCOLS)].to_numpy(dtype="float64", copy=True)
    p50 = arr[:, 0]
    p50[~pd.notna(p50)] = 0.0
    for j in range(1, arr.shape[1]):
        col = arr[:, j]
        bad = ~pd.notna(col)
        col[bad] = p50[bad]
    up = np.asarray(upper, dtype="float64")
    arr = arr.clip(0.0, up[:, None] if up.ndim else up)
    arr = np.maximum.accumulate(arr, axis=1)
    out = q.copy()
    out[list(QCOLS)] = arr
    return out
