"""Benchmark: cost of fitting the three tiers for one series against one default Prophet fit.

Run: ``.venv/bin/python benchmarks/bench_tiers.py [--series train/vc6YE] [--epochs N]``

Issue 4's budget: hourly ETS + daily LSTM + weekly Prophet for one series must
cost at most 3x a default ``Prophet()`` fit on the same series (hourly data).
Prints each fit's seconds and the ratio, measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capplan.sources import load_source  # noqa: E402
from forecasting.regularise import regularise, to_hourly  # noqa: E402
from forecasting.tiers import make  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", default="train/vc6YE")
    ap.add_argument("--epochs", type=int, default=20)
    a = ap.parse_args()
    loaded = load_source("sample")
    h = loaded.frame[loaded.frame["series_id"] == a.series]
    h5, _ = regularise(h)
    h1 = to_hourly(h5)
    meta = {a.series: loaded.meta[a.series]}
    make("prophet").fit(h1, meta)  # warm-up: imports and the Stan model load are not fit cost
    make("daily", epochs=1, max_windows=32).fit(h1, meta)
    base = timed(lambda: make("prophet").fit(h1, meta))
    parts = {
        "hourly (ETS, AICc over the family)": timed(lambda: make("hourly").fit(h5, meta)),
        f"daily (LSTM, <= {a.epochs} epochs, early stop)": timed(lambda: make("daily", epochs=a.epochs).fit(h1, meta)),
        "weekly (Prophet + CN calendar)": timed(lambda: make("weekly").fit(h1, meta)),
    }
    total = sum(parts.values())
    print(f"series {a.series}: {len(h5)} 5-minute points, {len(h1)} hours")
    print(f"{'default Prophet fit (baseline)':<44}{base:8.2f} s")
    for k, v in parts.items():
        print(f"{k:<44}{v:8.2f} s")
    print(f"{'three tiers':<44}{total:8.2f} s")
    print(f"ratio three tiers / default Prophet = {total / base:.2f} (budget 3.0)")


if __name__ == "__main__":
    main()
