"""Benchmark: forecast accuracy of the combination against the fast peers, per lead band.

Run: ``python -m benchmarks accuracy [--series ID ...] [--json PATH]``
(the full sample takes a few minutes; ``--source parquet:PATH --timezone ZONE`` scores traces
capplan has never seen, e.g. held-out ones, the same way; ``bash scripts/setup.sh bench`` installs
statsforecast for the AutoETS peer, without which it is left out and said so).

The targets, on the evaluation windows (rolling origins, no look-ahead), are those of
:mod:`benchmarks.accuracy_targets`; each is printed as ``[met]`` or ``[MISSED]`` with its figure.

Prints one summary row per band, then each series' ratio to its best peer
(a win is < 1) with the members that carry the combination's p50 weight, then the targets, then
diagnostics (evidence, never used by the product):

* the hindsight bound (:mod:`benchmarks.forecast_hindsight`): the MASE of the convex
  combination of every member and peer with weights per lead bucket fitted ON
  the evaluation window; if its median ratio to the best peer misses a target,
  no combination of these models reaches it;
* the boundary steps: per series, over the rolling origins, how often the combined p50
  steps across a lead-bucket boundary by more than the largest step of any member's p50
  there (target: never; :mod:`forecasting.combining.lead_blend`);
* the coverage floor of series covering above 0.98: the share of evaluation
  rows with demand <= the combined p50 (the coverage of the tightest band that
  is still >= the p50, so no sane p95 covers less) and the share with demand
  <= the naive forecast (the last value).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import common
from benchmarks.accuracy_targets import MEDIAN_TARGET, ratio_to_best, targets
from benchmarks.forecast_hindsight import hindsight_mase
from benchmarks.frames import save_frames
from capplan.cli.commands.backtest import run_backtest
from capplan.config.settings import load_config
from forecasting.backtest import BEST_OF
from forecasting.combining.buckets import BANDS, band_of
from forecasting.combining.lead_blend import boundaries, lead_matrix
from forecasting.metrics import seasonal_scale
from forecasting.tiers import ROLLING_MODELS

#: every model the hindsight bound may combine: the combination's members and the peers
BOUND_MODELS = ("hourly", "daily", "weekly", "naive", "seasonal_naive", "level", "revert", "profile", "prophet",
                "autoets")
STEP = pd.Timedelta("5min")


def _f(x, fmt=".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "accuracy")
    common.add_source(ap)
    common.add_series(ap)
    common.add_seed(ap)
    ap.add_argument("--json", type=Path, help="also write the backtest document here")
    ap.add_argument("--no-bound", action="store_true", help="skip the hindsight bound (a minute or two)")
    ap.add_argument("--save-frames", type=Path, metavar="DIR",
                    help="also save every model's rolling forecasts, the history and the windows here, for "
                         "python -m benchmarks rescore")
    a = ap.parse_args(argv)
    keep: dict = {}
    doc = run_backtest(a.source, load_config(None), a.series, a.seed, a.timezone,
                       progress=lambda stage, msg="", *r, **k: print(f"[{stage}] {msg}", file=sys.stderr), keep=keep)
    if a.json:
        a.json.write_text(json.dumps(doc, default=str, indent=1))
    if a.save_frames:
        save_frames(a.save_frames, keep["rolling"], keep["prep"].h5, keep["prep"].windows)
    for note in doc["notes"]:
        print(note)
    target = MEDIAN_TARGET
    print(f"{'band':5} {'series':>6} {'MASE/best peer':>14} {'target':>6} {'wins':>4} {'losses':>6} "
          f"{'cov p95 med':>11} {'cov range':>13} {'in[.90,.98]':>11} {'idle p95':>8} {'naive-conf':>10}")
    for band in BANDS:
        sm = doc["summary"].get(band)
        if not sm:
            continue
        print(f"{band:5} {sm['series']:>6} {_f(sm['median_ratio_to_best_peer']):>14} {target[band]:>6.2f} "
              f"{sm['wins_vs_best_peer']:>4} {sm['losses_vs_best_peer']:>6} {sm['median_coverage_p95']:>11.3f} "
              f"{sm['min_coverage_p95']:>6.3f}-{sm['max_coverage_p95']:.3f} "
              f"{sm['coverage_p95_in_090_098']:>5}/{sm['series']:<5} {_f(sm['median_idle_ratio_p95']):>8} "
              f"{_f(sm['median_idle_ratio_p95_naive_conformal']):>10}")
    print(f"\nper series: MASE(combined) / best of {{{', '.join(BEST_OF)}}} (which peer), coverage_p95; "
          "members carrying >= 5 % of the p50 weight in the band's last bucket")
    for sid, s in doc["series"].items():
        cells = []
        for band, row in s["horizons"].items():
            r, best = ratio_to_best(row, BEST_OF)
            if best is None:
                continue
            last = [b for b in s.get("members", {}) if b.startswith(band + ":")]
            who = "+".join(s["members"][last[-1]]) if last else "?"
            cells.append(f"{band} {r:.2f} ({best}) cov {row['combined']['coverage_p95']:.2f} [{who}]")
        print(f"{sid:24} " + "; ".join(cells))
    boundary = {sid: boundary_steps(keep["rolling"], sid) for sid in doc["series"]}
    print("\ntargets (benchmarks/accuracy_targets.py)")
    for name, met, fig in targets(doc, boundary):
        print(f"  [{'met' if met else 'MISSED'}] {name}: {fig}")
    diagnostics(doc, keep["rolling"], keep["prep"], boundary, bound=not a.no_bound)


def record_as(argv: list[str]) -> str:
    """The RESULTS.md section a run with options ``argv`` is recorded in (:mod:`benchmarks.runner`):
    ``accuracy-source`` when ``--source`` names anything but the embedded sample (e.g. the scaled
    Earth pools or unseen traces), so such a run keeps the sample's ``accuracy`` section, else
    ``accuracy``."""
    src = next((a.split("=", 1)[1] for a in argv if a.startswith("--source=")), None)
    if src is None and "--source" in argv and argv.index("--source") + 1 < len(argv):
        src = argv[argv.index("--source") + 1]
    return "accuracy-source" if src not in (None, "sample") else "accuracy"


def _actual(prep, sid: str) -> pd.Series:
    g = prep.h5[prep.h5["series_id"] == sid]
    return pd.Series(g["value"].to_numpy(), index=pd.DatetimeIndex(g["timestamp"]))


def _eval_rows(f: pd.DataFrame, actual: pd.Series, w, band: str, col: str = "p50") -> tuple[np.ndarray, np.ndarray]:
    """``(demand, col)`` of ``f``'s rows scored in ``band`` (as :func:`forecasting.backtest.score`)."""
    f = f[(f["timestamp"] >= w.eval_start) & (f["timestamp"] <= w.end) & (f["issued_at"] >= w.eval_start - STEP)]
    f = f[band_of(f["timestamp"] - f["issued_at"]) == band]
    y = actual.reindex(pd.DatetimeIndex(f["timestamp"])).to_numpy(dtype="float64")
    ok = np.isfinite(y)
    return y[ok], f[col].to_numpy(dtype="float64")[ok]


