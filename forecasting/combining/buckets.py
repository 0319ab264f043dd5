"""Lead bands and lead buckets: the unit the combination and the calibration work in.

Each lead band (``1h``, ``24h``, ``7d``; lead = ``timestamp - issued_at``) is
split into lead buckets (:data:`BUCKETS`, e.g. ``24h:3h-6h``): persistence
wins at five minutes, seasonal and calendar models at days, and the best
model and the width of the errors change within a band. Bands and buckets are
half-open on the left: ``(lo, hi]``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: band -> (lead_lo, lead_hi]
BANDS: dict[str, tuple[pd.Timedelta, pd.Timedelta]] = {
    "1h": (pd.Timedelta(0), pd.Timedelta("1h")),
    "24h": (pd.Timedelta("1h"), pd.Timedelta("24h")),
    "7d": (pd.Timedelta("24h"), pd.Timedelta("7D")),
}
#: the tier built for each band (the tier table of docs/method.md, "Vocabulary")
OWNER = {"1h": "hourly", "24h": "daily", "7d": "weekly"}


def _bucket(band: str, lo: str, hi: str) -> tuple[str, str, pd.Timedelta, pd.Timedelta]:
    return f"{band}:{lo}-{hi}", band, pd.Timedelta(lo), pd.Timedelta(hi)


#: (label, band, lead_lo, lead_hi]: lead buckets, each inside one band.
BUCKETS: tuple[tuple[str, str, pd.Timedelta, pd.Timedelta], ...] = (
    _bucket("1h", "0min", "15min"), _bucket("1h", "15min", "30min"), _bucket("1h", "30min", "1h"),
    _bucket("24h", "1h", "3h"), _bucket("24h", "3h", "6h"), _bucket("24h", "6h", "12h"), _bucket("24h", "12h", "24h"),
    _bucket("7d", "1D", "2D"), _bucket("7d", "2D", "3D"), _bucket("7d", "3D", "5D"), _bucket("7d", "5D", "7D"),
)


def _lead_index(lead, edges: list[tuple[pd.Timedelta, pd.Timedelta]]) -> np.ndarray:
    lead = np.asarray(pd.to_timedelta(np.asarray(lead)).as_unit("ns").asi8)
    out = np.full(len(lead), -1)
    for i, (lo, hi) in enumerate(edges):
        out[(lead > lo.value) & (lead <= hi.value)] = i
    return out


def band_of(lead: pd.Series | pd.TimedeltaIndex) -> np.ndarray:
    """Band name per lead (``timestamp - issued_at``); '' outside every band."""
    names = list(BANDS)
    idx = _lead_index(lead, list(BANDS.values()))
    return np.array([names[i] if i >= 0 else "" for i in idx], dtype=object)


def bucket_of(lead: pd.Series | pd.TimedeltaIndex) -> np.ndarray:
    """Index into :data:`BUCKETS` per lead; -1 outside every bucket."""
    return _lead_index(lead, [(lo, hi) for _, _, lo, hi in BUCKETS])


def buckets_in(band: str) -> list[int]:
    """Indices into :data:`BUCKETS` of the buckets of ``band``."""
    return [i for i, b in enumerate(BUCKETS) if b[1] == band]
