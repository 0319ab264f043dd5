"""Benchmark: forecast accuracy of the combination against the fast peers, per lead band.

Run: ``.venv/bin/python benchmarks/bench_accuracy.py [--series ID ...] [--json PATH]``
(the full sample takes a few minutes; ``bash scripts/setup.sh bench`` installs
statsforecast for the AutoETS peer, without which it is left out and said so).

Issue 13's targets, on the evaluation windows (rolling origins, no look-ahead):

* median over series of MASE(combined) / the best MASE of {naive,
  seasonal-naive, default Prophet, AutoETS}: <= 0.90 at 24 h and 7 d, <= 1.0 at 1 h;
* coverage_p95 in [0.90, 0.98] on every series, median in [0.93, 0.97];
* at 24 h, idle ratio at p95 no higher than the naive-conformal rule's.

Prints one summary row per band, then each series' ratio to its best peer
(a win is < 1) with the members that carry the combination's p50 weight.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capplan.commands.backtest import run_backtest  # noqa: E402
from capplan.config import load_config  # noqa: E402
from forecasting.backtest import BEST_OF  # noqa: E402
from forecasting.buckets import BANDS  # noqa: E402


def _f(x, fmt=".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", action="append", help="only this series id (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the backtest document here")
    a = ap.parse_args()
    doc = run_backtest("sample", load_config(None), a.series, a.seed,
                       progress=lambda stage, msg="", *r, **k: print(f"[{stage}] {msg}", file=sys.stderr))
    if a.json:
        a.json.write_text(json.dumps(doc, default=str, indent=1))
    for note in doc["notes"]:
        print(note)
    target = {"1h": 1.0, "24h": 0.90, "7d": 0.90}
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
            peers = {m: row[m]["mase"] for m in BEST_OF if m in row and row[m]["mase"] == row[m]["mase"]}
            if "combined" not in row or not peers:
                continue
            best = min(peers, key=peers.get)
            r = row["combined"]["mase"] / peers[best] if peers[best] > 0 else float("nan")
            last = [b for b in s.get("members", {}) if b.startswith(band + ":")]
            who = "+".join(s["members"][last[-1]]) if last else "?"
            cells.append(f"{band} {r:.2f} ({best}) cov {row['combined']['coverage_p95']:.2f} [{who}]")
        print(f"{sid:24} " + "; ".join(cells))


if __name__ == "__main__":
    main()
