"""Benchmark: a heterogeneous fleet from the sample, planned as one fleet against each team alone, pooled without
substitution and the fleet's perfect-foresight limit.

Run: ``python -m benchmarks fleet [--days 14] [--quantile 0.95]``.

**The fleet.** The embedded sample's 12 Helios training pools and its 2 inference services (data/sample), as
14 teams of one cluster. Hourly demand is each series' peak of the hour (5-minute data; a service's replicas x
its GPUs per replica). The pools share one timeline (31 days from 2020-04-30 16:00 UTC, midnight in their
Asia/Shanghai calendar). ``infer/nasa-http`` (1995) is laid on the same hours by position: its last 31 days.
``infer/azure-llm-conv`` holds **one hour** of data (60 one-minute points): it is laid on every hour as the peak
of that hour, a flat service; said in the output.

**Models and floors** (:data:`TEAMS`), assigned by a rule fixed before any run, not tuned. The pools (Helios is
a V100 cluster) stand for teams of a cluster bought in three generations: sorted by id, they take V100-32GB,
A100-40GB, A100-80GB in turn (their demand is taken as measured on that model). A team on an A100-80GB needs
80 GB (large models: floor 80), one on an A100-40GB needs 40 GB (floor 40); a V100 team has no floor. Every pool
may use the cluster's training models (:data:`TRAINING_MODELS`: V100-32GB, A100-40GB, A100-80GB, H100-80GB);
the H200 and L40S are left out because their list prices come from a later price catalogue than the others'
(:mod:`optimizer.book.prices`). The services keep their sample models: ``nasa-http`` on A10G may use the
inference cards (A10G, L4, T4); ``azure-llm-conv`` (LLM serving) on A100-80GB has floor 80 and may use
A100-80GB or H100-80GB. Floors: 9 of 14 series; 7 GPU models in play.

**Plans.** Every variant is planned by the same causal rule (:mod:`optimizer.fleet.causal`: seasonal
``--quantile`` of the past week at each hour of day, with the lead times of reserved (a week), spot (a day)
and on-demand (an hour)), replayed on the evaluation window (the last ``--days`` days; each decision reads
only hours before its lead time, so the window is unseen at every decision): the recommended plan (pooled
with substitution), the fleet pooled on each series' own model, and each series alone on its own model (the
same rule on one series: not capplan's tuned single-pool plan). The limit is the fleet's perfect-foresight
sizing (:mod:`optimizer.fleet.limit`) on the same window. Prices: the built-in price book.

**Targets** (all printed): fleet cost <= 0.92 x the sum alone; fleet cost <= pooled without substitution;
per series coverage (share of hours fully served) >= min(0.95, its alone coverage); fleet regret (cost /
limit) <= 1.10; 0 steps on a model outside a series' list or below its floor.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from benchmarks import common
from capplan.sources.sample import sample_dir
from optimizer.book.gpus import BUILTIN_CATALOGUE, models_for
from optimizer.book.prices import default_price_book
from optimizer.fleet.causal import CausalRule
from optimizer.fleet.compare import compare
from optimizer.fleet.problem import build_problem

TRAINING_MODELS = ["V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB"]
GENERATIONS = ["V100-32GB", "A100-40GB", "A100-80GB"]  #: the pools' own models, in turn by sorted id
FLOOR = {"V100-32GB": None, "A100-40GB": 40.0, "A100-80GB": 80.0}
SERVICES = {"infer/nasa-http": ("A10G", ["A10G", "L4", "T4"], None),
            "infer/azure-llm-conv": ("A100-80GB", ["A100-80GB", "H100-80GB"], 80.0)}
TARGET_SAVING = 0.92
TARGET_REGRET = 1.10
TARGET_COVERAGE = 0.95
TIMELINE_HOURS = 31 * 24


def teams(pools: list[str]) -> dict[str, tuple[str, list[str], float | None]]:
    """Per series id: (own model, allowed models, memory floor GB or None), by the rule of the module docstring."""
    out = {}
    for k, sid in enumerate(sorted(pools)):
        own = GENERATIONS[k % len(GENERATIONS)]
        out[sid] = (own, models_for(BUILTIN_CATALOGUE, TRAINING_MODELS, FLOOR[own]), FLOOR[own])
    out.update(SERVICES)
    return out


def hourly_demand() -> tuple[list[str], list[str], np.ndarray, list[str]]:
    """The 14 series' hourly demand on one timeline: ids, kinds, an (14, 744) array of GPUs of each series'
    own model (hour peaks, NaN where unknown), and notes on how the services were laid on it."""
    h = pd.read_parquet(sample_dir() / "history.parquet")
    h["timestamp"] = pd.to_datetime(h["timestamp"], utc=True)
    ids, kinds, rows, notes = [], [], [], []
    pools = sorted(s for s in h["series_id"].unique() if s.startswith("train/"))
    start = h.loc[h["series_id"].isin(pools), "timestamp"].min().floor("h")
    for sid in pools:
        g = h[h["series_id"] == sid].set_index("timestamp")["value"]
        hourly = g.resample("1h").max().reindex(pd.date_range(start, periods=TIMELINE_HOURS, freq="1h", tz="UTC"))
        ids.append(sid)
        kinds.append("training")
        rows.append(hourly.to_numpy(float))
    nasa = h[h["series_id"] == "infer/nasa-http"].set_index("timestamp")["value"].resample("1h").max()
    ids.append("infer/nasa-http")
    kinds.append("inference")
    rows.append(nasa.to_numpy(float)[-TIMELINE_HOURS:])
    notes.append(f"infer/nasa-http: its last {TIMELINE_HOURS // 24} days ({nasa.index[-TIMELINE_HOURS].date()} on) "
                 "laid on the pools' hours by position")
    conv = h[h["series_id"] == "infer/azure-llm-conv"]["value"]
    ids.append("infer/azure-llm-conv")
    kinds.append("inference")
    rows.append(np.full(TIMELINE_HOURS, float(conv.max())))
    notes.append(f"infer/azure-llm-conv: {len(conv)} one-minute points (one hour) in the sample; its peak, "
                 f"{conv.max():g} replicas, laid on every hour (a flat service)")
    return ids, kinds, np.vstack(rows), notes


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "fleet")
    ap.add_argument("--days", type=int, default=14, help="days of the evaluation window (default 14: two weeks)")
    ap.add_argument("--quantile", type=float, default=0.95, help="the causal rule's quantile (default 0.95, the "
                    "plan's coverage target)")
    a = ap.parse_args(argv)
    if not 1 <= a.days <= 21:
        ap.error("--days must be 1-21 (the sizing needs a week of history before the first lead time)")
    if not 0 < a.quantile < 1:
        ap.error("--quantile must be within (0, 1)")
    t0 = time.perf_counter()
    ids, kinds, demand, notes = hourly_demand()
    spec = teams([s for s in ids if s.startswith("train/")])
    need = np.ceil(np.nan_to_num(demand, nan=0.0) - 1e-9)
    full = build_problem(ids, kinds, [spec[s][0] for s in ids], [spec[s][1] for s in ids],
                         [spec[s][2] for s in ids], need, BUILTIN_CATALOGUE, default_price_book())
    start = TIMELINE_HOURS - 24 * a.days
    window = full.window(start, TIMELINE_HOURS)
    print(f"fleet: {len(ids)} series, models {', '.join(full.models)}; floors on "
          f"{sum(f is not None for f in full.floors)} series; evaluation: the last {a.days} days "
          f"({24 * a.days} hours), causal rule p{100 * a.quantile:g} of the past week per hour of day")
    for n in notes:
        print(f"  note: {n}")
    for s in ids:
        own, allowed, floor = spec[s]
        print(f"  {s:22} own {own:10} floor {'-' if floor is None else f'{floor:g} GB':6} may use {', '.join(allowed)}")
    last = need[:, TIMELINE_HOURS - 168:]
    days = last.reshape(len(ids), 7, 24)
    print(f"scale (last week, own-model GPUs): sum of daily peaks {days.max(axis=2).sum():,.0f} GPU-days, pooled "
          f"{days.sum(axis=0).max(axis=1).sum():,.0f}; sum of hourly peaks {last.max(axis=1).sum():,.0f}, pooled "
          f"{last.sum(axis=0).max():,.0f}")
    c = compare(window, need, start, CausalRule(quantile=a.quantile))
    rows = c.series_rows()
    print(f"\n{'series':22} {'alone USD':>10} {'alone cov':>9} {'fleet cov':>9} {'need':>5}  placement (GPU-hours)")
    misses = []
    for s in ids:
        r = rows[s]
        target = min(TARGET_COVERAGE, r["alone_coverage"])
        ok = r["coverage"] >= target - 1e-9
        if not ok:
            misses.append(s)
        place = ", ".join(f"{m} {v:,.0f}" for m, v in sorted(r["placement"].items(), key=lambda kv: -kv[1]))
        print(f"{s:22} {r['alone_cost_usd']:10,.0f} {_pct(r['alone_coverage']):>9} {_pct(r['coverage']):>9} "
              f"{_pct(target):>5}  {place}")
    print(f"\n{'GPU model':10} {'option':10} {'GPUs (max)':>10} {'GPU-hours':>10} {'USD':>10}")
    for m, opts in c.mix().items():
        for k, v in opts.items():
            if v["gpu_hours"] > 0:
                print(f"{m:10} {k:10} {v['gpus']:10,.0f} {v['gpu_hours']:10,.0f} {v['cost_usd']:10,.0f}")
    fleet, alone, pooled = c.recommended.cost_usd, c.alone_cost_usd, c.pooled.cost_usd
    print(f"\ncosts (USD, {a.days} days): fleet {fleet:,.0f}; alone {alone:,.0f}; pooled without substitution "
          f"{pooled:,.0f}; limit {c.limit.cost_usd:,.0f} (proven bound {c.limit.bound_usd:,.0f}); pooled limit "
          f"{c.pooled_limit.cost_usd:,.0f}; alone limits {c.alone_limit_usd:,.0f}")
    checks = [
        (f"fleet cost / sum alone = {fleet / alone:.3f}", fleet / alone <= TARGET_SAVING, f"<= {TARGET_SAVING}"),
        (f"fleet cost / pooled without substitution = {fleet / pooled:.3f}", fleet <= pooled + 1e-6, "<= 1"),
        (f"series under min(0.95, alone coverage): {len(misses)}" + (f" ({', '.join(misses)})" if misses else ""),
         not misses, "0"),
        (f"fleet regret = {c.regret:.3f} (against the proven bound: {c.regret_vs_bound:.3f})",
         c.regret <= TARGET_REGRET, f"<= {TARGET_REGRET}"),
        (f"violations (steps on a model outside a list or below a floor) = {c.violations}", c.violations == 0, "0"),
    ]
    print("\ntargets:")
    for text, ok, target in checks:
        print(f"  {'met ' if ok else 'MISS'}  {text}  (target {target})")
    print(f"\nlimit: {c.limit.method}; alone coverage mean {_pct(float(np.mean(c.alone_coverage)))}, fleet "
          f"coverage mean {_pct(float(np.mean(c.recommended.coverage)))}; {time.perf_counter() - t0:.0f} s")
