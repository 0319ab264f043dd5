"""Benchmark: every policy against the perfect-foresight limit, per series, and the spread over seeds.

Run: ``python -m benchmarks capacity [--forecasts OUT_DIR | --retrain [--keep-forecasts DIR]] [--seeds 0 1 2 3 4]
[--series ID ...] [--n-calls N] [--source SRC --timezone TZ] [--config capplan.yaml]
[--earth 1 10] [--flat 3300] [--earth-cache DIR]``; ``--seeds 0 --series train/vc6YE`` for a
quick slice; ``--source parquet:FILE --timezone Asia/Shanghai --forecasts OUT_DIR`` on unseen traces (plan
them first with the same ``--source``/``--timezone``, so OUT_DIR holds their forecasts)

On the embedded sample's evaluation windows, with the pipeline's own search
stage (:func:`capplan.run.stages.search.search`, run by :func:`benchmarks.common.search_outcomes`):

1. per series and policy (recommended, baseline, each peer of
   :mod:`optimizer.rivals.peers`): regret (cost / the oracle's cost,
   :mod:`optimizer.rivals.perfect_foresight`), coverage and idle ratio, for the first seed;
2. the targets checked on those figures (the fleet's regret, sum of cost / sum of
   the limits, <= 1.18; training: median regret of
   the recommended policy <= 1.20, none above 1.5, coverage >= min(0.95,
   baseline's), no dearer than the baseline or the reactive peer; inference:
   median regret <= 1.30 at coverage >= 0.95, cheaper than the reactive peer);
3. across seeds: each series' recommended cost against its median across
   seeds (largest deviation, %; target: every series within 2 %), and the fleet's cost
   against the baseline's;
4. with ``--earth SCALE ...``, the large-pool case of :mod:`benchmarks.earth_pool` (the
   sample's training pools as one pool, at each scale): regret <= 1.12 and idle ratio within
   0.03 of the perfect-foresight plan's (first seed); with several seeds, their spread in item 3;
   ``--flat GPUS ...`` adds a large flat pool of each level (:func:`benchmarks.earth_pool.flat_pool`),
   judged alike;
5. with ``--hindsight``, per series and policy family, the cheapest policy that
   covers >= 0.95 of the *evaluation* window, chosen on that window
   (:mod:`benchmarks.policy_hindsight`: the training scan of :func:`optimizer.search.policy_search.grid_scan`;
   for inference both families, the ``lookahead`` one on a wider grid, and each
   peer): **not causal**, a bound on what any selection rule over that family
   could reach from the tuning window (the "selection gap" is the recommended
   regret less this one).

Forecasts: ``--forecasts DIR`` reuses the combined rolling-origin forecasts of a
``capplan plan`` output folder (``backtest.parquet``) so only the search runs
per seed; without it the forecast stage runs once (seed 0, several minutes).
The run seeds then vary the search, not the forecasts (the LSTM's seed is the
forecast run's) nor the spot interruptions (one scenario for every seed,
:data:`optimizer.search.tuning.SCENARIO_STREAM`). With ``--retrain`` the forecast stage runs
again for every seed, with that seed, on a fresh store and model registry
(:func:`benchmarks.common.cold_forecasts`; several minutes per seed), so the
spread of item 3 includes the models' own seed (the LSTM's initial weights and
window sampling, Prophet's sampling, the hourly ETS's simulation); item 3 then
also prints each seed's recommended cost per series and each seed's fleet
regret, and ``--keep-forecasts DIR`` writes each seed's rolling forecasts
(every model and the combination) and searched policies there, to trace a
series' spread to a model. The runner records such a run as ``capacity-retrain``
(:func:`record_as`), beside the reuse run's ``capacity`` section. ``--forecast-sets DIR``
reads those saved forecasts back (``DIR/seed-N.parquet`` per seed) and runs only the search on
them, so a selection rule (e.g. ``--noise-ties``) is measured over refitted forecasts in minutes
(recorded as ``capacity-sets``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import common
from benchmarks.earth_pool import earth_pool, flat_pool, scale_rows, scale_targets
from benchmarks.policy_hindsight import hindsight_best
from benchmarks.seed_forecasts import forecast_moves
from capplan.config.settings import CapplanConfig, load_config
from capplan.run.stages.search import search_tasks
from optimizer.rivals.incumbent import recommended_name
from optimizer.search.tuning import SCENARIO_STREAM, PolicyReplay

SEED_SPREAD_PCT = 2.0  #: target: every series within 2 % of its median cost across seeds


def table(outcomes: dict, kinds: dict) -> pd.DataFrame:
    """One row per series and policy: regret, coverage, idle ratio, cost (USD)."""
    rows = []
    for sid, oc in sorted(outcomes.items()):
        reg = oc.regret()
        pols = {"recommended": oc.recommended, "baseline": oc.baseline, **(oc.peers or {})}
        for name, m in pols.items():
            rows.append({"series": sid, "kind": kinds[sid], "policy": name, "regret": reg.get(name, np.nan),
                         "coverage": m.coverage, "idle_ratio": m.idle_ratio, "cost_usd": m.cost_usd,
                         "limit_usd": oc.oracle.cost_usd if oc.oracle is not None else np.nan,
                         "chosen": (recommended_name(oc.recommended_policy, oc.tuning)
                                    if name == "recommended" else "")})
    return pd.DataFrame(rows)


def check_targets(df: pd.DataFrame) -> list[tuple[str, bool, str]]:
    """The targets (module docstring, item 2) on one seed's table: (target, met, figure)."""
    out = []
    piv = {c: df.pivot(index="series", columns="policy", values=c) for c in ("regret", "coverage", "cost_usd")}
    rec = df[df["policy"] == "recommended"]
    fleet = fleet_regret(df)
    out.append(("fleet: regret (sum of cost / sum of the limits) <= 1.18", fleet <= 1.18,
                f"{fleet:.3f} ({rec['cost_usd'].sum():,.0f} / {rec['limit_usd'].sum():,.0f} USD)"))
    for kind, cap_med, cap_max in (("training", 1.20, 1.5), ("inference", 1.30, None)):
        sids = sorted(df.loc[df["kind"] == kind, "series"].unique())
        if not sids:
            continue
        r = piv["regret"].loc[sids]
        cov = piv["coverage"].loc[sids]
        cost = piv["cost_usd"].loc[sids]
        med = float(r["recommended"].median())
        out.append((f"{kind}: median regret of recommended <= {cap_med}", med <= cap_med, f"{med:.3f}"))
        if cap_max is not None:
            mx = float(r["recommended"].max())
            out.append((f"{kind}: no regret above {cap_max}", mx <= cap_max, f"max {mx:.3f}"))
            need = np.minimum(0.95, cov["baseline"])
            bad = [s for s in sids if cov.at[s, "recommended"] < need[s] - 1e-9]
            out.append((f"{kind}: coverage >= min(0.95, baseline's)", not bad, f"{len(bad)} below: {bad}"))
            for peer in ("baseline", "reactive"):
                bad = [s for s in sids if cost.at[s, "recommended"] > cost.at[s, peer] * (1 + 1e-9)
                       or cov.at[s, "recommended"] < cov.at[s, peer] - 1e-9]
                out.append((f"{kind}: no dearer than {peer} at >= its coverage, every series", not bad,
                            f"{len(bad)} fail: {bad}"))
                # the same on cost alone, where the recommendation meets min(0.95, the peer's coverage)
                bad = [s for s in sids if cost.at[s, "recommended"] > cost.at[s, peer] * (1 + 1e-9)
                       or cov.at[s, "recommended"] < min(0.95, cov.at[s, peer]) - 1e-9]
                out.append((f"{kind}: (info) no dearer than {peer} at coverage >= min(0.95, its coverage)", not bad,
                            f"{len(bad)} fail: {bad}"))
                # dominance: the peer is not both cheaper and at least as covering on any series
                bad = [s for s in sids if cost.at[s, peer] < cost.at[s, "recommended"] * (1 - 1e-9)
                       and cov.at[s, peer] >= cov.at[s, "recommended"] - 1e-9]
                out.append((f"{kind}: never dearer than {peer} where {peer} covers as much, every series", not bad,
                            f"{len(bad)} fail: {bad}"))
        else:
            mc = float(cov["recommended"].median())
            out.append((f"{kind}: median coverage of recommended >= 0.95", mc >= 0.95, f"{mc:.3f}"))
            bad = [s for s in sids if cost.at[s, "recommended"] > cost.at[s, "reactive"] * (1 + 1e-9)]
            out.append((f"{kind}: cheaper than reactive", not bad, f"{len(bad)} fail: {bad}"))
    return out


