"""Benchmark: the predictive KEDA rule against today's cron pre-scaling, by rolling origin, per inference service.

Run: ``python -m benchmarks predictive --forecasts RUN_DIR [--series ID ...] [--config capplan.yaml]
[--json PATH]``

``RUN_DIR`` is a ``capplan plan`` output folder written with ``retention.backtest: full`` (the tuning
window's rolling forecasts are needed). For each of its inference series, each rule of
:mod:`optimizer.inference.predictive_eval` (``cron``: the HPA plus the KEDA cron windows ``capplan export``
writes; ``prescale``: the HPA with forecast pre-scaling; ``predictive``: the larger of live demand and
``capplan serve``'s forecast at the cold start + metrics lag) gets its target utilisation, quantile
and lead chosen on the tuning window and is scored on the evaluation window, which the choice never
sees. The replay runs on the series' own grid (``history_native.parquet`` where the plan kept one),
with the series' recommended policy for everything the rules do not set.

``--frontier`` also prints, per series and rule, the cost/coverage Pareto front of the rule's whole grid
on the evaluation window (:func:`optimizer.inference.predictive_eval.frontier`: hindsight, evidence only) and,
per rule, the cheapest setting whose evaluation coverage reaches the chosen cron setting's: whether
any setting of a rule could match cron pre-scaling on that window at all.

Prints one row per series and rule (cost USD, coverage, idle ratio on the evaluation window and the
setting chosen), then per rule the fleet's cost and median coverage; ``--json PATH`` also writes
every figure (per series and rule: ``params``, ``tuning`` and ``evaluation`` metrics). A series
whose windows are under 12 steps is left out, and said so; one whose plan made no rolling forecast
before its evaluation window is compared with a note (its forecast-driven rules are chosen on the
tuning window as plain HPAs); a folder with the combined tier only (``retention.backtest: compact``)
is refused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from benchmarks import common
from capplan.backtest.whatif import _meta
from capplan.config.settings import load_config
from capplan.report.model import Report
from optimizer.engine.inputs import replay_input
from optimizer.inference.predictive_eval import compare, frontier
from optimizer.plan.policy import InferenceParams

MIN_STEPS = 12
"""Fewest replay steps a tuning or evaluation window needs to be compared (one hour at 5 minutes)."""


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "predictive")
    common.add_forecasts(ap, required=True)
    common.add_series(ap, help="only these inference series (default: every inference series of the plan)")
    common.add_config(ap)
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    ap.add_argument("--frontier", action="store_true", help="also print each rule's cost/coverage front on the "
                    "evaluation window (hindsight, evidence only)")
    a = ap.parse_args(argv)
    run_dir = a.forecasts
    for name in ("report.json", "history.parquet", "backtest.parquet"):
        if not (run_dir / name).is_file():
            sys.exit(f"--forecasts {run_dir}: no {name}; pass a capplan plan output folder")
    cfg = load_config(a.config)
    report = Report.load(run_dir)
    hist_all = pd.read_parquet(run_dir / "history.parquet")
    native = run_dir / "history_native.parquet"
    nat = pd.read_parquet(native) if native.exists() else None
    bt = pd.read_parquet(run_dir / "backtest.parquet", filters=[("tier", "==", "combined")])
    chosen = {sid: s for sid, s in report.series.items() if s.kind == "inference" and (not a.series or sid in a.series)}
    if a.series and set(a.series) - set(chosen):
        sys.exit(f"--series: {', '.join(sorted(set(a.series) - set(chosen)))} not an inference series of {run_dir}")
    if set(pd.read_parquet(run_dir / "backtest.parquet", columns=["tier"])["tier"].astype(str)) <= {"combined"}:
        sys.exit(f"--forecasts {run_dir}: only the evaluation window's combined forecasts (a run written with "
                 "retention.backtest: compact); plan again with retention.backtest: full")
    untuned = [sid for sid, s in chosen.items()
               if not (bt.loc[bt["series_id"] == sid, "timestamp"] < pd.Timestamp(s.windows.evaluation[0])).any()]
    rows, doc = [], {}
    for sid, s in chosen.items():
        if sid in untuned:  # the plan made none there (e.g. a window shorter than the first origin's history)
            print(f"{sid}: no rolling forecast reaches its tuning window, so the forecast-driven rules' settings are "
                  "chosen there as plain HPAs (their forecasts start with the evaluation window)", flush=True)
        hist = nat if nat is not None and (nat["series_id"] == sid).any() else hist_all
        hist = hist[hist["series_id"] == sid].sort_values("timestamp").reset_index(drop=True)
        comb = bt[bt["series_id"] == sid].reset_index(drop=True)
        meta = _meta(s, sid, report.run.source, None)
        win = {k: tuple(pd.Timestamp(x) for x in getattr(s.windows, k)) for k in ("tuning", "evaluation")}
        inps = {k: replay_input(hist, comb, meta, cfg.price_book(), start, end, cfg.plan.interruption_rate,
                                cfg.plan.recovery_s)[0] for k, (start, end) in win.items()}
        if min(len(inps["tuning"].times), len(inps["evaluation"].times)) < MIN_STEPS:
            print(f"{sid}: left out, windows too short to compare ({len(inps['tuning'].times)} and "
                  f"{len(inps['evaluation'].times)} steps; {MIN_STEPS} needed)", flush=True)
            continue
        res = compare(inps["tuning"], inps["evaluation"], comb, InferenceParams(**s.recommended.params),
                      report.run.coverage_target, cfg.plan.cold_start_s, cfg.plan.metrics_lag_s,
                      progress=lambda m, sid=sid: print(f"{sid} {m}", file=sys.stderr, flush=True))
        doc[sid] = {r: {"params": v.params, "tuning": v.tuning.model_dump(), "evaluation": v.evaluation.model_dump()}
                    for r, v in res.items()}
        for r, v in res.items():
            e = v.evaluation
            la = v.params["family"] == "lookahead"
            rows.append({"series": sid, "rule": r, "cost_usd": e.cost_usd, "coverage": e.coverage,
                         "idle_ratio": e.idle_ratio,
                         "quantile": v.params["headroom_quantile"] if la else v.params["prescale_quantile"],
                         "target": v.params["target_utilization"],
                         "lead_s": v.params["lookahead_lead_s"] if la else v.params["prescale_lead_s"]})
        if a.frontier:
            doc[sid]["frontier"] = _frontier(sid, inps["evaluation"], comb, InferenceParams(**s.recommended.params),
                                             res["cron"].evaluation, cfg)
    if not rows:
        sys.exit(f"--forecasts {run_dir}: no inference series to compare")
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(f"Per series and rule, evaluation window (setting chosen on the tuning window; coverage target "
          f"{report.run.coverage_target})")
    print(df.to_string(index=False, float_format=lambda x: f"{x:,.4f}"))
    print("\nPer rule over the series: total cost (USD), median coverage, median idle ratio")
    print(df.groupby("rule").agg(cost_usd=("cost_usd", "sum"), coverage=("coverage", "median"),
                                 idle_ratio=("idle_ratio", "median")).to_string(float_format=lambda x: f"{x:,.4f}"))
    if a.json:
        a.json.write_text(json.dumps(doc, indent=2, default=str))


def _frontier(sid: str, inp, comb: pd.DataFrame, base: InferenceParams, cron, cfg) -> dict:
    """Print and return, per rule, the evaluation window's Pareto front and the cheapest setting whose
    coverage reaches the chosen cron setting's (``cron``: its evaluation metrics)."""
    out = {}
    print(f"\n{sid}: cost/coverage front on the evaluation window (hindsight); chosen cron setting "
          f"{cron.cost_usd:,.2f} USD at coverage {cron.coverage:.3f}")
    for rule in ("cron", "predictive", "lookahead", "prescale"):
        front = frontier(rule, inp, comb, base, cfg.plan.cold_start_s, cfg.plan.metrics_lag_s)
        pts = [{"cost_usd": m.cost_usd, "coverage": m.coverage, "target": p.target_utilization,
                "quantile": p.headroom_quantile if rule == "lookahead" else p.prescale_quantile,
                "lead_s": p.prescale_lead_s, "level_window_s": p.level_window_s} for p, m in front]
        ok = [x for x in pts if x["coverage"] >= cron.coverage - 1e-12]
        best = min(ok, key=lambda x: x["cost_usd"]) if ok else None
        out[rule] = {"front": pts, "cheapest_at_cron_coverage": best}
        print(f"  {rule:10s} " + "  ".join(f"{x['cost_usd']:.2f}@{x['coverage']:.3f}" for x in pts))
        print(f"  {'':10s} cheapest at coverage >= {cron.coverage:.3f}: "
              + (f"{best['cost_usd']:,.2f} USD (coverage {best['coverage']:.3f}, target {best['target']}, "
                 f"quantile {best['quantile']})" if best else "none"))
    return out
