"""Rolling-origin evaluation with no look-ahead (DESIGN.md "Evaluation protocol").

Windows
    Each series' span is split into *training* | *tuning* | *evaluation*
    (:func:`split_windows`). Forecasts are issued at rolling origins across the
    tuning and evaluation windows; at every origin a model was fitted only on
    data at or before its fit origin and sees context only up to the origin.

Origins
    Origins sit on the 5-minute grid at the last point of an hour
    (``HH:55``), so that an hourly bucket is used only once it is complete:
    the hourly-grid tiers see buckets up to ``HH:00`` and forecast from the next
    hour on. ``issued_at`` in every rolling forecast is that 5-minute origin.

Refits follow each tier's ``refit_every`` (``hourly``: daily, ``weekly``:
weekly, ``daily`` LSTM: once at the first origin, a documented compromise to
keep the backtest within minutes on two cores).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecasting import metrics
from forecasting.tiers import make
from forecasting.types import FORECAST_COLUMNS, QCOLS, SeriesMeta, empty_forecast

STEP = pd.Timedelta("5min")
DAY = pd.Timedelta("1D")
BANDS: dict[str, tuple[pd.Timedelta, pd.Timedelta]] = {
    "1h": (pd.Timedelta(0), pd.Timedelta("1h")),
    "24h": (pd.Timedelta("1h"), pd.Timedelta("24h")),
    "7d": (pd.Timedelta("24h"), pd.Timedelta("7D")),
}


@dataclass(frozen=True)
class Windows:
    """Training | tuning | evaluation split of one series (UTC, 5-minute grid).

    ``tune_start`` is the first tuning timestamp, ``eval_start`` the first
    evaluation timestamp, ``end`` the last timestamp of the series.
    """

    start: pd.Timestamp
    tune_start: pd.Timestamp
    eval_start: pd.Timestamp
    end: pd.Timestamp
    rule: str = ""

    def as_list(self) -> list[str]:
        return [self.eval_start.isoformat(), self.end.isoformat()]


def split_windows(index: pd.DatetimeIndex, tune_days: float = 7, eval_days: float = 7,
                  min_train_days: float = 7) -> Windows:
    """Split a series' timestamps into training, tuning and evaluation windows.

    With at least ``min_train_days + tune_days + eval_days`` of data the last
    ``eval_days`` are the evaluation window and the ``tune_days`` before them
    the tuning window, both starting at midnight UTC. Shorter series are split
    in thirds (a stated fallback).

    Raises
    ------
    ValueError: fewer than 6 grid points.
    """
    if len(index) < 6:
        raise ValueError(f"series has {len(index)} points; at least 6 are needed to split windows")
    start, end = index[0], index[-1]
    span = end - start + STEP
    need = pd.Timedelta(days=min_train_days + tune_days + eval_days)
    if span >= need:
        eval_start = (end + STEP - pd.Timedelta(days=eval_days)).ceil("1D")
        tune_start = eval_start - pd.Timedelta(days=tune_days)
        return Windows(start, tune_start, eval_start, end, "days")
    n = len(index)
    tune_start, eval_start = index[n // 3], index[2 * n // 3]
    return Windows(start, tune_start, eval_start, end,
                   f"thirds: {span} of history < {need} needed for {tune_days:g}-day tuning and evaluation windows")


def origins(w: Windows, every: str) -> list[pd.Timestamp]:
    """Origins ``HH:55``-style: the last 5-minute point before each boundary
    of ``every`` (``1h``, ``1D``, ``7D``) from ``tune_start`` to before ``end``."""
    step = pd.Timedelta(every)
    first = w.tune_start.ceil("1h") if step < DAY else w.tune_start
    out = []
    b = first
    while b - STEP < w.end:
        out.append(b - STEP)
        b += step
    return out or [w.tune_start - STEP]


def expand_to_grid(f: pd.DataFrame) -> pd.DataFrame:
    """Expand hourly-bucket forecasts (``timestamp`` = bucket start) onto the
    5-minute grid: each row becomes 12 rows with the bucket's quantiles."""
    if f.empty:
        return f
    reps = np.repeat(np.arange(len(f)), 12)
    out = f.iloc[reps].reset_index(drop=True)
    out["timestamp"] = out["timestamp"] + pd.to_timedelta(np.tile(np.arange(12) * 5, len(f)), unit="min")
    return out