def fleet_regret(df: pd.DataFrame) -> float:
    """The fleet's regret on one seed's :func:`table`: the recommended policies' summed cost over the
    summed perfect-foresight costs (USD / USD, a ratio; 1.0 is perfect)."""
    rec = df[df["policy"] == "recommended"]
    return float(rec["cost_usd"].sum() / rec["limit_usd"].sum())


def spread_table(costs: pd.DataFrame) -> pd.DataFrame:
    """:func:`seed_spread` beside the costs it is made of: per series (rows of ``costs``: series x seed,
    recommended cost in USD), a column ``seed N`` per seed, then ``median_usd`` and ``max_dev_pct``."""
    return pd.concat([costs.rename(columns=lambda s: f"seed {s}"), seed_spread(costs)], axis=1)


def record_as(argv: list[str]) -> str:
    """The RESULTS.md section a run with options ``argv`` is recorded in (:mod:`benchmarks.runner`):
    ``capacity-retrain`` with ``--retrain`` (forecasts refitted per seed), ``capacity-sets`` with
    ``--forecast-sets`` (a retrain's saved forecasts), else ``capacity``."""
    return ("capacity-retrain" if "--retrain" in argv else
            "capacity-sets" if "--forecast-sets" in argv else "capacity")


def keep_forecasts(out: Path, seed: int, fc, outcomes: dict) -> None:
    """Write one seed's rolling forecasts (``seed-N.parquet``: every model's frame and the combination,
    with a ``tier`` column) and searched policies (``seed-N-policies.json``: series -> the recommended
    policy, its cost and the perfect-foresight cost in USD, the searched params) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    frames = [f.assign(tier=name) for name, f in fc.rolling.items() if len(f)]
    pd.concat(frames, ignore_index=True).to_parquet(out / f"seed-{seed}.parquet")
    pols = {sid: {"recommended": oc.recommended_policy, "cost_usd": oc.recommended.cost_usd,
                  "limit_usd": oc.oracle.cost_usd if oc.oracle is not None else None, "params": oc.params}
            for sid, oc in outcomes.items()}
    (out / f"seed-{seed}-policies.json").write_text(json.dumps(pols, indent=1, default=str))


def forecast_set(folder: Path, seed: int):
    """The combined rolling forecasts of ``folder/seed-{seed}.parquet`` (as :func:`keep_forecasts` writes
    them: ``series_id, tier, issued_at, timestamp, p50, p90, p95, p99``; rows of tier ``combined``) as
    :func:`benchmarks.common.combined_only` forecasts. Exits naming the file when it is missing."""
    path = Path(folder) / f"seed-{seed}.parquet"
    if not path.is_file():
        sys.exit(f"--forecast-sets {folder}: no seed-{seed}.parquet; write it with --retrain --keep-forecasts")
    f = pd.read_parquet(path)
    return common.combined_only(f[f["tier"] == "combined"].drop(columns="tier").reset_index(drop=True))


def seed_spread(costs: pd.DataFrame) -> pd.DataFrame:
    """Per series (rows of ``costs``: series x seed, recommended cost in USD): the median across seeds
    (``median_usd``) and the largest deviation from it (``max_dev_pct``, percent of the median; NaN for a
    series whose median is 0)."""
    med = costs.median(axis=1)
    dev = (costs.sub(med, axis=0).abs().div(med.where(med > 0), axis=0) * 100).max(axis=1)
    return pd.DataFrame({"median_usd": med, "max_dev_pct": dev})


def hindsight_table(prep, fc, cfg: CapplanConfig, seed: int, coverage: float = 0.95) -> pd.DataFrame:
    """Per series and family: regret and coverage of the cheapest policy meeting ``coverage`` on the
    evaluation window, chosen on that window (not causal; module docstring, item 5;
    :func:`benchmarks.policy_hindsight.hindsight_best`)."""

    rows = []
    for t in search_tasks(prep, fc, cfg, seed):
        best = hindsight_best(PolicyReplay(t.kind, t.settings, SCENARIO_STREAM), t.tune, t.evalw, coverage)
        for fam, b in best.items():
            rows.append({"series": t.series_id, "kind": t.kind, "family": fam, "hindsight_regret": b.regret,
                         "coverage": b.metrics.coverage if b.metrics else np.nan, "policies": b.n_points,
                         "params": _short(b.params)})
    return pd.DataFrame(rows)


def _short(params) -> str:
    """The hindsight policy's distinguishing parameters, for the table."""
    if not isinstance(params, dict):
        return "" if params is None else str(params)
    keys = (("family", "level_window_s", "headroom_quantile", "target_utilization", "scale_down_window_s")
            if params.get("family") == "lookahead" else
            ("family", "target_utilization", "prescale_quantile", "prescale_lead_s", "scale_down_window_s")
            if "family" in params else
            ("quantile", "daily_rule", "daily_cap", "headroom", "topup_quantile", "topup_headroom"))
    return " ".join(f"{k}={params[k]}" for k in keys)


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "capacity")
    common.add_forecasts(ap)
    common.add_seeds(ap, [0, 1, 2, 3, 4])
    common.add_series(ap)
    ap.add_argument("--n-calls", type=int, default=30, help="evaluations per search (plan.n_calls)")
    common.add_source(ap)
    ap.add_argument("--selection", default=None, help="plan.selection_score for this run (cost, "
                    "daily_regret_q75; default: the config's)")
    ap.add_argument("--earth", type=float, nargs="*", default=None, metavar="SCALE",
                    help="also the large-pool case (benchmarks.earth_pool): the sample's training pools summed "
                    "into one, at each scale (e.g. --earth 1 10), every seed")
    ap.add_argument("--flat", type=float, nargs="*", default=None, metavar="GPUS",
                    help="also a large flat pool of each level (benchmarks.earth_pool.flat_pool: the Earth pool's "
                    "shape in the top 5 %% of the level, e.g. --flat 3300), judged as the large pools")
    ap.add_argument("--earth-cache", type=Path, default=None, metavar="DIR",
                    help="a folder keeping the Earth pools' forecasts between runs")
    ap.add_argument("--hindsight", action="store_true", help="also the cheapest policy per family meeting 0.95 on "
                    "the evaluation window, chosen in hindsight (not causal; a bound for selection rules)")
    ap.add_argument("--retrain", action="store_true", help="run the forecast stage again for every seed, with "
                    "that seed, on a fresh store and model registry (several minutes per seed; not with --forecasts)")
    ap.add_argument("--keep-forecasts", type=Path, default=None, metavar="DIR", help="with --retrain: write each "
                    "seed's rolling forecasts and searched policies to DIR")
    ap.add_argument("--forecast-sets", type=Path, default=None, metavar="DIR", help="per seed N, the rolling "
                    "forecasts DIR/seed-N.parquet that --retrain --keep-forecasts wrote (tier combined), so a "
                    "selection rule is measured over refitted forecasts without refitting them")
    ap.add_argument("--noise-ties", default=None, help="plan.noise_ties for this run (exact, "
                    "cheapest_within_noise; default: the config's)")
    common.add_config(ap)
    a = ap.parse_args(argv)
    if sum(map(bool, (a.retrain, a.forecasts, a.forecast_sets))) > 1:
        ap.error("--retrain, --forecasts and --forecast-sets each choose the forecasts; give one")
    if a.retrain and a.forecasts:
        ap.error("--retrain refits the forecasts per seed; drop --forecasts")
    if a.keep_forecasts and not a.retrain:
        ap.error("--keep-forecasts needs --retrain")
    cfg = load_config(a.config)
    cfg.plan.n_calls = a.n_calls
    if a.selection:
        cfg.plan.selection_score = a.selection
    if a.noise_ties:
        cfg.plan.noise_ties = a.noise_ties
    cfg.plan.random_search = False  # the random-search comparison never changes the recommendation
    t0 = time.perf_counter()
    by_seed = {}
    if a.retrain:
        prep = fc = None
        for seed in a.seeds:
            t = time.perf_counter()
            state = common.cold_forecasts(cfg, a.source, a.series, a.timezone, seed)
            print(f"seed {seed}: forecasts refitted in {time.perf_counter() - t:.0f} s", flush=True)
            if prep is None:
                prep, fc = state.prep, state.fc
            kinds = {sid: state.prep.meta[sid].kind for sid in state.prep.windows}
            t = time.perf_counter()
            outcomes = common.search_outcomes(state, seed)
            by_seed[seed] = table(outcomes, kinds)
            print(f"seed {seed}: search stage {time.perf_counter() - t:.0f} s", flush=True)
            if a.keep_forecasts:
                keep_forecasts(a.keep_forecasts, seed, state.fc, outcomes)
    elif a.forecast_sets:
        state = common.loaded_state(cfg, a.source, a.series, a.timezone)
        prep = state.prep
        kinds = {sid: prep.meta[sid].kind for sid in prep.windows}
        for seed in a.seeds:
            t = time.perf_counter()
            state.fc = fc = forecast_set(a.forecast_sets, seed)
            by_seed[seed] = table(common.search_outcomes(state, seed), kinds)
            print(f"seed {seed}: search stage on {a.forecast_sets}/seed-{seed}.parquet {time.perf_counter() - t:.0f} s",
                  flush=True)
    else:
        state = common.with_forecasts(common.loaded_state(cfg, a.source, a.series, a.timezone), a.forecasts)
        prep, fc = state.prep, state.fc
        kinds = {sid: prep.meta[sid].kind for sid in prep.windows}
        print(f"forecasts ready in {time.perf_counter() - t0:.0f} s", flush=True)
        for seed in a.seeds:
            t = time.perf_counter()
            by_seed[seed] = table(common.search_outcomes(state, seed), kinds)
            print(f"seed {seed}: search stage {time.perf_counter() - t:.0f} s", flush=True)
    first = by_seed[a.seeds[0]]
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    print(f"\nPer series and policy, seed {a.seeds[0]} (evaluation window; regret = cost / perfect-foresight cost)")
    print(first.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    print("\nMedian per kind and policy")
    print(first.groupby(["kind", "policy"])[["regret", "coverage", "idle_ratio"]].median()
          .to_string(float_format=lambda x: f"{x:.3f}"))
    print("\nTargets")
    for name, ok, fig in check_targets(first):
        print(f"  [{'met' if ok else 'MISSED'}] {name}: {fig}")
    if a.hindsight:
        h = hindsight_table(prep, fc, cfg, a.seeds[0])
        rec = first[first["policy"] == "recommended"].set_index("series")["regret"]
        h["recommended_regret"] = h["series"].map(rec)
        print("\nHindsight bound (NOT causal): per family, the cheapest policy covering >= 0.95 of the evaluation "
              "window, chosen on it (peers: a family of one)")
        print(h.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        best = h.groupby("series").agg(kind=("kind", "first"), hindsight_regret=("hindsight_regret", "min"),
                                       recommended_regret=("recommended_regret", "first"))
        for kind, g in best.groupby("kind"):
            print(f"  {kind}: median over series of the best family's hindsight regret "
                  f"{g['hindsight_regret'].median():.3f}, recommended {g['recommended_regret'].median():.3f}")
    big = None
    pools = [earth_pool(s) for s in a.earth or []] + [flat_pool(g) for g in a.flat or []]
    if pools:
        print(f"\nLarge pool (benchmarks.earth_pool), seeds {a.seeds}")
        big = scale_rows(cfg, pools, a.seeds, a.earth_cache)
        print(big[big["seed"] == a.seeds[0]].to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
        for name, ok, fig in scale_targets(big):
            print(f"  [{'met' if ok else 'MISSED'}] {name}: {fig}")
    if len(a.seeds) > 1:
        rec = pd.DataFrame({s: df[df["policy"] == "recommended"].set_index("series")["cost_usd"]
                            for s, df in by_seed.items()})
        if big is not None:
            rec = pd.concat([rec, big.pivot(index="pool", columns="seed", values="cost_usd")])
        spread = seed_spread(rec)
        refit = a.retrain or a.forecast_sets
        print(f"\nSpread over seeds {a.seeds}{' (forecasts refitted per seed)' if refit else ''}: recommended "
              "cost, largest deviation from the series' median (%)")
        print((spread_table(rec) if refit else spread).to_string(float_format=lambda x: f"{x:,.1f}"))
        dev = spread["max_dev_pct"].fillna(0)
        print(f"  series within 2 %: {int((dev <= SEED_SPREAD_PCT).sum())} of {len(dev)}")
        if a.forecast_sets:
            moves = forecast_moves(a.forecast_sets, a.seeds, sorted(prep.windows))
            s0 = a.seeds[0]
            print(f"\nForecasts across those seeds (benchmarks.seed_forecasts): mean |seed - seed {s0}| "
                  f"/ mean |seed {s0}|,"
                  " %, the largest across seeds; combined forecasts beside each series' cost spread")
            comb = moves[moves["tier"] == "combined"].set_index("series")[["p50_pct", "p95_pct"]]
            comb["cost_max_dev_pct"] = spread["max_dev_pct"].reindex(comb.index)
            print(comb.to_string(float_format=lambda x: f"{x:,.3f}"))
            moved = moves[moves["tier"] != "combined"].groupby("tier")[["p50_pct", "p95_pct"]].median()
            print("  members that move (median over series): " + "; ".join(
                f"{t} p50 {r.p50_pct:.2f} % p95 {r.p95_pct:.2f} %" for t, r in moved.iterrows()))
        print(f"  [{'met' if dev.max() <= SEED_SPREAD_PCT else 'MISSED'}] every series (the large pools included) "
              f"within {SEED_SPREAD_PCT:g} % of its median cost: largest {dev.max():.1f} % ({dev.idxmax()})")
        for s, df in by_seed.items():
            r = df[df["policy"] == "recommended"]["cost_usd"].sum()
            b = df[df["policy"] == "baseline"]["cost_usd"].sum()
            print(f"  seed {s}: fleet recommended {r:,.0f} USD vs baseline {b:,.0f} USD "
                  f"({100 * (r / b - 1):+.1f} %){'' if r <= b else '  DEARER'}; fleet regret {fleet_regret(df):.3f}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")

