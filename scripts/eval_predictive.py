"""Compare the predictive rule with today's cron pre-scaling on a plan's inference services.

Usage: .venv/bin/python scripts/eval_predictive.py RUN_DIR [--out FILE.json]

RUN_DIR is a ``capplan plan`` output folder written with ``retention.backtest: full`` (the tuning
window's rolling forecasts are needed). For each inference series, each rule's setting is chosen on
the tuning window and scored on the evaluation window (optimizer.predictive_eval); prints one row
per series and rule (cost USD, coverage, idle ratio) and writes the figures as JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capplan.config import CapplanConfig  # noqa: E402
from capplan.report import Report  # noqa: E402
from capplan.whatif import _meta  # noqa: E402
from optimizer.inputs import replay_input  # noqa: E402
from optimizer.policy import InferenceParams  # noqa: E402
from optimizer.predictive_eval import compare  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    cfg = CapplanConfig()
    report = Report.load(a.run_dir)
    hist_all = pd.read_parquet(a.run_dir / "history.parquet")
    native = a.run_dir / "history_native.parquet"
    nat = pd.read_parquet(native) if native.exists() else None
    bt = pd.read_parquet(a.run_dir / "backtest.parquet", filters=[("tier", "==", "combined")])
    rows, doc = [], {}
    for sid, s in report.series.items():
        if s.kind != "inference":
            continue
        hist = nat if nat is not None and (nat["series_id"] == sid).any() else hist_all
        hist = hist[hist["series_id"] == sid].sort_values("timestamp").reset_index(drop=True)
        comb = bt[bt["series_id"] == sid].reset_index(drop=True)
        meta = _meta(s, sid, report.run.source, None)
        win = {k: tuple(pd.Timestamp(x) for x in getattr(s.windows, k)) for k in ("tuning", "evaluation")}
        inps = {k: replay_input(hist, comb, meta, cfg.price_book(), a_, b_, cfg.plan.interruption_rate,
                                cfg.plan.recovery_s)[0] for k, (a_, b_) in win.items()}
        if len(inps["evaluation"].times) < 12 or len(inps["tuning"].times) < 12:
            print(f"{sid}: windows too short to compare ({len(inps['tuning'].times)} and "
                  f"{len(inps['evaluation'].times)} steps); left out", file=sys.stderr)
            continue
        base = InferenceParams(**s.recommended.params)
        res = compare(inps["tuning"], inps["evaluation"], comb, base, report.run.coverage_target,
                      cfg.plan.cold_start_s, cfg.plan.metrics_lag_s,
                      progress=lambda m, sid=sid: print(f"{sid} {m}", file=sys.stderr))
        doc[sid] = {r: {"params": v.params, "tuning": v.tuning.model_dump(), "evaluation": v.evaluation.model_dump()}
                    for r, v in res.items()}
        for r, v in res.items():
            e = v.evaluation
            rows.append(f"{sid:24s} {r:11s} cost {e.cost_usd:9.1f} USD  coverage {e.coverage:.4f}  idle ratio "
                        f"{e.idle_ratio:.3f}  ({v.params['prescale_quantile']}, target {v.params['target_utilization']}"
                        f", lead {v.params['prescale_lead_s']} s)")
    print("\n".join(rows))
    if a.out:
        a.out.write_text(json.dumps(doc, indent=2, default=str))


if __name__ == "__main__":
    main()