def rolling_forecasts(name: str, history5: pd.DataFrame, history1h: pd.DataFrame, meta: dict[str, SeriesMeta],
                      origin_map: dict[str, list[pd.Timestamp]], seed: int = 0, options: dict | None = None,
                      progress=None) -> tuple[pd.DataFrame, dict[str, str], dict[str, list[str]]]:
    """Forecasts of one forecaster at every origin, on the 5-minute grid.

    Parameters
    ----------
    name: registered forecaster name.
    history5, history1h: regular history on the 5-minute and hourly grids.
    origin_map: per series, 5-minute origins (see module docstring).
    options: keyword options for the forecaster.
    progress: optional callable ``(done, total)``.

    Returns
    -------
    ``(forecasts, fallbacks, warnings)``; forecasts are on the 5-minute grid
    with ``issued_at`` = the 5-minute origin.
    """
    proto = make(name, seed=seed, **(options or {}))
    hourly = proto.step == "1h"
    data = history1h if hourly else history5
    to_model = (lambda o: o + STEP - pd.Timedelta("1h")) if hourly else (lambda o: o)
    refit = pd.Timedelta(proto.refit_every) if proto.refit_every else None
    blocks: dict[int, dict[str, list[pd.Timestamp]]] = {}
    for sid, ors in origin_map.items():
        if not ors:
            continue
        for o in ors:
            k = int((o - ors[0]) // refit) if refit is not None else 0
            blocks.setdefault(k, {}).setdefault(sid, []).append(o)
    frames, fallbacks, warns = [], {}, {}
    by_sid = {sid: g for sid, g in data.groupby("series_id")}
    for i, k in enumerate(sorted(blocks)):
        ors = blocks[k]
        train = pd.concat([by_sid[s][by_sid[s]["timestamp"] <= to_model(o[0])] for s, o in ors.items() if s in by_sid],
                          ignore_index=True)
        model = make(name, seed=seed, **(options or {})).fit(train, meta)
        f = model.predict(data, {s: [to_model(o) for o in o_list] for s, o_list in ors.items()})
        if hourly:
            f["issued_at"] = f["issued_at"] + pd.Timedelta("1h") - STEP
            f = expand_to_grid(f)
        frames.append(f)
        fallbacks.update(model.fallbacks)
        for s, w in model.warnings.items():
            warns.setdefault(s, []).extend(w)
        if progress:
            progress(i + 1, len(blocks))
    out = pd.concat(frames, ignore_index=True) if frames else empty_forecast()
    out["tier"] = name
    return out[FORECAST_COLUMNS], fallbacks, warns


def combine_latest(tier_frames: dict[str, pd.DataFrame], at: pd.Timestamp,
                   owners: dict[str, tuple[pd.Timedelta, pd.Timedelta]] | None = None) -> pd.DataFrame:
    """Combine rolling tier forecasts into the forecast known at time ``at``.

    For each tier, the latest forecast issued at or before ``at`` is taken; the
    tier that owns a lead band supplies it (``hourly``: 0–1 h, ``daily``:
    1–24 h, ``weekly``: 1–7 d, the bands of DESIGN.md's tier table). A band
    whose owner has no forecast is taken from the next longer tier.
    Output is a forecast frame with ``tier = "combined"`` and
    ``issued_at = at``.
    """
    owners = owners or {"hourly": BANDS["1h"], "daily": BANDS["24h"], "weekly": BANDS["7d"]}
    order = ["hourly", "daily", "weekly"]
    latest = {}
    for t, f in tier_frames.items():
        g = f[f["issued_at"] <= at]
        if len(g):
            latest[t] = g[g["issued_at"] == g["issued_at"].max()]
    parts = []
    for i, t in enumerate(order):
        lo, hi = owners[t]
        src = next((latest[x] for x in order[i:] if x in latest), None)
        if src is None:
            continue
        lead = src["timestamp"] - at
        parts.append(src[(lead > lo) & (lead <= hi)])
    if not parts:
        return empty_forecast()
    out = pd.concat(parts, ignore_index=True).drop_duplicates("timestamp").sort_values("timestamp")
    out["tier"] = "combined"
    out["issued_at"] = at
    return out[FORECAST_COLUMNS].reset_index(drop=True)


@dataclass
class BacktestResult:
    """Scores per model and band, plus the forecasts they came from.

    ``scores[model][band]`` is a dict ``{"mase", "smape", "pinball",
    "coverage_p95", "n"}``; ``band`` is ``1h``, ``24h``, ``7d`` or ``all``
    (every lead the model forecasts).
    """

    series_id: str
    scores: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def score(actual5: pd.Series, forecasts: pd.DataFrame, scale: float, window: tuple[pd.Timestamp, pd.Timestamp]
          ) -> dict[str, dict[str, float]]:
    """Score one model's rolling forecasts for one series, per lead band.

    Only targets inside ``window`` (inclusive) with a non-missing actual count.
    """
    f = forecasts[(forecasts["timestamp"] >= window[0]) & (forecasts["timestamp"] <= window[1])]
    a = actual5.reindex(pd.DatetimeIndex(f["timestamp"])).to_numpy()
    ok = np.isfinite(a)
    f, a = f[ok], a[ok]
    lead = (f["timestamp"] - f["issued_at"]).to_numpy()
    out = {}
    bands = dict(BANDS)
    bands["all"] = (pd.Timedelta(0), pd.Timedelta("3650D"))
    for band, (lo, hi) in bands.items():
        m = (lead > lo.to_timedelta64()) & (lead <= hi.to_timedelta64())
        if not m.any():
            continue
        q = f.loc[m, list(QCOLS)].to_numpy()
        out[band] = {
            "mase": metrics.mase(a[m], q[:, 0], scale),
            "smape": metrics.smape(a[m], q[:, 0]),
            "pinball": metrics.pinball(a[m], q),
            "coverage_p95": metrics.coverage(a[m], q[:, 2]),
            "n": int(m.sum()),
        }
    return out
