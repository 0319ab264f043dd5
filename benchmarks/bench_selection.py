"""Benchmark: selection rules for training pools, compared offline on the scan's grid.

Run: ``.venv/bin/python benchmarks/bench_selection.py --forecasts OUT_DIR [--config capplan.yaml]
[--series ID ...]`` (OUT_DIR: a ``capplan plan`` output folder; pass the config it was planned with, e.g.
one with ``plan.tune_days: 14``). About 3 minutes for the sample's 12 pools on a quiet 2-core machine.

Per training pool, every point of the deterministic scan's grid
(:func:`optimizer.search.grid_scan`; the intermittent narrowing of
:mod:`optimizer.intermittent` applied) is replayed **once** on the tuning
window (the fixed tuning interruption scenario, as :func:`optimizer.tuning.tune_policy`),
keeping the daily costs and coverages; each rule of :data:`RULES` is then a
score on those replays, and ``grid_scan``'s worst-of-neighbours rule picks a
policy with it. The picked policy is replayed on the evaluation window
(seed 0) and its regret (cost / the perfect-foresight limit,
:mod:`optimizer.oracle`) and coverage printed per pool and rule, with the
median and maximum per rule.

What it leaves out: the Gaussian-process refinement (kept only above 3 % of
the scan's objective, rarely) and the rivals (:mod:`optimizer.rivals`). With the
``default`` rule it reproduces ``bench_capacity.py --seeds 0``'s recommended regret
wherever neither changed the pick (all 12 sample pools on main's session-8 plan:
median 1.233), in a fraction of its time, so a selection rule can be screened
here before it goes into :func:`optimizer.tuning.tune_policy`.

Weeks are 7-day blocks from the tuning window's start (days as the replay's
``Metrics.daily_cost_usd``); a week's objective is its cost plus the usual
coverage penalty (:func:`optimizer.search.objective_value`) with its own
reference cost, divided by the week's perfect-foresight limit (its reference
cost when the limit is 0), so weeks of different demand weigh alike.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_capacity import forecasts_from  # noqa: E402
from capplan import pipeline  # noqa: E402
from capplan.config import load_config  # noqa: E402
from optimizer.intermittent import intermittent_space  # noqa: E402
from optimizer.oracle import training_oracle  # noqa: E402
from optimizer.policy import Metrics  # noqa: E402
from optimizer.replay import ReplayInput  # noqa: E402
from optimizer.search import grid_scan, objective_value  # noqa: E402
from optimizer.tuning import TUNING_STREAM, PolicyReplay, reference_cost, selection_score  # noqa: E402

WEEK_DAYS = 7


class Weeks:
    """The tuning window's 7-day blocks: each one's reference cost and perfect-foresight limit (USD),
    and a policy's normalised objective on one of them (module docstring)."""

    def __init__(self, tune: ReplayInput, target: float, penalty: float, by: str):
        per_day = 86400 // tune.step_s
        n = max(1, len(tune.times) // (WEEK_DAYS * per_day))
        demand = np.asarray(tune.demand, float)
        self.target, self.penalty, self.by, self.n = target, penalty, by, n
        self.ref, self.limit = [], []
        for k in range(n):
            sl = slice(k * WEEK_DAYS * per_day, (k + 1) * WEEK_DAYS * per_day)
            week = ReplayInput(times=tune.times[sl], demand=demand[sl], step_s=tune.step_s, price=tune.price,
                               gpus_per_unit=tune.gpus_per_unit)
            self.ref.append(reference_cost(week))
            self.limit.append(training_oracle(week).cost_usd)

    def score(self, m: Metrics, k: int) -> float:
        """Week ``k``'s objective (cost + coverage penalty) over its limit (or its reference cost)."""
        sl = slice(k * WEEK_DAYS, (k + 1) * WEEK_DAYS)
        cost, cov = (m.daily_cost_usd or [])[sl], (m.daily_coverage or [])[sl]
        wm = Metrics(cost_usd=float(sum(cost)), coverage=float(np.mean(cov)) if cov else float("nan"), idle_ratio=0.0,
                     unmet=0.0, daily_coverage=cov, daily_cost_usd=cost)
        den = self.limit[k] if self.limit[k] > 0 else self.ref[k]
        return objective_value(wm, self.target, self.ref[k], self.penalty, self.by) / den


def rules(tune: ReplayInput, settings) -> dict:
    """Selection rules ``name -> score(metrics)`` for one tuning window (lower is better)."""
    target = min(1.0, settings.coverage_target + settings.coverage_margin)
    pen, by = settings.penalty, settings.coverage_objective
    ref = reference_cost(tune)
    wk = Weeks(tune, target, pen, by)
    weeks = range(wk.n)
    return {
        "default": lambda m: objective_value(m, target, ref, pen, by),
        "last_week": lambda m: wk.score(m, wk.n - 1),
        "worst_week": lambda m: max(wk.score(m, k) for k in weeks),
        "mean_week": lambda m: float(np.mean([wk.score(m, k) for k in weeks])),
        "recency_2x": lambda m: float(np.average([wk.score(m, k) for k in weeks], weights=[2.0 ** k for k in weeks])),
        "cov_window": lambda m: objective_value(m, target, ref, pen, "window"),
        "cov_daily": lambda m: objective_value(m, target, ref, pen, "daily"),
        "no_margin": lambda m: objective_value(m, settings.coverage_target, ref, pen, by),
        "daily_regret_q75": selection_score("training", "daily_regret_q75", tune, target, ref, pen, by),
    }


def pool_rows(task) -> list[dict]:
    """One row per rule for one training pool's :class:`optimizer.tuning.SearchTask`."""
    s, tune = task.settings, task.tune
    target = min(1.0, s.coverage_target + s.coverage_margin)
    pr, tpr = PolicyReplay("training", s, 0), PolicyReplay("training", s, TUNING_STREAM)
    space = intermittent_space("training", s.training_bounds.as_dict(), tune.demand)[0] or pr.space(tune)
    seen: dict[str, Metrics] = {}

    def evaluate(p):
        key = json.dumps(p.model_dump(), sort_keys=True, default=str)
        if key not in seen:
            seen[key] = tpr.replay(p, tune)[0]
        return seen[key]

    limit = pr.oracle(task.evalw).cost_usd
    ref = reference_cost(tune)
    out = []
    for name, score in rules(tune, s).items():
        res, _ = grid_scan(evaluate, space, target, ref, s.penalty, s.coverage_objective, score=score)
        p = res.best_params
        m = pr.replay(p, task.evalw)[0]
        out.append({"series": task.series_id, "rule": name, "regret": m.cost_usd / limit if limit > 0 else np.nan,
                    "coverage": m.coverage, "tied": res.n_tied,
                    "policy": f"{p.daily_rule} {p.quantile} cap={p.daily_cap} h{p.headroom:.2f} "
                              f"top={p.topup_quantile} x{p.topup_headroom:.2f}"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forecasts", type=Path, required=True, help="a capplan plan output folder")
    ap.add_argument("--config", default=None, help="the capplan.yaml the plan was made with (default: the defaults)")
    ap.add_argument("--series", nargs="*", default=None)
    ap.add_argument("--source", default="sample")
    ap.add_argument("--timezone", default="UTC")
    a = ap.parse_args()
    t0 = time.perf_counter()
    cfg = load_config(a.config)
    prep = pipeline.regularise_stage(pipeline.load_stage(a.source, cfg, a.series, a.timezone), cfg)
    rows = []
    for task in pipeline.search_tasks(prep, forecasts_from(a.forecasts), cfg, 0):
        if task.kind == "training":
            rows += pool_rows(task)
            print(f"{task.series_id}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    fmt = lambda x: f"{x:.3f}"  # noqa: E731
    print("\nRegret on the evaluation window (cost / perfect-foresight limit), per pool and rule")
    print(df.pivot(index="series", columns="rule", values="regret").to_string(float_format=fmt))
    print("\nCoverage on the evaluation window")
    print(df.pivot(index="series", columns="rule", values="coverage").to_string(float_format=fmt))
    print("\nPer rule")
    print(df.groupby("rule")["regret"].agg(["median", "max"]).to_string(float_format=fmt))
    print("\nPolicies picked")
    print(df[["series", "rule", "tied", "policy"]].to_string(index=False))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
