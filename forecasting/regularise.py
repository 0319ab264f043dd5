"""Stage 1: put every series on a fixed, sorted grid.

Rules (docs/method.md, "Data contracts"):

* exact duplicate rows are dropped; conflicting duplicates (same series and
  timestamp, different values) are aggregated with ``max`` — a capacity planner
  must hold the larger reading;
* samples are aggregated to the grid step with ``max`` (like PromQL
  ``max_over_time(x[step])``);
* gaps of at most ``max_gap_fill`` grid points are filled by linear
  interpolation; longer gaps stay NaN (missing, not zero demand);
* a cluster-wide outage — at one grid point every series with at least
  ``outage_min_series`` members reads exactly 0 while the same series were
  non-zero just before — is marked NaN for all series, because an exporter or
  scrape failure must not be learned as demand;
* negative values are clipped to 0 (demand cannot be negative) and counted.

The returned :class:`RegulariseReport` lists what was changed, per series, so
that the pipeline can state it in ``report.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecasting.types import HISTORY_COLUMNS


@dataclass
class RegulariseReport:
    """What :func:`regularise` changed. All counts are grid points, per series."""

    exact_duplicates: int = 0
    conflicting_duplicates: dict[str, int] = field(default_factory=dict)
    negatives_clipped: dict[str, int] = field(default_factory=dict)
    gaps_filled: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    outage_points: int = 0
    outage_by_series: dict[str, int] = field(default_factory=dict)

    def notes(self, series_id: str) -> list[str]:
        """Human-readable lines for one series (empty when nothing changed)."""
        out = []
        if self.conflicting_duplicates.get(series_id):
            out.append(f"regularise: {self.conflicting_duplicates[series_id]} timestamps had several different "
                       "values; the largest was kept (demand is a peak)")
        if self.negatives_clipped.get(series_id):
            out.append(f"regularise: {self.negatives_clipped[series_id]} negative values clipped to 0")
        if self.gaps_filled.get(series_id):
            out.append(f"regularise: {self.gaps_filled[series_id]} points in short gaps interpolated")
        if self.outage_by_series.get(series_id):
            out.append(f"regularise: {self.outage_by_series[series_id]} points of a cluster-wide all-zero outage "
                       "marked missing")
        if self.missing.get(series_id):
            out.append(f"regularise: {self.missing[series_id]} points missing (long gaps/outages), not used as demand")
        return out


def regularise(
    history: pd.DataFrame,
    step: str = "5min",
    max_gap_fill: int = 3,
    outage_min_series: int = 3,
) -> tuple[pd.DataFrame, RegulariseReport]:
    """Regularise a tidy history frame onto a fixed grid.

    Parameters
    ----------
    history: frame with columns ``series_id``, ``timestamp`` (tz-aware UTC),
        ``value`` (float, GPUs or replicas); any order, duplicates allowed.
    step: grid step as a pandas offset alias (default ``5min``, the hourly
        tier's resolution).
    max_gap_fill: longest run of missing grid points that is interpolated.
    outage_min_series: least number of series that must all read 0 at once to
        call it a cluster-wide outage.

    Returns
    -------
    ``(frame, report)`` where ``frame`` has the history columns, sorted by
    ``series_id, timestamp``, one row per grid point from each series' first to
    last sample, NaN where missing.

    Raises
    ------
    ValueError: if ``timestamp`` is not tz-aware.
    """
    rep = RegulariseReport()
    if history.empty:
        return history[HISTORY_COLUMNS].copy(), rep
    h = history[HISTORY_COLUMNS].copy()
    if getattr(h["timestamp"].dt, "tz", None) is None:
        raise ValueError("regularise: timestamp must be tz-aware UTC")
    h["timestamp"] = h["timestamp"].dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
    h["value"] = h["value"].astype("float64")
    n0 = len(h)
    h = h.drop_duplicates()
    rep.exact_duplicates = n0 - len(h)
    dup = h.duplicated(["series_id", "timestamp"], keep=False)
    if dup.any():
        rep.conflicting_duplicates = (h.loc[dup, ["series_id", "timestamp"]].drop_duplicates()
                                      .groupby("series_id").size().astype(int).to_dict())

    neg = h["value"] < 0
    if neg.any():
        rep.negatives_clipped = h.loc[neg].groupby("series_id").size().astype(int).to_dict()
        h.loc[neg, "value"] = 0.0

    # 1. each series on its grid (conflicting duplicates and sub-step samples -> max), no filling yet
    raw = {sid: g.set_index("timestamp")["value"].sort_index().resample(step).max()
           for sid, g in h.groupby("series_id", sort=True)}

    # 2. cluster-wide all-zero outages, found on the readings themselves (before any interpolation)
    bad_ts = pd.DatetimeIndex([], tz="UTC")
    if len(raw) >= outage_min_series:
        wide = pd.concat(raw, axis=1)
        present = wide.notna()
        all_zero = (wide.fillna(0.0) == 0.0).all(axis=1) & (present.sum(axis=1) >= outage_min_series)
        busy_before = wide.fillna(0.0).sum(axis=1).shift(1).fillna(0.0) > 0
        run = (all_zero != all_zero.shift(1)).cumsum()
        # a run of all-zero points counts as an outage only when the cluster was busy just before
        outage = all_zero & (all_zero & busy_before).groupby(run).transform("max")
        if outage.any():
            rep.outage_points = int(outage.sum())
            bad_ts = wide.index[outage.to_numpy()]

    # 3. mark outages missing, fill short gaps only, never across an outage
    parts = []
    for sid, s in raw.items():
        hit = s.index.isin(bad_ts) & s.notna().to_numpy()
        if hit.any():
            rep.outage_by_series[str(sid)] = int(hit.sum())
            s = s.copy()
            s[hit] = np.nan
        missing_before = s.isna()
        filled = s.interpolate(method="linear", limit=max_gap_fill, limit_area="inside")
        # only fill runs that are short: interpolate(limit=) fills the start of long runs too
        run_id = (~missing_before).cumsum()
        run_len = missing_before.groupby(run_id).transform("sum")
        filled[(missing_before & (run_len > max_gap_fill)) | s.index.isin(bad_ts)] = np.nan
        n_filled = int((missing_before & filled.notna()).sum())
        if n_filled:
            rep.gaps_filled[str(sid)] = n_filled
        parts.append(pd.DataFrame({"series_id": sid, "timestamp": filled.index, "value": filled.to_numpy()}))
    out = pd.concat(parts, ignore_index=True)
    miss = out[out["value"].isna()].groupby("series_id").size()
    rep.missing = {str(k): int(v) for k, v in miss.items()}
    out["timestamp"] = out["timestamp"].astype("datetime64[ns, UTC]")
    return out.sort_values(["series_id", "timestamp"], ignore_index=True), rep


def to_hourly(history: pd.DataFrame) -> pd.DataFrame:
    """Aggregate a regular history frame to 1 h.

    Columns ``series_id, timestamp, value, mean, last``: ``value`` is the hour's
    ``max`` (its peak, what a capacity reading of the hour must cover; the default
    Prophet peer forecasts it), ``mean`` the mean of its 5-minute points and
    ``last`` its last non-missing 5-minute point. The evaluation and the
    combination score every forecast against 5-minute values, and a constant
    forecast at the hour's peak is 3-7 % worse than the last 5-minute value at
    24 h on the sample (README "Forecasts"), so the daily and weekly tiers forecast
    ``mean`` from the reference ``last`` (:func:`hourly_columns`). NaN points are
    ignored; an hour with no data stays NaN in all three.
    """
    parts = []
    for sid, g in history.groupby("series_id", sort=True):
        r = g.set_index("timestamp")["value"].resample("1h")
        parts.append(pd.DataFrame({"series_id": sid, "timestamp": r.max().index, "value": r.max().to_numpy(),
                                   "mean": r.mean().to_numpy(), "last": r.last().to_numpy()}))
    if not parts:
        return history.iloc[:0].assign(mean=pd.Series(dtype="float64"), last=pd.Series(dtype="float64"))
    return pd.concat(parts, ignore_index=True)


def hourly_columns(history: pd.DataFrame) -> tuple[str, str]:
    """``(level, reference)`` column names of an hourly history frame for the tiers:
    ``("mean", "last")`` when :func:`to_hourly` made it, ``("value", "value")`` for a
    plain ``series_id, timestamp, value`` frame (hourly data given as such: the
    value is then both the hour's level and its last reading)."""
    if "mean" in history.columns and "last" in history.columns:
        return "mean", "last"
    return "value", "value"
