"""Benchmark: the top-up's fresh forecast of the next hour against the latest forecast's own rows for it.

Run: ``python -m benchmarks fresh-hour [--forecasts OUT_DIR] [--earth] [--earth-cache DIR]``
(seconds with ``--forecasts``; without it the forecast stage runs first, several minutes).

Why
    The hourly top-up of a training pool is sized from a forecast of the hour's maximum
    (:mod:`optimizer.training.fresh_hour`). Rolling origins are 4 hours apart, so two readings are at hand:
    the latest forecast's own rows for the hour (1-5 h ahead, the ``24h`` band, shifted by its
    error at the newest observation: the level update capplan used before), or its first hour
    (the ``1h`` band, what the plan sizes the next hour from) moved to the newest observation
    (:func:`optimizer.training.fresh_hour.refreshed_hour_max`, what capplan uses).
What it prints, per training series and window (tuning, evaluation)
    the mean absolute error, in GPUs, of each reading's p50 hour maximum against the hour's
    realised maximum in whole GPUs (``ceil``), over the hours both readings have, and their
    ratio (``shifted_24h / fresh_1h``: above 1, the fresh reading was the more accurate);
    with ``--earth``, the same for the Earth pool of :mod:`benchmarks.earth_pool` (its
    forecasts from ``--earth-cache`` when there). Then the count of windows each reading won.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import common
from benchmarks.earth_pool import earth_pool, earth_state
from capplan.config.settings import load_config
from optimizer.engine.replay_core import latest_before
from optimizer.training.fresh_hour import refreshed_hour_max


def shifted_hour_max(forecasts: pd.DataFrame, hour_starts: pd.DatetimeIndex, actual: pd.Series) -> np.ndarray:
    """Per hour, the p50 maximum of the latest forecast's own rows for that hour, shifted by its
    error at the newest observation (the step that ended at least one step before the hour);
    NaN where there is none. The reading :mod:`optimizer.training.fresh_hour` replaced (module docstring)."""
    out = np.full(len(hour_starts), np.nan)
    issued, k_of = latest_before(forecasts, hour_starts)
    by_issue = {k: g.set_index("timestamp")["p50"] for k, g in forecasts.groupby("issued_at")}
    known = actual.dropna()
    step = known.index[1] - known.index[0]
    for i, hs in enumerate(hour_starts):
        if k_of[i] < 0:
            continue
        g = by_issue[issued[k_of[i]]]
        hour = g[(g.index >= hs) & (g.index < hs + pd.Timedelta("1h"))]
        seen = known[known.index <= hs - 2 * step]
        if hour.empty or not len(seen):
            continue
        shift = float(seen.iloc[-1] - g.at[seen.index[-1]]) if seen.index[-1] in g.index else 0.0
        out[i] = max(0.0, float(hour.max()) + shift)
    return out


def window_errors(forecasts: pd.DataFrame, actual: pd.Series, start: pd.Timestamp, end: pd.Timestamp) -> dict:
    """MAE (GPUs) of both readings' p50 hour maxima on the hours of ``[start, end)`` against
    ``ceil`` of each hour's realised maximum, and the number of hours scored."""
    times = actual.index[(actual.index >= start) & (actual.index < end)]
    hours = pd.date_range(start, end, freq="1h", inclusive="left")
    fresh = refreshed_hour_max(forecasts, times, hours, actual)["p50"]
    pidx = hours.searchsorted(times, side="right") - 1
    first = np.array([fresh[np.argmax(pidx == i)] if (pidx == i).any() else np.nan for i in range(len(hours))])
    shifted = shifted_hour_max(forecasts, hours, actual)
    real = np.ceil(actual[times].groupby(hours[pidx]).max().reindex(hours).to_numpy(float) - 1e-9)
    ok = np.isfinite(first) & np.isfinite(shifted) & np.isfinite(real)
    if not ok.any():
        return {"hours": 0, "fresh_1h": np.nan, "shifted_24h": np.nan, "ratio": np.nan}
    a, b = np.abs(first[ok] - real[ok]).mean(), np.abs(shifted[ok] - real[ok]).mean()
    return {"hours": int(ok.sum()), "fresh_1h": a, "shifted_24h": b,
            "ratio": b / a if a > 0 else (1.0 if b == 0 else np.inf)}


def series_rows(state) -> list[dict]:
    """One row per training series of ``state`` (prep and combined rolling forecasts set) and window."""
    h5, comb = state.prep.h5, state.fc.rolling["combined"]
    rows = []
    for sid, w in state.prep.windows.items():
        if state.prep.meta[sid].kind != "training":
            continue
        g = h5[h5["series_id"] == sid]
        actual = pd.Series(g["value"].to_numpy(float), index=pd.DatetimeIndex(g["timestamp"]))
        f = comb[comb["series_id"] == sid]
        for name, (lo, hi) in {"tuning": (w.tune_start, w.eval_start), "evaluation": (w.eval_start, w.end)}.items():
            rows.append({"series": sid, "window": name, **window_errors(f, actual, lo, hi)})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "fresh-hour")
    common.add_forecasts(ap)
    common.add_config(ap)
    ap.add_argument("--earth", action="store_true", help="also the Earth pool (benchmarks.earth_pool)")
    ap.add_argument("--earth-cache", type=Path, default=None, metavar="DIR",
                    help="a folder of the Earth pool's forecasts (made there when absent)")
    a = ap.parse_args(argv)
    cfg = load_config(a.config)
    rows = series_rows(common.with_forecasts(common.loaded_state(cfg, "sample"), a.forecasts))
    if a.earth:
        rows += series_rows(earth_state(cfg, earth_pool(1.0), a.earth_cache))
    t = pd.DataFrame(rows).set_index(["series", "window"])
    print("p50 hour maximum against the realised maximum (whole GPUs): MAE in GPUs of the fresh 1h-band reading "
          "and of the shifted 24h-band reading; ratio = shifted / fresh (module docstring)")
    print(t.to_string(float_format=lambda v: f"{v:.3f}"))
    won = int((t["ratio"] > 1).sum())
    print(f"\nthe fresh reading had the lower error on {won} of {len(t)} windows, the shifted one on "
          f"{int((t['ratio'] < 1).sum())}, ties {int((t['ratio'] == 1).sum())}")
