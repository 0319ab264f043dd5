"""Peer forecasts scored beside capplan in the backtest.

What a careful engineer would use without capplan, issued at the same rolling
origins and lead caps (:func:`forecasting.backtest.lead_cap`) as the tiers, on
the 5-minute grid:

* ``naive_conformal`` — the last observed value plus the rolling 7-day
  empirical quantiles of the change over the lead time (docs/method.md, "Vocabulary":
  peer policies): for lead ``k`` steps the quantiles of ``y[s] - y[s - k]`` over
  the targets ``s`` of the trailing window (every third one, for speed: the
  change over ``k`` steps is smooth in ``s``);
* ``autoets`` — statsforecast's ``AutoETS`` (Hyndman et al. 2008 model
  selection by AICc) on the 5-minute data, season one day (288 steps), fitted
  weekly on the trailing 14 days before the block's first origin, its state
  run forward over the data up to each origin (``forward``). Its candidates are
  the non-seasonal ones (``model="ZZN"``, :data:`ETS_MODEL`): like R's
  ``forecast::ets``, statsforecast computes no seasonal state for a season above
  24 steps (``statsforecast.ets``: ``m > 24``), so a seasonal candidate is never
  the one selected, but searching its 288 seasonal parameters took 10-40 s per
  fit, the peer stage's whole cost. Needs the ``bench`` dependencies (README
  "Results on the embedded sample").

Nothing here sees an actual after its origin.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from forecasting.backtest import lead_cap
from forecasting.types import FORECAST_COLUMNS, QCOLS, QUANTILES, STEP, STEPS_PER_DAY, empty_forecast

PEERS = ("naive_conformal", "autoets")
CONFORMAL_WINDOW = pd.Timedelta("7D")
ETS_SEASON = STEPS_PER_DAY  # one day (MASE's season, docs/method.md "Vocabulary")
ETS_TRAIN = pd.Timedelta("14D")
ETS_REFIT = pd.Timedelta("7D")
#: error, trend and season of AutoETS's candidates: any error and trend, no season (module docstring)
ETS_MODEL = "ZZN"


def _frame(series_id: str, tier: str, origin: pd.Timestamp, q: np.ndarray) -> pd.DataFrame:
    ts = origin + pd.timedelta_range(STEP, periods=len(q), freq=STEP)
    f = pd.DataFrame(q, columns=list(QCOLS))
    f.insert(0, "timestamp", ts)
    f.insert(0, "issued_at", origin)
    f.insert(0, "tier", tier)
    f.insert(0, "series_id", series_id)
    return f


def _steps(origin: pd.Timestamp) -> int:
    return int(pd.Timedelta(lead_cap(pd.Series([origin]))[0]) / STEP)


def nanquantile_columns(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.nanquantile(x, q, axis=0)`` (method ``linear``, Hyndman & Fan 1996 type 7), the
    same floating-point arithmetic as numpy's (``numpy.lib._function_base_impl._quantile``:
    virtual index ``(n - 1) q``, interpolation ``_lerp``), for a 2-D ``x`` whose
    columns hold different numbers of NaN: one sort of the whole array instead of numpy's
    per-column loop (``apply_along_axis``), about 20 times faster on a week of 5-minute
    changes. Returns shape ``(len(q), x.shape[1])``; every column needs a finite value."""
    s = np.sort(x, axis=0)  # NaN last
    n = np.isfinite(x).sum(axis=0)
    q = np.asarray(q, dtype="float64")[:, None]
    v = (n - 1) * q
    lo = np.floor(v)
    hi = lo + 1
    top, bottom = v >= n - 1, v < 0
    lo[top] = hi[top] = (np.broadcast_to(n - 1, v.shape))[top]
    lo[bottom] = hi[bottom] = 0
    gamma = v - np.where(top, -1, lo)
    cols = np.arange(x.shape[1])
    a, b = s[lo.astype(np.intp), cols], s[hi.astype(np.intp), cols]
    diff = b - a
    out = a + diff * gamma
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), out)


def naive_conformal(actual: pd.Series, issued: list[pd.Timestamp], series_id: str,
                    window: pd.Timedelta = CONFORMAL_WINDOW, stride: int = 3) -> pd.DataFrame:
    """Naive-conformal peer forecasts (module docstring) at each origin of ``issued``.

    ``actual``: one series on the regular 5-minute grid (GPUs or replicas, NaN = missing).
    Returns a forecast frame (``tier = "naive_conformal"``); origins without an observed
    value at or before them are skipped.
    """
    y = actual.to_numpy(dtype="float64")
    idx = actual.index
    w = int(window / STEP)
    parts = []
    upper = np.asarray(QUANTILES[1:])
    for o in issued:
        i = int(idx.searchsorted(o, side="right")) - 1
        seen = y[: i + 1]
        ok = np.flatnonzero(np.isfinite(seen))
        if i < 1 or not len(ok):
            continue
        last = seen[ok[-1]]
        k = np.arange(1, _steps(o) + 1)
        s = np.arange(max(1, i - w + 1), i + 1, stride)  # targets in the trailing window
        src = s[:, None] - k[None, :]
        ch = np.where(src >= 0, seen[s][:, None] - seen[np.clip(src, 0, None)], np.nan)
        qs = np.zeros((len(upper), len(k)))  # no change seen over a lead yet: the last value
        seen_k = np.isfinite(ch).any(axis=0)
        if seen_k.any():
            qs[:, seen_k] = nanquantile_columns(ch[:, seen_k], upper)
        parts.append(_frame(series_id, "naive_conformal", o, np.column_stack([np.full(len(k), last), last + qs.T])))
    return pd.concat(parts, ignore_index=True)[FORECAST_COLUMNS] if parts else empty_forecast()


