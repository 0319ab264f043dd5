"""Benchmark: shrinkage rules for training pools (restricted grids, a fleet prior), screened offline.

Run: ``.venv/bin/python benchmarks/bench_shrinkage.py --forecasts OUT_DIR --cache FILE.json.gz
[--prior-from OTHER.json.gz] [--source ... --timezone ...] [--series ID ...]``. The first run replays
every point of the scan's grid (:data:`optimizer.search.TRAINING_GRID`, 2,560 policies) once on
each training pool's tuning window (the tuning interruption stream, as
:func:`optimizer.tuning.tune_policy`) **and** once on its evaluation window (seed 0), about
10 s a pool on a quiet 2-core machine, and writes the daily costs and coverages to ``--cache`` (gzipped JSON); a
later run with the same ``--cache`` only reads it (seconds), so any rule is screened in seconds.
``--prior-from``: another cache (e.g. the embedded sample's, for the held-out traces) whose pools
define a *fixed* fleet prior, a constant policy as code would hold it.

Per rule it prints, over the pools, the median / maximum / mean regret (evaluation cost over the
perfect-foresight limit, :mod:`optimizer.oracle`) and every pool that misses issue 12's bars:
coverage below ``min(0.95, the baseline's)``, or dearer than the baseline or the reactive peer.

Rules (all causal: they read the tuning window and the forecasts only, except ``hindsight``):

* ``default``: :func:`optimizer.search.grid_scan`'s rule on the full grid (reproduces
  ``bench_selection.py``'s ``default`` and the scan's pick of ``bench_capacity.py --seeds 0``);
* ``hindsight``: the cheapest grid policy on the *evaluation* window meeting the coverage bar
  (not causal; a bound);
* ``top-K``: the median evaluation regret of the K best policies by tuning objective (how much
  a different choice among the near-best could gain: the selection noise);
* ``grid:NAME``: ``grid_scan`` on a restricted grid (:data:`RESTRICTED`: dimensions fixed at a
  prior, fewer choices);
* ``prior(AGG)``: the fleet prior, the grid policy with the lowest ``AGG`` (sum or median) over
  the *other* pools (leave-one-out; or over ``--prior-from``'s pools: ``fixed``) of its tuning
  objective (:func:`optimizer.search.objective_value`) divided by that pool's tuning-window
  perfect-foresight limit (its reference cost when the limit is 0); ``only`` recommends it,
  ``unless beaten zZ`` keeps the default pick only when its objective is lower than the prior's
  by more than :func:`optimizer.rivals.rival_margin` at ``z = Z`` (the days' noise), ``ties``
  breaks the default scan's ties by the prior instead of by coverage / cost / safety.

A fleet prior computed from the run's other series is not adoptable as is (issue 12: a series'
recommendation must not depend on which other series share the run); ``fixed`` measures the
constant it would become.

Session 9's figures (main 5a9c8ba; sample: ``--forecasts /tmp/fresh8b/capplan-out``, 12 pools;
held-out: the 4 Helios pools, ``--source parquet:... --timezone Asia/Shanghai``, ``--prior-from``
the sample's cache), median / max regret, ``*`` = misses a bar:

==============================  ===============  ===============
rule                            sample           held-out
==============================  ===============  ===============
default                         1.233 / 2.066    1.174 / 1.216*
hindsight (not causal)          1.092 / 1.189    1.031 / 1.048
top-5 / top-20 (median)         1.182 / 1.256    1.168 / 1.226
grid:newsvendor                 1.260 / 2.066    1.155 / 1.198
grid:nv_calibrated              1.260 / 2.066    1.102 / 1.198
grid:nv_p50                     1.324 / 2.066    1.155 / 1.169
grid:nv_none_h1_p50             1.404 / 2.071*   1.155 / 1.225
prior(loo sum) only             1.334 / 1.890*   (fixed) 1.133 / 1.169
prior(loo sum) unless z1.645    1.273 / 1.655    (fixed) 1.133 / 1.198
prior(loo sum) ties             1.233 / 1.650    (fixed) 1.174 / 1.216*
prior(loo median) only          1.213 / 1.430*   (fixed) 1.230 / 1.395*
prior(loo median) unless z1.645 1.233 / 1.474    (fixed) 1.174 / 1.395*
==============================  ===============  ===============

No rule clears issue 12's training bars (median <= 1.20, max <= 1.5) on the sample without
hurting the held-out pools: the restricted grids and a fixed prior help the held-out pools and
hurt the sample. The near-best policies of the tuning week are no better on the evaluation week
than the pick (top-20 1.256); the hindsight policies score 4-40x their tuning week's limit
(they miss its coverage), so the gap to hindsight is the weeks' difference more than selection
noise. ``train/vcJkd``'s 50 tied policies: 40 of the 60 within the tie tolerance of the objective
cost <= 1.5x the limit, none of them covering 0.95 (c80 / p50 top-ups 0.995-1.137 at 0.936-0.944;
c90 1.65 at 0.953-0.956; c95 2.07 at 0.97): no tie-break reaches 1.5 at coverage 0.95.

Also screened in session 9 on the same replays (ad hoc, not in this file), sample / held-out
median and max: the coverage target 0.94-0.97 x penalty 0.25-2 x window/daily/lcb shortfall
(the default, lcb 0.96 x 0.5, is the best on both: 1.233 and 1.174); wider worst-of-neighbours
(also the quantile, the top-up quantile, the daily rule or cap: 1.260-1.422 / 1.174-1.271);
bootstrapped days, the policy most often best (B = 200, seeds 0-2: 1.226-1.261 with
``train/vcMod`` covering 0.822 / 1.155-1.183) and leave-one-day-out (1.242 / 1.220); recency
weights within the week (half-life 1-5 days: 1.227-1.233 / 1.167-1.242; the last 3, 4, 5 days:
1.213, 1.285, 1.198 / 1.161, 1.161, 1.239, ``train/vcira`` dearer than the reactive peer).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_capacity import forecasts_from  # noqa: E402
from capplan import pipeline  # noqa: E402
from capplan.config import load_config  # noqa: E402
from optimizer.intermittent import intermittent_space  # noqa: E402
from optimizer.policy import Metrics  # noqa: E402
from optimizer.rivals import rival_margin  # noqa: E402
from optimizer.search import grid_scan, objective_value, training_space  # noqa: E402
from optimizer.tuning import TUNING_STREAM, PolicyReplay, reference_cost  # noqa: E402

COVERAGE_BAR = 0.95  # issue 12: coverage >= min(0.95, the baseline's)

# restricted grids: dimension -> the values kept (the rest of TRAINING_GRID unchanged)
RESTRICTED = {
    "newsvendor": {"daily_rule": ["newsvendor"]},
    "no_cap": {"daily_cap": ["none"]},
    "nv_p50": {"daily_rule": ["newsvendor"], "quantile": ["p50"]},
    "nv_p90": {"daily_rule": ["newsvendor"], "quantile": ["p90"]},
    "nv_none_p50": {"daily_rule": ["newsvendor"], "daily_cap": ["none"], "quantile": ["p50"]},
    "nv_none_h1_p50": {"daily_rule": ["newsvendor"], "daily_cap": ["none"], "quantile": ["p50"], "headroom": [1.0]},
    "nv_none_h1_p90": {"daily_rule": ["newsvendor"], "daily_cap": ["none"], "quantile": ["p90"], "headroom": [1.0]},
    "calibrated_topup": {"topup_quantile": ["c80", "c90", "c95"]},
    "nv_calibrated": {"daily_rule": ["newsvendor"], "topup_quantile": ["c80", "c90", "c95"]},
}


def key_of(params) -> str:
    """A policy as a cache key (its fields as sorted JSON)."""
    return json.dumps(params.model_dump(), sort_keys=True, default=str)


def _slim(m: Metrics) -> dict:
    return {"cost_usd": m.cost_usd, "coverage": m.coverage, "daily_cost_usd": list(m.daily_cost_usd or []),
            "daily_coverage": list(m.daily_coverage or [])}


def replay_pools(args) -> dict:
    """Series id -> every grid policy's tuning and evaluation replays, and the pool's references
    (module docstring)."""
    cfg = load_config(args.config)
    prep = pipeline.regularise_stage(pipeline.load_stage(args.source, cfg, args.series, args.timezone), cfg)
    pools, t0 = {}, time.perf_counter()
    for task in pipeline.search_tasks(prep, forecasts_from(args.forecasts), cfg, 0):
        if task.kind != "training":
            continue
        s, tune = task.settings, task.tune
        pr, tpr = PolicyReplay("training", s, 0), PolicyReplay("training", s, TUNING_STREAM)
        full = training_space(s.training_bounds.as_dict())
        pts = {}
        for x in full.grid_points():
            p = full.to_params(x)
            pts[key_of(p)] = {"tune": _slim(tpr.replay(p, tune)[0]), "eval": _slim(pr.replay(p, task.evalw)[0])}
        pools[task.series_id] = {
            "pts": pts, "tune_demand": [float(v) for v in tune.demand],
            "limit": pr.oracle(task.evalw).cost_usd, "tune_limit": tpr.oracle(tune).cost_usd,
            "ref": reference_cost(tune), "target": min(1.0, s.coverage_target + s.coverage_margin),
            "penalty": s.penalty, "by": s.coverage_objective, "bounds": s.training_bounds.as_dict(),
            "baseline": _slim(pr.baseline(task.evalw)[0]),
            "reactive": _slim(pr.peers(task.evalw)["reactive"][0])}
        print(f"{task.series_id}: replayed ({time.perf_counter() - t0:.0f} s)", flush=True)
    return pools


class Pool:
    """One pool's cached replays: the tuning objective per policy and the scan on any grid."""

    def __init__(self, sid: str, d: dict):
        self.sid, self.d = sid, d
        self.tune = {k: Metrics(idle_ratio=0.0, unmet=0.0, **v["tune"]) for k, v in d["pts"].items()}
        self.obj = {k: objective_value(m, d["target"], d["ref"], d["penalty"], d["by"]) for k, m in self.tune.items()}
        den = d["tune_limit"] if d["tune_limit"] > 0 else d["ref"]
        self.norm = {k: v / den for k, v in self.obj.items()}
        full = training_space(d["bounds"])
        self.space = intermittent_space("training", d["bounds"], np.asarray(d["tune_demand"]))[0] or full
        self.eligible = [key_of(self.space.to_params(x)) for x in self.space.grid_points()]

    def scan(self, restrict: dict | None = None, score=None):
        """``grid_scan`` on the cached tuning replays (``restrict``: grid values kept per dimension;
        ``score(key)``: replaces the objective). Returns ``(picked key, number tied)``."""
        space = dataclasses.replace(self.space, grid={**self.space.grid, **(restrict or {})})
        by_id = {id(m): k for k, m in self.tune.items()}
        res, _ = grid_scan(lambda p: self.tune[key_of(p)], space, self.d["target"], self.d["ref"], self.d["penalty"],
                           self.d["by"], score=(lambda m: score(by_id[id(m)])) if score else None)
        return key_of(res.best_params), res.n_tied

    def regret(self, k: str) -> float:
        return self.d["pts"][k]["eval"]["cost_usd"] / self.d["limit"] if self.d["limit"] > 0 else float("nan")

    def misses(self, k: str) -> list[str]:
        """Issue 12's bars this policy misses on the evaluation window."""
        e, d, out = self.d["pts"][k]["eval"], self.d, []
        need = min(COVERAGE_BAR, d["baseline"]["coverage"])
        if e["coverage"] < need - 1e-9:
            out.append(f"{self.sid}: coverage {e['coverage']:.3f} < {need:.3f}")
        for rival in ("baseline", "reactive"):
            if e["cost_usd"] > d[rival]["cost_usd"] + 1e-6:
                out.append(f"{self.sid}: dearer than the {rival}")
        return out