def boundary_steps(rolling: dict[str, pd.DataFrame], sid: str, tol: float = 1e-6) -> tuple[int, int, float]:
    """``(checked, over, worst excess in GPUs)``: of the (origin, lead-bucket boundary) pairs of
    series ``sid`` where the combined p50 and at least one member have both leads, how many
    step by more than ``tol`` over the largest absolute step of any member's p50 there."""
    comb = rolling["combined"][rolling["combined"]["series_id"] == sid]
    origins = pd.DatetimeIndex(comb["issued_at"]).unique()
    c = lead_matrix(comb, origins, ["p50"])[:, :, 0]
    mem = [lead_matrix(rolling[m][rolling[m]["series_id"] == sid], origins, ["p50"])[:, :, 0]
           for m in ROLLING_MODELS if m in rolling]
    checked, over, worst = 0, 0, 0.0
    for L, _ in boundaries():
        step = np.abs(c[:, L + 1] - c[:, L])
        ms = np.stack([np.abs(m[:, L + 1] - m[:, L]) for m in mem])
        has = np.isfinite(ms).any(axis=0) & np.isfinite(step)
        if not has.any():
            continue
        excess = step[has] - np.nanmax(ms[:, has], axis=0)
        checked += int(has.sum())
        over += int((excess > tol).sum())
        worst = max(worst, float(excess.max()))
    return checked, over, worst


