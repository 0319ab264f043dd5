"""Benchmark: the combination and calibration of the code as it is now, on saved member forecasts.

Run: ``python -m benchmarks accuracy --save-frames DIR`` once (a full
backtest), then ``python -m benchmarks rescore DIR [--window tune|eval]
[--series ID ...]`` after each change to :mod:`forecasting.combining.weights` or
:mod:`forecasting.combining.conformal` (no tier is refitted, :mod:`benchmarks.frames`:
about a minute for the sample's evaluation windows on a 2-core machine; the
tuning windows take a few minutes more, for the naive-conformal rule at their
origins). ``--window tune`` scores the tuning windows, where
settings may be chosen; ``eval`` (default) the evaluation windows
of every README figure.

Prints per lead band the median MASE(combined) / best peer, the median
coverage_p95, how many series land in [0.90, 0.98] and which do not, and the
24 h idle ratio at p95 beside the naive-conformal rule's.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import common
from benchmarks.frames import WINDOWS, load_frames, rescore
from forecasting.backtest import summarise


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "rescore")
    ap.add_argument("frames", type=Path, help="folder written by python -m benchmarks accuracy --save-frames")
    ap.add_argument("--window", choices=WINDOWS, default="eval")
    common.add_series(ap)
    a = ap.parse_args(argv)
    rolling, h5, windows = load_frames(a.frames)
    scores = rescore(rolling, h5, windows, a.window, a.series)
    summary = summarise(scores)
    print(f"window {a.window}: {len(scores)} series")
    for band, sm in summary.items():
        out = {sid.split("/")[-1]: round(s["combined"][band]["coverage_p95"], 3) for sid, s in scores.items()
               if band in s.get("combined", {}) and not 0.90 <= s["combined"][band]["coverage_p95"] <= 0.98}
        ratio = sm["median_ratio_to_best_peer"]
        print(f"{band:4} MASE/best peer {'n/a' if ratio is None else f'{ratio:.3f}'}  coverage_p95 median "
              f"{sm['median_coverage_p95']:.3f}, in [0.90, 0.98] {sm['coverage_p95_in_090_098']}/{sm['series']}  "
              f"idle p95 {sm['median_idle_ratio_p95'] or 0:.3f} (naive-conformal "
              f"{sm['median_idle_ratio_p95_naive_conformal'] or 0:.3f})  outside: {out}")

