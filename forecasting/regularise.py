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
from typing import Callable

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


def _grid_of(codes: np.ndarray, bins: np.ndarray, step_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The complete grid of each series (``codes``: series number per row, sorted series numbers need
    not be; ``bins``: grid points in ns): ``(series number, grid point, row of the first input at it
    or -1)`` for every step from each series' first to last grid point, sorted by series then time.
    Input rows must be unique per (series, grid point). Linear in rows and grid points."""
    k = int(codes.max()) + 1 if len(codes) else 0
    first = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(k, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, codes, bins)
    np.maximum.at(last, codes, bins)
    n = (last - first) // step_ns + 1
    offsets = np.concatenate([[0], np.cumsum(n)[:-1]])
    g_codes = np.repeat(np.arange(k), n)
    g_bins = first[g_codes] + (np.arange(int(n.sum())) - offsets[g_codes]) * step_ns
    where = np.full(len(g_bins), -1, dtype=np.int64)
    where[offsets[codes] + (bins - first[codes]) // step_ns] = np.arange(len(codes))
    return g_codes, g_bins, where


def _fill_short_gaps(v: np.ndarray, codes: np.ndarray, max_gap_fill: int, blocked: np.ndarray) -> np.ndarray:
    """``v`` (grid values sorted by series then time) with each run of at most ``max_gap_fill``
    missing points that has an observed point on both sides in the same series filled by linear
    interpolation between them (by position: the grid is regular, as pandas' ``interpolate(method=
    "linear", limit_area="inside")``), except the points of ``blocked`` (outages). Vectorised."""
    n = len(v)
    pos = np.arange(n)
    ok = ~np.isnan(v)
    prev = np.maximum.accumulate(np.where(ok, pos, -1))
    nxt = np.minimum.accumulate(np.where(ok, pos, n)[::-1])[::-1]
    safe_prev, safe_next = np.clip(prev, 0, n - 1), np.clip(nxt, 0, n - 1)
    inside = (~ok & (prev >= 0) & (nxt < n) & (codes[safe_prev] == codes) & (codes[safe_next] == codes)
              & (nxt - prev - 1 <= max_gap_fill) & ~blocked)
    out = v.copy()
    i = pos[inside]
    p, q = prev[inside], nxt[inside]
    out[i] = v[p] + (v[q] - v[p]) * (i - p) / (q - p)
    return out


def regularise(
    history: pd.DataFrame,
    step: str = "5min",
    max_gap_fill: int = 3,
    outage_min_series: int = 3,
    progress: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, RegulariseReport]:
    """Regularise a tidy history frame onto a fixed grid.

    Vectorised over all series at once (no per-series loop): time and memory grow linearly with
    rows and grid points, so 10,000 short series cost about what one long series of the same
    total length does.

    Parameters
    ----------
    history: frame with columns ``series_id``, ``timestamp`` (tz-aware UTC),
        ``value`` (float, GPUs or replicas); any order, duplicates allowed.
    step: grid step as a pandas offset alias (default ``5min``, the hourly
        tier's resolution). Grid points are aligned to midnight UTC of each series'
        first day, as pandas' ``resample`` (``origin="start_day"``) does.
    max_gap_fill: longest run of missing grid points that is interpolated.
    outage_min_series: least number of series that must all read 0 at once to
        call it a cluster-wide outage.
    progress: told a line as each phase starts (grid, outages, gaps).

    Returns
    -------
    ``(frame, report)`` where ``frame`` has the history columns, sorted by
    ``series_id, timestamp``, one row per grid point from each series' first to
    last sample, NaN where missing.

    Raises
    ------
    ValueError: if ``timestamp`` is not tz-aware.
    """
    told = progress or (lambda line: None)
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
    codes, ids = pd.factorize(h["series_id"], sort=True)
    told(f"{len(ids)} series, {len(h)} rows onto the {step} grid")
    step_ns = int(pd.Timedelta(step).value)
    ts = pd.DatetimeIndex(h["timestamp"]).asi8  # ns since the epoch (UTC)
    day = 86400 * 10**9
    first = np.full(len(ids), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, codes, ts)
    origin = (first - first % day)[codes]  # midnight UTC of each series' first day (resample's start_day)
    bins = origin + (ts - origin) // step_ns * step_ns
    agg = (pd.DataFrame({"c": codes, "b": bins, "v": h["value"].to_numpy()})
           .groupby(["c", "b"], sort=False)["v"].max())
    a_codes = agg.index.get_level_values("c").to_numpy()
    a_bins = agg.index.get_level_values("b").to_numpy()
    g_codes, g_bins, where = _grid_of(a_codes, a_bins, step_ns)
    v = np.full(len(g_bins), np.nan)
    v[where >= 0] = agg.to_numpy()[where[where >= 0]]

    # 2. cluster-wide all-zero outages, found on the readings themselves (before any interpolation)
    bad = np.zeros(len(v), dtype=bool)
    if len(ids) >= outage_min_series:
        told("cluster-wide outages")
        at = pd.DataFrame({"b": g_bins, "v": v}).groupby("b", sort=True)["v"]
        present, top = at.count(), at.max()  # values are >= 0 here: the top is 0 exactly when all are 0
        all_zero = (present >= outage_min_series) & (top.fillna(0.0) == 0.0)
        busy_before = top.fillna(0.0).shift(1).fillna(0.0) > 0
        run = (all_zero != all_zero.shift(1)).cumsum()
        # a run of all-zero points counts as an outage only when the cluster was busy just before
        outage = all_zero & (all_zero & busy_before).groupby(run).transform("max")
        if outage.any():
            rep.outage_points = int(outage.sum())
            bad = np.isin(g_bins, outage.index.to_numpy()[outage.to_numpy()])

    # 3. mark outages missing, fill short gaps only, never across an outage
    told("short gaps")
    hit = bad & ~np.isnan(v)
    if hit.any():
        rep.outage_by_series = {str(ids[c]): int(k) for c, k in zip(*np.unique(g_codes[hit], return_counts=True))}
        v[hit] = np.nan
    filled = _fill_short_gaps(v, g_codes, max_gap_fill, bad)
    got = np.isnan(v) & ~np.isnan(filled)
    if got.any():
        rep.gaps_filled = {str(ids[c]): int(k) for c, k in zip(*np.unique(g_codes[got], return_counts=True))}
    still = np.isnan(filled)
    if still.any():
        rep.missing = {str(ids[c]): int(k) for c, k in zip(*np.unique(g_codes[still], return_counts=True))}
    out = pd.DataFrame({"series_id": np.asarray(ids, dtype=object)[g_codes],
                        "timestamp": pd.to_datetime(g_bins, utc=True).astype("datetime64[ns, UTC]"),
                        "value": filled})
    return out, rep


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
    ignored; an hour with no data stays NaN in all three. One row per hour from each
    series' first to last hour, sorted by series then time; vectorised over all series.
    """
    if history.empty:
        return history.iloc[:0].assign(mean=pd.Series(dtype="float64"), last=pd.Series(dtype="float64"))
    codes, ids = pd.factorize(history["series_id"], sort=True)
    tz = history["timestamp"].dt.tz
    t = history["timestamp"].dt.tz_convert("UTC") if tz is not None else history["timestamp"]
    ts = pd.DatetimeIndex(t).as_unit("ns").asi8
    hour = 3600 * 10**9
    g = (pd.DataFrame({"c": codes, "b": ts - ts % hour, "v": history["value"].to_numpy(dtype="float64")})
         .sort_values(["c", "b"], kind="stable").groupby(["c", "b"], sort=False)["v"])
    agg = pd.DataFrame({"value": g.max(), "mean": g.mean(), "last": g.last()})
    a_codes = agg.index.get_level_values("c").to_numpy()
    a_bins = agg.index.get_level_values("b").to_numpy()
    g_codes, g_bins, where = _grid_of(a_codes, a_bins, hour)
    stamps = pd.to_datetime(g_bins, utc=True).astype("datetime64[ns, UTC]")
    out = pd.DataFrame({"series_id": np.asarray(ids, dtype=object)[g_codes],
                        "timestamp": stamps if tz is not None else stamps.tz_localize(None)})
    for col in ("value", "mean", "last"):
        x = np.full(len(g_bins), np.nan)
        x[where >= 0] = agg[col].to_numpy()[where[where >= 0]]
        out[col] = x
    return out


def hourly_columns(history: pd.DataFrame) -> tuple[str, str]:
    """``(level, reference)`` column names of an hourly history frame for the tiers:
    ``("mean", "last")`` when :func:`to_hourly` made it, ``("value", "value")`` for a
    plain ``series_id, timestamp, value`` frame (hourly data given as such: the
    value is then both the hour's level and its last reading)."""
    if "mean" in history.columns and "last" in history.columns:
        return "mean", "last"
    return "value", "value"