def autoets(actual: pd.Series, issued: list[pd.Timestamp], series_id: str, season: int = ETS_SEASON,
            train: pd.Timedelta = ETS_TRAIN, refit: pd.Timedelta = ETS_REFIT) -> pd.DataFrame:
    """statsforecast ``AutoETS`` peer forecasts (module docstring) at each origin of ``issued``.

    Missing values in the training span are filled forward (then backward), as
    ``AutoETS`` needs a gap-free series. Quantiles: ``p50`` = the mean forecast,
    ``p90/p95/p99`` = the upper ends of the 80/90/98 % prediction intervals.

    Raises
    ------
    ImportError: statsforecast is not installed (the ``bench`` dependencies).
    """
    from statsforecast.models import AutoETS

    y = actual.ffill().bfill().to_numpy(dtype="float64")
    idx = actual.index
    n_train = int(train / STEP)
    parts, model, fitted_at = [], None, None
    for o in sorted(issued):
        i = int(idx.searchsorted(o, side="right")) - 1
        if i < 2 * season:
            continue
        if model is None or o - fitted_at >= refit:
            model, fitted_at = AutoETS(season_length=season, model=ETS_MODEL).fit(y[max(0, i + 1 - n_train): i + 1]), o
        h = _steps(o)
        r = model.forward(y=y[max(0, i + 1 - n_train): i + 1], h=h, level=[80, 90, 98])
        q = np.column_stack([r["mean"], r["hi-80"], r["hi-90"], r["hi-98"]])
        parts.append(_frame(series_id, "autoets", o, q))
    return pd.concat(parts, ignore_index=True)[FORECAST_COLUMNS] if parts else empty_forecast()


class PeerTask(NamedTuple):
    """One series' inputs to :func:`series_peers` (picklable, for an executor): its id, its
    values on the regular 5-minute grid (GPUs or replicas, NaN = missing) and the origins."""

    series_id: str
    actual: pd.Series
    issued: list[pd.Timestamp]


def peer_tasks(history5: pd.DataFrame, issued: dict[str, list[pd.Timestamp]]) -> list[PeerTask]:
    """One :class:`PeerTask` per series of ``history5`` (tidy ``series_id, timestamp, value`` on
    the regular 5-minute grid), in series order, with its origins from ``issued`` (none if absent)."""
    return [PeerTask(sid, pd.Series(g["value"].to_numpy(), index=pd.DatetimeIndex(g["timestamp"])),
                     list(issued.get(sid, [])))
            for sid, g in history5.groupby("series_id")]


def series_peers(task: PeerTask) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Every peer's forecasts for one series: ``({peer: forecast frame}, notes)``. AutoETS is left
    out, and the note says how to install it, when statsforecast is missing; a series with too
    little history for it gets an empty frame and a note naming the series."""
    sid, a, issued = task
    out, notes = {"naive_conformal": naive_conformal(a, issued, sid)}, []
    try:
        out["autoets"] = f = autoets(a, issued, sid)
        if f.empty and issued:
            notes.append(f"autoets not scored on {sid}: less than two days ({2 * ETS_SEASON} steps) of "
                         "history before its origins")
    except ImportError as exc:
        notes.append(f"autoets not scored: {exc.name or 'statsforecast'} is not installed "
                     "(bash scripts/setup.sh bench installs the bench dependencies)")
    return out, notes


def merge_peers(results: list[tuple[dict[str, pd.DataFrame], list[str]]]
                ) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """:func:`series_peers` results of several series as one ``({peer: forecast frame}, notes)``:
    frames concatenated in the given order, each note once. A peer no series produced is absent."""
    frames: dict[str, list[pd.DataFrame]] = {}
    notes: list[str] = []
    for out, ns in results:
        for p, f in out.items():
            frames.setdefault(p, []).append(f)
        notes.extend(n for n in ns if n not in notes)
    return {p: pd.concat([f for f in v if len(f)] or [empty_forecast()], ignore_index=True)
            for p, v in frames.items()}, notes


def peer_forecasts(history5: pd.DataFrame, issued: dict[str, list[pd.Timestamp]]
                   ) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Every peer's forecasts for every series at the given origins, in this process
    (:func:`series_peers` per :func:`peer_tasks`, :func:`merge_peers`; the plan maps
    :func:`series_peers` over its executor instead).

    ``history5``: tidy history (``series_id, timestamp, value``) on the regular 5-minute
    grid; ``issued``: per series, the origins to forecast from (e.g. the evaluation
    window's rolling origins). Returns ``({peer: forecast frame}, notes)``; a peer whose
    library is missing is left out and named in ``notes`` with how to install it.
    """
    return merge_peers([series_peers(t) for t in peer_tasks(history5, issued)])
