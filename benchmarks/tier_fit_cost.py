"""Benchmark: cost of fitting the three tiers for one series against one default Prophet fit.

Run: ``python -m benchmarks tiers [--series train/vc6YE] [--epochs N]``

The budget: hourly ETS + daily LSTM + weekly Prophet for one series must
cost at most 3x a default ``Prophet()`` fit on the same series (hourly data).
Prints each fit's seconds and the ratio, measured in the same run, twice:

* the LSTM trained on this one series alone (a user with one series);
* the LSTM's per-series share of one global fit on every sample series (how
  ``capplan plan`` trains it: one model across all series).
"""

from __future__ import annotations

import time

from benchmarks import common
from forecasting.regularise import regularise, to_hourly
from forecasting.tiers import make


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "tiers")
    ap.add_argument("--series", default="train/vc6YE", help="the series to fit (default train/vc6YE)")
    ap.add_argument("--epochs", type=int, default=20, help="LSTM epochs (default 20)")
    a = ap.parse_args(argv)
    loaded = common.load_history()
    h = loaded.frame[loaded.frame["series_id"] == a.series]
    h5, _ = regularise(h)
    h1 = to_hourly(h5)
    meta = {a.series: loaded.meta[a.series]}
    all5, _ = regularise(loaded.frame)
    all1 = to_hourly(all5)
    n_series = all1["series_id"].nunique()
    make("prophet").fit(h1, meta)  # warm-up: imports and the Stan model load are not fit cost
    make("daily", epochs=1, max_windows=32).fit(h1, meta)
    base = min(timed(lambda: make("prophet").fit(h1, meta)) for _ in range(3))
    ets = timed(lambda: make("hourly").fit(h5, meta))
    weekly = timed(lambda: make("weekly").fit(h1, meta))
    lstm_one = timed(lambda: make("daily", epochs=a.epochs).fit(h1, meta))
    lstm_all = timed(lambda: make("daily", epochs=a.epochs).fit(all1, loaded.meta))
    print(f"series {a.series}: {len(h5)} 5-minute points, {len(h1)} hours")
    rows = [("default Prophet fit (baseline, best of 3)", base),
            ("hourly (ETS, stepwise AICc)", ets),
            ("weekly (Prophet + CN calendar)", weekly),
            (f"daily LSTM on this series alone (<= {a.epochs} epochs)", lstm_one),
            (f"daily LSTM, global fit on {n_series} series", lstm_all),
            ("daily LSTM, per-series share of the global fit", lstm_all / n_series)]
    for k, v in rows:
        print(f"{k:<52}{v:8.2f} s")
    alone = ets + weekly + lstm_one
    shared = ets + weekly + lstm_all / n_series
    print(f"ratio three tiers / default Prophet, LSTM alone        = {alone / base:.2f} (budget 3.0)")
    print(f"ratio three tiers / default Prophet, LSTM global share = {shared / base:.2f} (budget 3.0)")

