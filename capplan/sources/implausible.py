"""One policy for implausible demand values, applied by every command that reads
history (``plan``, ``backtest`` through :func:`capplan.sources.load_source`;
``ingest`` before it stores a pull).

A value is **implausible** when it is

* not finite (``inf``, ``-inf``; NaN is already a missing value), or
* larger in magnitude than :data:`FACTOR` (one million) times the series'
  median magnitude, and at least :data:`FLOOR` (one million) — e.g. ``1e308``
  in a series of GPU counts. No GPU pool or service grows a million-fold
  within one history; a value like that is a unit or export fault; or
* larger in magnitude than :data:`CEILING` (10^9) whatever the series' median:
  no cluster holds a billion GPUs or replicas, so a series of uniformly huge
  values (every one ``1e300``) is a unit fault too.

Implausible values become **missing** (NaN, a gap: docs/method.md's "NaN marks a
missing point, never demand") and a note per series says how many and the
first one (row and value), so the report records the fallback. They are never
clipped to a bound, which would invent demand.

**Suspect spikes** are values below those bounds but more than
:data:`SPIKE_FACTOR` (1,000) times the series' median *busy* level (the median
magnitude of its non-zero values) and at least :data:`SPIKE_FLOOR` (1,000 GPUs
or replicas): one 900,000 in a pool whose busy steps hold 14 GPUs. They may be
real (a sparse pool's one large burst), so they are **kept** as demand, but a
plan sized on them buys that much capacity, so :func:`spike_warnings` gives one
warning per series (how many, the first value and its row) that the report
puts among the series' warnings. The factor sits far above what real traces
hold (docs/method.md, "Measured on the sample: suspect spikes").

**Negative values** are demand that cannot be: regularising clips them to 0, and
:func:`negative_warnings` gives one warning per series naming the first rows, so the
run says which input rows to fix instead of clipping them silently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FACTOR = 1e6
"""Times the series' median magnitude beyond which a value is implausible."""
FLOOR = 1e6
"""The bound is never below this (series whose median is 0 or tiny)."""
CEILING = 1e9
"""The bound is never above this (no cluster holds a billion GPUs or replicas)."""
SPIKE_FACTOR = 1e3
"""Times the series' median busy level (non-zero magnitudes) beyond which a kept value is a suspect spike."""
SPIKE_FLOOR = 1e3
"""A suspect spike is at least this many GPUs or replicas."""


def bound(values: np.ndarray) -> float:
    """The magnitude beyond which a value of this series is implausible:
    ``min(CEILING, max(FLOOR, FACTOR * median(|finite values|)))``."""
    x = np.abs(values[np.isfinite(values)])
    med = float(np.median(x)) if len(x) else 0.0
    return min(CEILING, max(FLOOR, FACTOR * med))


def spike_bound(values: np.ndarray) -> float:
    """The magnitude beyond which a value of this series is a suspect spike:
    ``max(SPIKE_FLOOR, SPIKE_FACTOR * median(|finite non-zero values|))`` (``inf`` with no
    non-zero value)."""
    x = np.abs(values[np.isfinite(values)])
    x = x[x > 0]
    return max(SPIKE_FLOOR, SPIKE_FACTOR * float(np.median(x))) if len(x) else float("inf")


def _where(frame: pd.DataFrame, i: int, where: str, rows: pd.Series | None) -> str:
    """`` at FILE row N (timestamp)`` for frame position ``i``."""
    at = f" at {where} row {int(rows.iloc[i])}" if rows is not None else (f" in {where}" if where else "")
    return at + f" ({pd.Timestamp(frame['timestamp'].iloc[i]).isoformat()})"


