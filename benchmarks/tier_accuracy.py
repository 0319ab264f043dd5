"""Benchmark: each tier against its reference on its own horizon .

Run: ``python -m benchmarks accuracy --json /tmp/bt.json`` (the full
sample's backtest, a few minutes), then
``python -m benchmarks tier-accuracy /tmp/bt.json``: one backtest
serves both tables (``capplan backtest --format json --output PATH`` writes the same document).

The targets, on the evaluation windows (rolling origins, no look-ahead),
median over series of the ratio of MASEs measured in the same run:

* hourly tier / naive at 1 h: <= 1.0;
* daily tier / naive at 24 h: < 1.0;
* weekly tier / seasonal-naive at 7 d: < 1.0.

Prints one row per tier (median ratio, wins and losses, and the median ratio to
the best of naive, seasonal-naive and default Prophet for context), then each
series' ratios. Series where the reference's MASE is 0 (an idle pool that naive
forecasts exactly) have no ratio and are left out of the medians, and named.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchmarks import common

#: tier -> (lead band, reference model)
TARGETS = {"hourly": ("1h", "naive"), "daily": ("24h", "naive"), "weekly": ("7d", "seasonal_naive")}
CONTEXT = ("naive", "seasonal_naive", "prophet")


def tier_ratios(doc: dict) -> dict[str, dict]:
    """Per tier, ``{"ratios": {series: MASE(tier) / MASE(reference)}, "to_best": {series: ratio to
    the best of naive, seasonal-naive and default Prophet}, "undefined": [series]}`` from a
    backtest document (:func:`capplan.cli.commands.backtest.backtest_document`)."""
    out = {}
    for tier, (band, ref) in TARGETS.items():
        r, b, undefined = {}, {}, []
        for sid, s in doc["series"].items():
            row = s["horizons"].get(band, {})
            if tier not in row or ref not in row:
                continue
            m, base = row[tier]["mase"], row[ref]["mase"]
            if not (base > 0 and np.isfinite(m)):
                undefined.append(sid)
                continue
            r[sid] = m / base
            peers = [row[p]["mase"] for p in CONTEXT if p in row and np.isfinite(row[p]["mase"])]
            if peers and min(peers) > 0:
                b[sid] = m / min(peers)
        out[tier] = {"band": band, "reference": ref, "ratios": r, "to_best": b, "undefined": undefined}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "tier-accuracy")
    ap.add_argument("backtest_json", type=Path, help="a backtest document (python -m benchmarks accuracy --json PATH)")
    doc = json.loads(ap.parse_args(argv).backtest_json.read_text())
    res = tier_ratios(doc)
    print(f"{'tier':7} {'band':4} {'reference':15} {'series':>6} {'median ratio':>12} {'wins':>4} {'losses':>6} "
          f"{'median / best of naive, snaive, prophet':>40}")
    for tier, t in res.items():
        v = np.array(list(t["ratios"].values()))
        bst = np.array(list(t["to_best"].values()))
        med = f"{np.median(v):.3f}" if len(v) else "n/a"
        mb = f"{np.median(bst):.3f}" if len(bst) else "n/a"
        print(f"{tier:7} {t['band']:4} {t['reference']:15} {len(v):>6} {med:>12} {int((v < 1).sum()):>4} "
              f"{int((v > 1).sum()):>6} {mb:>40}")
        if t["undefined"]:
            print(f"        left out (reference MASE 0): {', '.join(t['undefined'])}")
    print("\nper series: MASE(tier) / MASE(reference)")
    sids = sorted({s for t in res.values() for s in t["ratios"]})
    for sid in sids:
        cells = [f"{tier} {res[tier]['ratios'][sid]:.3f}" if sid in res[tier]["ratios"] else f"{tier} -"
                 for tier in res]
        print(f"{sid:24} " + "  ".join(cells))

