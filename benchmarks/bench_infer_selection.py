"""Benchmark: can an inference service's tuning window rank its policies for the evaluation window?

Run: ``.venv/bin/python benchmarks/bench_infer_selection.py --forecasts OUT_DIR [--series ID ...]
[--coverage 0.95] [--csv DIR] [--source SRC --timezone TZ] [--config capplan.yaml]``
(``OUT_DIR``: a ``capplan plan`` output folder of the same source, as :mod:`benchmarks.bench_capacity`
takes it; the policies replayed here use the forecasts only for the HPA family's pre-scaling).

For each inference series of the run (:func:`capplan.pipeline.search_tasks`, seed 0), every policy
of the hindsight grid (:func:`optimizer.hindsight.hindsight_points`: the HPA scan and the
``lookahead`` family's wider grid, both families whatever the tuning window's length) and each peer
(:mod:`optimizer.peers`) is replayed on

* the **tuning** window, as the tuning does (:data:`optimizer.tuning.TUNING_STREAM`), scored with
  the tuning's objective (:func:`optimizer.search.objective_value` at ``coverage_target +
  coverage_margin``, the configured coverage objective and penalty, and
  :func:`optimizer.tuning.reference_cost`);
* the **evaluation** window, scored the same way (its own reference cost) and as regret
  (cost / :func:`optimizer.oracle.inference_oracle`'s cost), as :mod:`benchmarks.bench_capacity`
  reports it;
* when the tuning window is shorter than a day (:func:`optimizer.tuning.short_window`), also the
  **before-evaluation** window: all the data before the evaluation window (training tail, tuning
  window and any gap between them), as a longer tuning window would be, less its first ``H`` steps
  (the lookahead lead), which serve as its history. Only policies that need
  no forecast are replayed there (``lookahead``, HPA without pre-scaling, the peers): the rolling
  forecasts start at the tuning window.

It prints per series and family: how many policies cover ``--coverage`` of the evaluation window
and the distribution of their regret (how many reach 1.30 and 1.38); the **prior** policies (the
search's anchors, :data:`optimizer.search.INFERENCE_ANCHORS`, and the last observation plus the
coverage target's quantile of the errors, ``lookahead`` at one step and q = ``--coverage``) on the
evaluation window; the evaluation regret of the policy that each window's objective ranks first
(ties: the lowest evaluation regret among them, i.e. the most favourable reading) and the mean over
its ten first; the Spearman rank correlation of the tuning (and before-evaluation) objective with the
evaluation objective; and, of the policies reaching regret <= 1.38 at ``--coverage`` on the
evaluation window, the highest coverage any of them had on the windows before it; and a one-parameter
reference rule, ``ceil(last observed demand) + c`` whole replicas for ``c`` in :data:`MARGINS`
(:func:`fixed_margin`, on the replay's timeline), with the ``c`` a tuning window can pick: the least
one that meets the tuning's coverage target there (``coverage_target + coverage_margin``). Nothing here
is causal except the rankings by the tuning and before-evaluation windows: a diagnostic for
selection rules (issue 12), never a recommendation.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_capacity import forecasts_from  # noqa: E402
from capplan import pipeline  # noqa: E402
from capplan.config import load_config  # noqa: E402
from optimizer.hindsight import hindsight_points  # noqa: E402
from optimizer.lookahead import lead_steps  # noqa: E402
from optimizer.policy import InferenceParams  # noqa: E402
from optimizer.replay import ReplayInput, observed_demand, run_controller  # noqa: E402
from optimizer.search import INFERENCE_ANCHORS, objective_value  # noqa: E402
from optimizer.tuning import TUNING_STREAM, PolicyReplay, SearchTask, reference_cost, short_window  # noqa: E402

THRESHOLDS = (1.30, 1.38)
MARGINS = range(0, 9)  # whole replicas of the fixed-margin reference rule (module docstring)
PARAM_KEYS = ("family", "target_utilization", "prescale_quantile", "prescale_lead_s", "scale_down_window_s",
              "level_window_s", "headroom_quantile")


def before_eval_window(task: SearchTask) -> ReplayInput | None:
    """All the data before the evaluation window as one replay window (no forecasts), its first
    ``H`` steps (:func:`optimizer.lookahead.lead_steps`: before them no decision has seen anything)
    kept as its history; None when less than two steps remain. Its grid is the evaluation window's
    step, ending one step before the evaluation window starts."""
    hb = task.evalw.history_before
    s = task.settings
    warm = lead_steps(task.evalw.step_s, s.cold_start_s, s.metrics_lag_s)
    if hb is None or len(hb) < warm + 2:
        return None
    n, step = len(hb), task.evalw.step_s
    times = task.evalw.times[0] - pd.to_timedelta(np.arange(n, 0, -1) * step, unit="s")
    hb = np.asarray(hb, float)
    return dataclasses.replace(task.evalw, times=times[warm:], demand=hb[warm:], history_before=hb[:warm],
                               hourly_fc={}, hourly_origin_idx=None, hourly_offset=None)


def fixed_margin(inp: ReplayInput, c: int, cold_start_s: int, metrics_lag_s: int):
    """Replay ``max(ceil(observed demand) + c, 1)`` replicas per step (``c`` whole replicas; observed
    demand as :func:`optimizer.replay.observed_demand` gives it, ``metrics_lag_s`` old, new replicas
    serving after ``cold_start_s``): ``(Metrics, series)`` as :func:`optimizer.replay.run_controller`."""
    want = np.maximum(np.ceil(observed_demand(inp, metrics_lag_s) - 1e-9) + c, 1).astype(int)
    return run_controller(inp, lambda now, cur, d, i: want[i], cold_start_s, int(want[0]) if len(want) else 1,
                          metrics_lag_s)


def needs_forecast(p: InferenceParams) -> bool:
    """The policy reads the hourly forecast (HPA pre-scaling)."""
    return p.family == "hpa" and p.prescale_quantile != "none"


def grid_rows(task: SearchTask, coverage: float) -> pd.DataFrame:
    """One row per policy (grid points, priors and peers) with its objective, coverage and regret on
    each window (module docstring); ``prior`` names the prior policies."""
    s = task.settings
    pr, tpr = PolicyReplay(task.kind, s, 0), PolicyReplay(task.kind, s, TUNING_STREAM)
    target = min(1.0, s.coverage_target + s.coverage_margin)
    windows = {"tune": (task.tune, tpr), "eval": (task.evalw, pr)}
    before = before_eval_window(task) if short_window(task.tune) else None
    if before is not None:
        windows["before"] = (before, tpr)
    refs = {k: reference_cost(w) for k, (w, _) in windows.items()}
    limits = {k: pr.oracle(w).cost_usd for k, (w, _) in windows.items()}
    base = pr.space(task.tune).fixed
    priors = {f"prior:anchor_{a['family']}": pr.params({**base, **a}) for a in INFERENCE_ANCHORS}
    priors["prior:last_obs_q"] = pr.params({**base, **INFERENCE_ANCHORS[1], "level_window_s": 0,
                                            "headroom_quantile": coverage})
    policies = [("", p) for p in hindsight_points(pr, task.tune)] + list(priors.items())
    rows = []

    def score(row: dict, key: str, m) -> None:
        row[f"{key}_obj"] = objective_value(m, target, refs[key], s.penalty, s.coverage_objective)
        row[f"{key}_cov"] = m.coverage
        row[f"{key}_regret"] = m.cost_usd / limits[key] if limits[key] > 0 else np.nan

    for prior, p in policies:
        d = p.model_dump()
        row = {"prior": prior, **{k: d[k] for k in PARAM_KEYS}}
        for key, (w, rp) in windows.items():
            if key == "before" and needs_forecast(p):
                continue
            score(row, key, rp.replay(p, w)[0])
        rows.append(row)
    for c in MARGINS:
        row = {"prior": "", "family": "last_obs+c", "margin": c}
        for key, (w, _) in windows.items():
            score(row, key, fixed_margin(w, c, s.cold_start_s, s.metrics_lag_s)[0])
        rows.append(row)
    peers = {key: rp.peers(w) for key, (w, rp) in windows.items()}
    for name in peers["eval"]:
        row = {"prior": "", "family": name}
        for key in windows:
            score(row, key, peers[key][name][0])
        rows.append(row)
    return pd.DataFrame(rows)


def summarise(sid: str, df: pd.DataFrame, coverage: float, target: float) -> None:
    """Print the per-series figures of the module docstring (``target``: the tuning's coverage target)."""
    grid = df[df["prior"] == ""]
    ok_eval = grid["eval_cov"] >= coverage - 1e-12
    fams = ", ".join(f"{f} {n}" for f, n in grid["family"].value_counts().items())
    print(f"\n== {sid}: {len(grid)} policies ({fams})")
    print(f"  evaluation window, policies covering >= {coverage}:")
    for fam, g in grid[ok_eval].groupby("family"):
        r = g["eval_regret"]
        print(f"    {fam:16s} {len(g):5d} of {int((grid['family'] == fam).sum()):5d}: regret min {r.min():.3f} "
              f"q25 {r.quantile(0.25):.3f} median {r.median():.3f}; "
              + ", ".join(f"<= {t:.2f}: {int((r <= t).sum())}" for t in THRESHOLDS))
    for fam in sorted(set(grid["family"]) - set(grid.loc[ok_eval, "family"])):
        print(f"    {fam:16s}     0 of {int((grid['family'] == fam).sum()):5d}")
    print("  prior policies on the evaluation window:")
    for _, r in df[df["prior"] != ""].iterrows():
        print(f"    {r['prior']:22s} level {r['level_window_s']:>5.0f} s q {r['headroom_quantile']:.3f} "
              f"target {r['target_utilization']:.2f} sd-window {r['scale_down_window_s']:>4.0f} s: "
              f"regret {r['eval_regret']:.3f} coverage {r['eval_cov']:.3f} (tuning coverage {r['tune_cov']:.3f})")
    for key in [k for k in ("tune", "before") if f"{k}_obj" in grid]:
        g = grid.dropna(subset=[f"{key}_obj"])
        rk = g.sort_values([f"{key}_obj", "eval_regret"])
        first = rk.iloc[0]
        top = rk.head(10)
        lab = {"tune": "tuning window", "before": "before-evaluation window"}[key]
        print(f"  ranked by the {lab}'s objective ({len(g)} policies):")
        print(f"    first: {_name(first)} -> evaluation regret {first['eval_regret']:.3f} coverage "
              f"{first['eval_cov']:.3f}; its ten first: mean regret {top['eval_regret'].mean():.3f}, "
              f"{int((top['eval_cov'] >= coverage - 1e-12).sum())} of 10 cover {coverage}")
        for fam, gf in g.groupby("family"):
            if len(gf) > 2:
                rho = spearmanr(gf[f"{key}_obj"], gf["eval_obj"])[0]
                both = gf[(gf[f"{key}_cov"] >= coverage - 1e-12) & (gf["eval_cov"] >= coverage - 1e-12)]
                rho2 = spearmanr(both[f"{key}_regret"], both["eval_regret"])[0] if len(both) > 2 else np.nan
                print(f"    {fam:16s} Spearman(objective, evaluation objective) {rho:+.3f}; regret among the "
                      f"{len(both)} covering {coverage} on both {rho2:+.3f}")
    fm = grid[grid["family"] == "last_obs+c"].sort_values("margin")
    if len(fm):
        print("  last observation + c replicas (evaluation regret/coverage): "
              + "  ".join(f"+{int(r['margin'])}: {r['eval_regret']:.3f}/{r['eval_cov']:.3f}" for _, r in fm.iterrows()))
        tgt = min(1.0, target)
        pick = fm[fm["tune_cov"] >= tgt - 1e-12]
        if len(pick):
            r = pick.iloc[0]
            print(f"    least c covering {tgt:.2f} of the tuning window: +{int(r['margin'])} -> evaluation regret "
                  f"{r['eval_regret']:.3f} coverage {r['eval_cov']:.3f}")
    good = grid[ok_eval & (grid["eval_regret"] <= THRESHOLDS[-1])]
    for fam, g in good.groupby("family"):
        cov = ", ".join(f"{k} window {g[f'{k}_cov'].max():.3f}" for k in ("tune", "before") if f"{k}_cov" in g)
        print(f"  {fam}: the {len(g)} policies at regret <= {THRESHOLDS[-1]} covering {coverage} of the evaluation "
              f"window cover at most: {cov}")


def _name(r: pd.Series) -> str:
    if r["family"] == "lookahead":
        return (f"lookahead level {r['level_window_s']:.0f} s q {r['headroom_quantile']:.3f} target "
                f"{r['target_utilization']:.2f} sd-window {r['scale_down_window_s']:.0f} s")
    if r["family"] == "hpa":
        return (f"hpa target {r['target_utilization']:.2f} prescale {r['prescale_quantile']} lead "
                f"{r['prescale_lead_s']:.0f} s sd-window {r['scale_down_window_s']:.0f} s")
    if r["family"] == "last_obs+c":
        return f"last observation + {int(r['margin'])} replicas"
    return str(r["family"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forecasts", type=Path, required=True, help="a capplan plan output folder of the same source")
    ap.add_argument("--series", nargs="*", default=None, help="series ids (default: every inference series)")
    ap.add_argument("--coverage", type=float, default=0.95)
    ap.add_argument("--csv", type=Path, default=None, help="also write each series' rows to DIR/<series>.csv")
    ap.add_argument("--source", default="sample")
    ap.add_argument("--timezone", default="UTC")
    ap.add_argument("--config", default=None)
    a = ap.parse_args()
    cfg = load_config(a.config)
    prep = pipeline.regularise_stage(pipeline.load_stage(a.source, cfg, a.series, a.timezone), cfg)
    tasks = [t for t in pipeline.search_tasks(prep, forecasts_from(a.forecasts), cfg, 0) if t.kind == "inference"]
    for t in tasks:
        df = grid_rows(t, a.coverage)
        if a.csv is not None:
            a.csv.mkdir(parents=True, exist_ok=True)
            df.to_csv(a.csv / f"{t.series_id.replace('/', '_')}.csv", index=False)
        print(f"{t.series_id}: tuning window {len(t.tune.times)} steps of {t.tune.step_s} s, evaluation window "
              f"{len(t.evalw.times)} steps", flush=True)
        summarise(t.series_id, df, a.coverage, t.settings.coverage_target + t.settings.coverage_margin)


if __name__ == "__main__":
    main()