def report(name: str, pools: list[Pool], picks: dict[str, str]) -> None:
    """One line per rule: median / max / mean regret, then the misses; then the sorted regrets."""
    regs = {p.sid: p.regret(picks[p.sid]) for p in pools}
    v = np.array(list(regs.values()))
    miss = [m for p in pools for m in p.misses(picks[p.sid])]
    print(f"{name:34s} median {np.median(v):.3f} max {v.max():.3f} mean {v.mean():.3f}  {'; '.join(miss) or 'ok'}")
    print("    " + " ".join(f"{r:.3f} {sid.split('/')[-1]}" for sid, r in sorted(regs.items(), key=lambda t: t[1])))


def fleet_prior(pool: Pool, source: list[Pool], agg: str) -> dict[str, float]:
    """Policy -> ``agg`` (sum or median) over ``source``'s pools other than ``pool`` of the
    normalised tuning objective (module docstring), for ``pool``'s eligible policies."""
    others = [q for q in source if q.sid != pool.sid]
    tab = np.array([[q.norm[k] for k in pool.eligible] for q in others])
    return dict(zip(pool.eligible, tab.sum(0) if agg == "sum" else np.median(tab, 0)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forecasts", type=Path, help="a capplan plan output folder (needed to fill --cache)")
    ap.add_argument("--cache", type=Path, required=True, help="the replays' cache (gzipped JSON): read if it exists, else written")
    ap.add_argument("--prior-from", type=Path, default=None, help="another cache defining a fixed fleet prior")
    ap.add_argument("--config", default=None)
    ap.add_argument("--series", nargs="*", default=None)
    ap.add_argument("--source", default="sample")
    ap.add_argument("--timezone", default="UTC")
    a = ap.parse_args()
    if not a.cache.exists():
        if a.forecasts is None:
            ap.error("--forecasts is needed to fill a new --cache")
        a.cache.write_bytes(gzip.compress(json.dumps(replay_pools(a)).encode()))
    pools = [Pool(s, d) for s, d in json.loads(gzip.decompress(a.cache.read_bytes())).items()]
    default = {p.sid: p.scan() for p in pools}
    report("default", pools, {s: k for s, (k, _) in default.items()})
    hind = {}
    for p in pools:
        need = min(COVERAGE_BAR, p.d["baseline"]["coverage"])
        ok = [k for k in p.eligible if p.d["pts"][k]["eval"]["coverage"] >= need] or p.eligible
        hind[p.sid] = min(ok, key=lambda k: p.d["pts"][k]["eval"]["cost_usd"])
    report("hindsight (not causal)", pools, hind)
    for kk in (5, 20, 100):
        meds = [np.median([p.regret(k) for k in sorted(p.eligible, key=p.obj.get)[:kk]]) for p in pools]
        print(f"top-{kk:<3d} by tuning objective: median over pools of each pool's median regret {np.median(meds):.3f}")
    for name, restrict in RESTRICTED.items():
        report(f"grid:{name}", pools, {p.sid: p.scan(restrict)[0] for p in pools})
    sources = [("loo", pools)]
    if a.prior_from:
        sources.append(("fixed", [Pool(s, d) for s, d in json.loads(gzip.decompress(a.prior_from.read_bytes())).items()]))
    for src_name, src in sources:
        for agg in ("sum", "median"):
            fv = {p.sid: fleet_prior(p, src, agg) for p in pools}
            prior = {p.sid: min(p.eligible, key=lambda k: (fv[p.sid][k], k)) for p in pools}
            tag = f"prior({src_name} {agg})"
            report(f"{tag} only", pools, prior)
            for z in (1.0, 1.645):
                picks = {}
                for p in pools:
                    ko, kp = default[p.sid][0], prior[p.sid]
                    beaten = p.obj[kp] - p.obj[ko] > rival_margin(p.tune[ko], p.tune[kp], z)
                    picks[p.sid] = ko if beaten else kp
                report(f"{tag} unless beaten z{z}", pools, picks)
            ties = {}
            for p in pools:
                rank = {k: i for i, k in enumerate(sorted(p.eligible, key=lambda k: (fv[p.sid][k], k)))}
                # the prior's rank as a relative nudge (at most 1e-7) above grid_scan's tie tolerance (1e-9)
                ties[p.sid] = p.scan(score=lambda k, p=p, rank=rank: p.obj[k] * (1 + 1e-7 * rank[k] / len(rank)))[0]
            report(f"{tag} ties", pools, ties)
    for p in pools:
        k, n = default[p.sid]
        if n > 1:
            tied = [t for t in p.eligible if abs(p.obj[t] - p.obj[k]) <= 1e-9 * max(1.0, abs(p.obj[k]))]
            r = np.array([p.regret(t) for t in tied])
            c = np.array([p.d["pts"][t]["eval"]["coverage"] for t in tied])
            need = min(COVERAGE_BAR, p.d["baseline"]["coverage"])
            print(f"{p.sid}: {n} tied on the scan's score ({len(tied)} on the objective); their regret "
                  f"{r.min():.3f}..{np.median(r):.3f}..{r.max():.3f} (min..median..max), {(r <= 1.5).sum()} <= 1.5, "
                  f"{((r <= 1.5) & (c >= need)).sum()} of them covering >= {need:.3f}; picked {p.regret(k):.3f}")


if __name__ == "__main__":
    main()