def diagnostics(doc: dict, rolling: dict[str, pd.DataFrame], prep, boundary: dict[str, tuple[int, int, float]],
                bound: bool = True) -> None:
    """Print the boundary steps (``boundary``: per series, :func:`boundary_steps`), the hindsight
    bound and the coverage floor (module docstring)."""
    print("\nboundary steps: (origin, lead-bucket boundary) pairs where the combined p50 steps by more than "
          "the largest member step there / pairs checked (worst excess, GPUs)")
    for sid, (checked, over, worst) in boundary.items():
        print(f"{sid:24} {over}/{checked} ({max(worst, 0.0):.3f})")
    print("\ncoverage floor where coverage_p95 > 0.98: share of evaluation rows with demand <= combined p50 "
          "(no band >= p50 covers less) / <= naive (last value)")
    for sid, s in doc["series"].items():
        a, w = _actual(prep, sid), prep.windows[sid]
        for band, row in s["horizons"].items():
            if "combined" in row and row["combined"]["coverage_p95"] > 0.98:
                y, c = _eval_rows(rolling["combined"][rolling["combined"]["series_id"] == sid], a, w, band)
                yn, n = _eval_rows(rolling["naive"][rolling["naive"]["series_id"] == sid], a, w, band)
                print(f"{sid:24} {band:4} coverage_p95 {row['combined']['coverage_p95']:.3f}  floor "
                      f"{np.mean(y <= c):.3f}  demand <= naive {np.mean(yn <= n):.3f}  rows {len(y)}")
    print("\nunder-coverage where coverage_p95 < 0.90: every model's coverage_p95; the offset above the combined "
          "p50 that would have covered 0.90 of the rows in hindsight vs the offsets used (p95 - p50: median, 10th "
          "percentile)")
    for sid, s in doc["series"].items():
        a, w = _actual(prep, sid), prep.windows[sid]
        for band, row in s["horizons"].items():
            if "combined" in row and row["combined"]["coverage_p95"] < 0.90:
                f = rolling["combined"][rolling["combined"]["series_id"] == sid]
                y, c = _eval_rows(f, a, w, band)
                _, p95 = _eval_rows(f, a, w, band, "p95")
                covs = " ".join(f"{m} {v['coverage_p95']:.2f}" for m, v in row.items())
                print(f"{sid:24} {band:4} {covs}; offset for 0.90 {np.quantile(y - c, 0.90):.1f} vs used "
                      f"{np.median(p95 - c):.1f}, {np.quantile(p95 - c, 0.10):.1f}")
    if not bound:
        return
    print("\nhindsight bound (DIAGNOSTIC, weights fitted ON the evaluation window, never used by capplan): "
          f"convex combination of {{{', '.join(BOUND_MODELS)}}} per lead bucket")
    ratios: dict[str, list[float]] = {b: [] for b in BANDS}
    for sid, s in doc["series"].items():
        a, w = _actual(prep, sid), prep.windows[sid]
        scale = seasonal_scale(a[a.index < w.tune_start].to_numpy(), 288)
        frames = {m: rolling[m][rolling[m]["series_id"] == sid] for m in BOUND_MODELS if m in rolling}
        hs = hindsight_mase({m: f for m, f in frames.items() if len(f)}, a, scale, (w.eval_start, w.end))
        cells = []
        for band, v in hs.items():
            row = s["horizons"].get(band, {})
            peers = [row[m]["mase"] for m in BEST_OF if m in row and np.isfinite(row[m]["mase"])]
            if peers and min(peers) > 0:
                ratios[band].append(v / min(peers))
                cells.append(f"{band} {v / min(peers):.3f}")
        print(f"{sid:24} " + "; ".join(cells))
    print("median bound / best peer: " + ", ".join(
        f"{b} {np.median(v):.3f} ({len(v)} series)" for b, v in ratios.items() if v))

