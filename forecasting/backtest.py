"""Rolling-origin evaluation with no look-ahead (docs/method.md, "Evaluation protocol (no leakage)").

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

Refits follow each tier's ``refit_every``: every tier is re-estimated weekly
(``hourly`` ETS keeps its parameters for the week and updates its state at
every origin; the ``daily`` LSTM is retrained on every series at each weekly
fit origin; ``weekly`` Prophet refits). ``capplan plan``'s own plan forecast
refits per the model registry's cadence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecasting import metrics
from forecasting.combining.buckets import BANDS
from forecasting.tiers import make
from forecasting.types import FORECAST_COLUMNS, QCOLS, STEP, SeriesMeta, empty_forecast

DAY = pd.Timedelta("1D")


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


MIN_POINTS = 12
"""Fewest 5-minute grid points :func:`split_windows` splits: one hour of history, the hourly tier's 1 h horizon.
A shorter series cannot hold a single hour to forecast or replay; one of an hour or more is split (its windows may
then be shorter than an hour, and the plan says so in its notes)."""


def split_windows(index: pd.DatetimeIndex, tune_days: float = 7, eval_days: float = 7,
                  min_train_days: float = 7) -> Windows:
    """Split a series' timestamps into training, tuning and evaluation windows.

    With at least ``min_train_days + tune_days + eval_days`` of data the last
    ``eval_days`` are the evaluation window and the ``tune_days`` before them
    the tuning window, both starting at midnight UTC. Shorter series are split
    in thirds (a stated fallback).

    Raises
    ------
    ValueError: fewer than :data:`MIN_POINTS` grid points (too short: less than one hour, the hourly
        tier's horizon); the message starts with ``too short``.
    """
    if len(index) < MIN_POINTS:
        raise ValueError(f"too short: {len(index)} points on the grid; at least {MIN_POINTS} are needed (one hour "
                         "of history, the hourly tier's horizon)")
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


def lead_cap(issued_at: pd.Series) -> np.ndarray:
    """Longest lead kept for a rolling forecast issued at ``issued_at`` (5-minute origin).

    Origins on a 4-hour boundary keep the full 7 days, the others 1 hour. Every
    band is scored at many origins while the frames stay small; the 7-day band
    gets six origins a day rather than one, so its calibration
    (:mod:`forecasting.combining.conformal`) sees errors six times as often.
    """
    b = pd.DatetimeIndex(issued_at) + STEP
    cap = np.full(len(b), pd.Timedelta("1h").to_timedelta64())
    cap[(b.hour % 4 == 0) & (b.minute == 0)] = pd.Timedelta("7D").to_timedelta64()
    return cap


def expand_to_grid(f: pd.DataFrame) -> pd.DataFrame:
    """Expand hourly-bucket forecasts (``timestamp`` = bucket start) onto the
    5-minute grid: each row becomes 12 rows with the bucket's quantiles."""
    if f.empty:
        return f
    reps = np.repeat(np.arange(len(f)), 12)
    out = f.iloc[reps].reset_index(drop=True)
    out["timestamp"] = out["timestamp"] + pd.to_timedelta(np.tile(np.arange(12) * 5, len(f)), unit="min")
    return out


def refit_blocks(origin_map: dict[str, list[pd.Timestamp]], refit_every: str | None
                 ) -> list[dict[str, list[pd.Timestamp]]]:
    """The origins of each refit block, per series, in fitting order: block ``k`` holds each
    series' origins ``o`` with ``(o - its first origin) // refit_every == k`` (one block
    without ``refit_every``); each block is one fit of :func:`rolling_forecasts`."""
    refit = pd.Timedelta(refit_every) if refit_every else None
    blocks: dict[int, dict[str, list[pd.Timestamp]]] = {}
    for sid, ors in origin_map.items():
        for o in ors:
            k = int((o - ors[0]) // refit) if refit is not None else 0
            blocks.setdefault(k, {}).setdefault(sid, []).append(o)
    return [blocks[k] for k in sorted(blocks)]


def rolling_forecasts(name: str, history5: pd.DataFrame, history1h: pd.DataFrame, meta: dict[str, SeriesMeta],
                      origin_map: dict[str, list[pd.Timestamp]], seed: int = 0, options: dict | None = None,
                      progress=None, cap_leads: bool = True, cache=None
                      ) -> tuple[pd.DataFrame, dict[str, str], dict[str, list[str]]]:
    """Forecasts of one forecaster at every origin, on the 5-minute grid.

    Parameters
    ----------
    name: registered forecaster name.
    history5, history1h: regular history on the 5-minute and hourly grids.
    origin_map: per series, 5-minute origins (see module docstring).
    options: keyword options for the forecaster.
    progress: optional callable ``(done, total)``.
    cap_leads: keep only leads up to :func:`lead_cap` of each origin.
    cache: optional store of finished refit blocks (``key(options, seed, cap_leads,
        origins, train, context, meta)``, ``get(key, series) -> (forecasts, fallbacks,
        warnings) | None``, ``put(key, forecasts, fallbacks, warnings)``,
        ``model_key(options, seed, train, meta)``, ``load_model(key, model, series)
        -> model | None``, ``save_model(key, model)``; e.g.
        :class:`capplan.run.cache.RollingCache`): a block whose origins, training data
        and data up to its last origin are unchanged is taken from it; a block with
        the same training data but new origins reuses its stored fit and predicts.

    Returns
    -------
    ``(forecasts, fallbacks, warnings)``; forecasts are on the 5-minute grid
    with ``issued_at`` = the 5-minute origin.
    """
    proto = make(name, seed=seed, **(options or {}))
    hourly = proto.step == "1h"
    data = history1h if hourly else history5
    to_model = (lambda o: o + STEP - pd.Timedelta("1h")) if hourly else (lambda o: o)
    blocks = refit_blocks(origin_map, proto.refit_every)
    frames, fallbacks, warns = [], {}, {}
    by_sid = {sid: g for sid, g in data.groupby("series_id")}
    for i, ors in enumerate(blocks):
        train = pd.concat([by_sid[s][by_sid[s]["timestamp"] <= to_model(o[0])] for s, o in ors.items() if s in by_sid],
                          ignore_index=True)
        key = hit = None
        if cache is not None:
            context = pd.concat([by_sid[s][by_sid[s]["timestamp"] <= to_model(o[-1])] for s, o in ors.items()
                                 if s in by_sid], ignore_index=True)
            key = cache.key(options or {}, seed, cap_leads, ors, train, context, meta)
            hit = cache.get(key, sorted(ors))
        if hit is not None:
            f, fb, ws = hit
        else:
            model = None
            if cache is not None:  # the same training data: the block's stored fit, if any
                mkey = cache.model_key(options or {}, seed, train, meta)
                model = cache.load_model(mkey, make(name, seed=seed, **(options or {})), sorted(ors))
            if model is None:
                model = make(name, seed=seed, **(options or {})).fit(train, meta)
                if cache is not None:
                    cache.save_model(mkey, model)
            f = model.predict(data, {s: [to_model(o) for o in o_list] for s, o_list in ors.items()})
            if hourly:
                f["issued_at"] = f["issued_at"] + pd.Timedelta("1h") - STEP
                f = expand_to_grid(f)
            if cap_leads and len(f):
                f = f[(f["timestamp"] - f["issued_at"]).to_numpy() <= lead_cap(f["issued_at"])]
            fb, ws = model.fallbacks, model.warnings
            if cache is not None:
                cache.put(key, f, fb, ws)
        frames.append(f)
        fallbacks.update(fb)
        for s, w in ws.items():
            warns.setdefault(s, []).extend(w)
        if progress:
            progress(i + 1, len(blocks))
    out = pd.concat(frames, ignore_index=True) if frames else empty_forecast()
    out["tier"] = name
    return out[FORECAST_COLUMNS], fallbacks, warns


def evaluation_origins(forecasts: pd.DataFrame, windows: dict[str, Windows]) -> dict[str, list[pd.Timestamp]]:
    """Per series, the origins of ``forecasts`` (a forecast frame) that :func:`score`
    scores: issued at or after the evaluation window's start minus 5 minutes."""
    out = {}
    for sid, w in windows.items():
        iss = forecasts.loc[forecasts["series_id"] == sid, "issued_at"]
        out[sid] = sorted(pd.DatetimeIndex(iss[iss >= w.eval_start - STEP].unique()))
    return out


def score(actual5: pd.Series, forecasts: pd.DataFrame, scale: float, window: tuple[pd.Timestamp, pd.Timestamp]
          ) -> dict[str, dict[str, float]]:
    """Score one model's rolling forecasts for one series, per lead band.

    Only forecasts issued at or after ``window[0] - 5 min`` whose targets lie
    inside ``window`` (inclusive) with a non-missing actual count, so that a
    combination or calibration fitted before the window is scored out of sample.
    Returns ``{band: {"mase", "smape", "pinball", "coverage_p95",
    "idle_ratio_p95", "n"}}`` with band ``1h``, ``24h``, ``7d`` or ``all``.
    ``idle_ratio_p95`` is the idle ratio of provisioning exactly the forecast
    ``p95`` (the idle ratio of docs/method.md's vocabulary: ``sum(max(p95 - demand, 0)) / sum(p95)``), the
    price of ``coverage_p95``.
    """
    f = forecasts[(forecasts["timestamp"] >= window[0]) & (forecasts["timestamp"] <= window[1])
                  & (forecasts["issued_at"] >= window[0] - STEP)]
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
            "idle_ratio_p95": metrics.idle_ratio(a[m], q[:, 2]),
            "n": int(m.sum()),
        }
    return out


#: the fast peers the accuracy target compares the combination against
BEST_OF = ("naive", "seasonal_naive", "prophet", "autoets")


def summarise(per_series: dict[str, dict[str, dict]], reference: str = "combined",
              best_of: tuple[str, ...] = BEST_OF) -> dict[str, dict]:
    """Cross-series summary per lead band of :func:`score` results.

    ``per_series``: ``{series_id: {model: {band: {"mase", "coverage_p95", "idle_ratio_p95", ...}}}}``.
    Returns ``{band: {"series", "best_or_tied", "strictly_best", "geomean_relative_mase":
    {model: ratio}, "median_ratio_to_best_peer", "wins_vs_best_peer", "losses_vs_best_peer",
    "coverage_p95_in_093_097", "coverage_p95_in_090_098", "median_coverage_p95",
    "min_coverage_p95", "max_coverage_p95", "median_idle_ratio_p95",
    "median_idle_ratio_p95_naive_conformal"}}`` for ``reference``:

    * ``best_or_tied``: series where its MASE is <= every other model's;
    * ``geomean_relative_mase``: geometric mean over series of
      ``MASE(reference) / MASE(model)`` (< 1: the reference is better; series
      where either MASE is 0 are left out), the relative-error summary of
      Hyndman & Koehler 2006 and the M4 competition;
    * ``median_ratio_to_best_peer``: median over series of ``MASE(reference)``
      divided by the lowest MASE among the models of ``best_of`` scored on that
      series (the accuracy target: <= 0.90 at 24 h and 7 d, <= 1.0 at 1 h);
      ``wins``/``losses``: series where that ratio is below/above 1.
    """
    out = {}
    for band in BANDS:
        rows = {sid: {m: s[band] for m, s in models.items() if band in s} for sid, models in per_series.items()}
        rows = {sid: r for sid, r in rows.items() if reference in r and len(r) > 1}
        if not rows:
            continue
        best = strict = 0
        logs: dict[str, list[float]] = {}
        ratios = []
        for r in rows.values():
            c = r[reference]["mase"]
            others = [v["mase"] for m, v in r.items() if m != reference and np.isfinite(v["mase"])]
            best += all(c <= o for o in others)
            strict += all(c < o for o in others)
            for m, v in r.items():
                if m != reference and c > 0 and v["mase"] > 0 and np.isfinite(v["mase"]):
                    logs.setdefault(m, []).append(float(np.log(c / v["mase"])))
            peers = [r[m]["mase"] for m in best_of if m in r and np.isfinite(r[m]["mase"])]
            if peers and min(peers) > 0 and np.isfinite(c):
                ratios.append(c / min(peers))
        cov = np.array([r[reference]["coverage_p95"] for r in rows.values()])
        idle = np.array([r[reference].get("idle_ratio_p95", np.nan) for r in rows.values()])
        nc = np.array([r["naive_conformal"].get("idle_ratio_p95", np.nan) for r in rows.values()
                       if "naive_conformal" in r])
        out[band] = {
            "series": len(rows),
            "best_or_tied": int(best),
            "strictly_best": int(strict),
            "geomean_relative_mase": {m: float(np.exp(np.mean(v))) for m, v in sorted(logs.items())},
            "median_ratio_to_best_peer": float(np.median(ratios)) if ratios else None,
            "wins_vs_best_peer": int(sum(x < 1 for x in ratios)),
            "losses_vs_best_peer": int(sum(x > 1 for x in ratios)),
            "coverage_p95_in_093_097": int(((cov >= 0.93) & (cov <= 0.97)).sum()),
            "coverage_p95_in_090_098": int(((cov >= 0.90) & (cov <= 0.98)).sum()),
            "median_coverage_p95": float(np.nanmedian(cov)),
            "min_coverage_p95": float(np.nanmin(cov)),
            "max_coverage_p95": float(np.nanmax(cov)),
            "median_idle_ratio_p95": float(np.nanmedian(idle)) if np.isfinite(idle).any() else None,
            "median_idle_ratio_p95_naive_conformal": float(np.nanmedian(nc)) if np.isfinite(nc).any() else None,
        }
    return out