def spike_warnings(frame: pd.DataFrame, where: str = "", rows: pd.Series | None = None) -> dict[str, str]:
    """``series_id -> warning`` for each series with suspect spikes (module docstring); the values are kept.

    ``frame``/``where``/``rows`` as :func:`mask_implausible` (call it on that function's
    output, so masked values are not counted twice). A warning reads ``"data: 1 value(s)
    above 1.4e+04 = 1000 x the series' median busy level (first 900000 at d.csv row 7 (...))
    kept as demand: ..."``.
    """
    out: dict[str, str] = {}
    if frame.empty:
        return out
    v = frame["value"].to_numpy(np.float64)
    for sid, idx in frame.groupby("series_id", sort=True).indices.items():
        x = v[idx]
        b = spike_bound(x)
        big = np.isfinite(x) & (np.nan_to_num(x, nan=0.0) > b)  # a negative value is clipped to 0 later, not bought
        if big.any():
            first = idx[np.flatnonzero(big)[0]]
            out[sid] = (f"data: {int(big.sum())} value(s) above {b:.3g} = 1000 x the series' median busy level "
                        f"(first {v[first]:.6g}{_where(frame, first, where, rows)}) kept as demand: the plan buys "
                        "capacity for them; if they are an export or unit fault, remove them from the input")
    return out


#: how many negative values a warning names (row and timestamp)
NEGATIVE_SHOWN = 3


def negative_warnings(frame: pd.DataFrame, where: str = "", rows: pd.Series | None = None) -> dict[str, str]:
    """``series_id -> warning`` for each series with negative values, naming the first
    :data:`NEGATIVE_SHOWN` (value, row and timestamp). Demand cannot be negative: regularising clips them to 0
    (:func:`forecasting.regularise.regularise`, whose note counts them), so a plan treats them as no demand; a
    negative value is usually an input fault (a counter reset read as a rate, a difference of two series) that
    the user should fix at its source. ``frame``/``where``/``rows`` as :func:`mask_implausible`. A warning reads
    ``"data: 2 negative value(s) clipped to 0 (demand cannot be negative) in d.csv: -3 at row 7 (...), ...; ..."``."""
    out: dict[str, str] = {}
    if frame.empty:
        return out
    v = frame["value"].to_numpy(np.float64)
    for sid, idx in frame.groupby("series_id", sort=True).indices.items():
        neg = idx[np.flatnonzero(np.nan_to_num(v[idx], nan=0.0) < 0)]
        if len(neg):
            first = ", ".join(f"{v[i]:.6g}" + (f" at row {int(rows.iloc[i])}" if rows is not None else "")
                              + f" ({pd.Timestamp(frame['timestamp'].iloc[i]).isoformat()})"
                              for i in neg[:NEGATIVE_SHOWN])
            more = f" and {len(neg) - NEGATIVE_SHOWN} more" if len(neg) > NEGATIVE_SHOWN else ""
            out[sid] = (f"data: {len(neg)} negative value(s) clipped to 0 (demand cannot be negative)"
                        + (f" in {where}" if where else "") + f": {first}{more}; if the input is a rate of a "
                        "counter that reset, or a difference, fix it at its source")
    return out


def mask_implausible(frame: pd.DataFrame, where: str = "",
                     rows: pd.Series | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Replace implausible ``value`` entries with NaN, per ``series_id``.

    ``frame``: history columns (series_id, timestamp, value float64).
    ``where`` names the input in the notes; ``rows`` (same index as
    ``frame``) gives each entry's row number in that input, for the notes.
    Returns (a new frame, notes such as ``"a: 1 implausible value(s) (first:
    1e+308 at file.csv row 7) treated as missing"``). The input is not changed.
    """
    notes: list[str] = []
    if frame.empty:
        return frame, notes
    out = frame.copy()
    v = out["value"].to_numpy(np.float64, copy=True)
    bad_all = np.zeros(len(out), bool)
    for sid, idx in out.groupby("series_id", sort=True).indices.items():
        x = v[idx]
        bad = np.isinf(x) | (np.abs(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)) > bound(x))
        if bad.any():
            first = idx[np.flatnonzero(bad)[0]]
            at = _where(out, first, where, rows)
            notes.append(f"{sid}: {int(bad.sum())} implausible value(s) (non-finite, or beyond {bound(x):.3g}: "
                         f"1e6 x the median magnitude, at least 1e6 and at most 1e9; first {v[first]:.6g}{at}) "
                         "treated as missing")
            bad_all[idx[bad]] = True
    if bad_all.any():
        v[bad_all] = np.nan
        out["value"] = v
    return out, notes
