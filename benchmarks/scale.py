"""Benchmark: how `capplan plan` scales with the number of series, and local against Dask.

Run: ``python -m benchmarks scale [--sizes 1 10 100] [--compare 40] [--fast]``

Series are copies of the embedded sample's real series with multiplicative noise
(seeded; ``<id>~k``), so every size plans realistic shapes. Each plan runs in a
fresh subprocess, so its peak RSS is its own. Prints:

1. per size and stage of :data:`capplan.run.pipeline.PLAN`: wall seconds and the peak RSS (MiB,
   this process plus its worker processes, ``resource.getrusage`` high-water marks) after the
   stage (:func:`benchmarks.common.stage_meter`);
   then per stage the fitted growth exponent ``b`` of ``seconds ~ a * n^b``
   (least squares on log-log; 1 = linear);
2. ``--compare N`` series on ``--executor dask`` with 1 worker and with 2 workers
   (each worker single-threaded) in the same run: seconds per stage and the
   speed-up (the target is >= 1.7x on a 2-core machine); ``local`` is printed too;
3. ``--reuse N``: the Airflow hourly case on one store (model registry and cache,
   :mod:`capplan.run.cache`): a cold plan on the series without their last hour, then
   the plan an hour later (one more hour of data), then the same plan again (no
   new data), each against the cold one (target: <= 40 % of the cold run).

``--fast`` uses the test suite's small settings (8 search calls, 2 LSTM epochs);
without it, the defaults. ``--executor``/``--workers`` set the executor of ``--sizes``. Figures on a shared
machine are noisy: compare ratios measured in one run, not absolute seconds across runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import common
from capplan.config.settings import CapplanConfig
from capplan.run import pipeline
from capplan.store.local import Store

ROOT = common.REPO

FAST = {"plan": {"n_calls": 8}, "forecast": {"lstm_epochs": 2, "lstm_max_windows": 400, "prophet_samples": 60}}


def make_source(n: int, path: Path, seed: int = 0, drop_hours: int = 0) -> None:
    """``n`` noisy copies of the sample's series (cycled) as a parquet source with kind and unit,
    without the last ``drop_hours`` hours of each series longer than 2 days."""
    loaded = common.load_history()
    ids = sorted(loaded.frame["series_id"].unique())
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(n):
        src = ids[k % len(ids)]
        g = loaded.frame[loaded.frame["series_id"] == src].copy()
        noise = rng.lognormal(0.0, 0.1, len(g))
        g["value"] = np.where(g["value"].notna(), np.round(g["value"] * noise), np.nan)
        g["series_id"] = f"{src}~{k}"
        end = g["timestamp"].max()
        if drop_hours and end - g["timestamp"].min() > pd.Timedelta(days=2):  # not the one-hour trace
            g = g[g["timestamp"] <= end - pd.Timedelta(hours=drop_hours)]
        g["kind"], g["unit"] = loaded.meta[src].kind, loaded.meta[src].unit
        parts.append(g)
    pd.concat(parts, ignore_index=True).to_parquet(path, index=False)


def one(n: int, executor: str, workers: int | None, fast: bool, models: str | None, store: str | None = None,
        drop_hours: int = 0) -> dict:
    """One plan on ``n`` series in this process: seconds and peak RSS per stage. With ``store``
    the plan runs on that store (its cache reused, :mod:`capplan.run.cache`)."""
    cfg = CapplanConfig.model_validate(FAST if fast else {})
    cfg.plan.executor, cfg.plan.workers = executor, workers
    with tempfile.TemporaryDirectory() as d, common.stage_meter(pipeline.PLAN, children=True) as rows:
        src = Path(d) / "demand.parquet"
        make_source(n, src, drop_hours=drop_hours)
        cfg.models = models or str(Path(d) / "models")
        cfg.store = store or str(Path(d) / "store")
        t0 = time.perf_counter()
        rep = pipeline.run_plan(f"parquet:{src}", cfg, Path(d) / "out", seed=0,
                                store=Store(store) if store else None, publish=False)
        total = time.perf_counter() - t0
    return {"n": n, "executor": executor, "workers": workers, "total_s": round(total, 2), "stages": rows,
            "peak_mib": round(common.peak_rss_mib(children=True)), "planned": len(rep.series),
            "failed": len(rep.failed),
            "reuse": rep.run.reuse, "models": {t: {k: len(v) for k, v in m.items() if k in ("reused", "fitted")}
                                               for t, m in rep.run.models.items()}}


def run_child(n: int, executor: str, workers: int | None, fast: bool, models: str | None = None,
              store: str | None = None, drop_hours: int = 0) -> dict:
    args = [sys.executable, "-m", "benchmarks", "--no-record", "scale", "--one", str(n), "--executor", executor,
            "--drop-hours", str(drop_hours)]
    if workers:
        args += ["--workers", str(workers)]
    if fast:
        args.append("--fast")
    if models:
        args += ["--models", models]
    if store:
        args += ["--store", store]
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if r.returncode != 0 or line is None:
        raise SystemExit(f"plan on {n} series ({executor}) failed:\n{r.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def exponent(xs: list[int], ys: list[float]) -> float:

    ok = [(x, y) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(ok) < 2:
        return float("nan")
    lx, ly = np.log([o[0] for o in ok]), np.log([o[1] for o in ok])
    return float(np.polyfit(lx, ly, 1)[0])


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "scale")
    ap.add_argument("--sizes", type=int, nargs="*", default=[1, 10, 100])
    ap.add_argument("--compare", type=int, default=40, help="series for local vs dask --workers 2 (0: skip)")
    ap.add_argument("--reuse", type=int, default=0, help="series for the cold vs warm-registry runs (0: skip)")
    ap.add_argument("--executor", default="local")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--models", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--store", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--drop-hours", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one is not None:
        print("RESULT " + json.dumps(one(a.one, a.executor, a.workers, a.fast, a.models, a.store, a.drop_hours)),
              flush=True)
        return
    print(f"settings: {'fast (test suite)' if a.fast else 'defaults'}; executor {a.executor}")
    res = []
    for n in a.sizes:
        r = run_child(n, a.executor, a.workers, a.fast)
        res.append(r)
        print(f"\n{n} series: total {r['total_s']:.1f} s, peak RSS {r['peak_mib']} MiB")
        print(f"  {'stage':<12}{'seconds':>10}{'peak MiB':>10}")
        for st, v in r["stages"].items():
            print(f"  {st:<12}{v['s']:>10.1f}{v['peak_mib']:>10}")
    if len(res) > 1:
        print("\ngrowth exponent b (seconds ~ n^b):")
        for st in res[0]["stages"]:
            print(f"  {st:<12}{exponent([r['n'] for r in res], [r['stages'][st]['s'] for r in res]):>6.2f}")
        print(f"  {'total':<12}{exponent([r['n'] for r in res], [r['total_s'] for r in res]):>6.2f}")
    if a.compare:
        one_w = run_child(a.compare, "dask", 1, a.fast)
        two_w = run_child(a.compare, "dask", 2, a.fast)
        print(f"\n{a.compare} series: dask --workers 1 {one_w['total_s']:.1f} s, dask --workers 2 "
              f"{two_w['total_s']:.1f} s, speed-up {one_w['total_s'] / two_w['total_s']:.2f}x (target >= 1.7x)")
        print(f"  {'stage':<12}{'1 worker s':>12}{'2 workers s':>13}{'ratio':>8}")
        for st in one_w["stages"]:
            x, y = one_w["stages"][st]["s"], two_w["stages"][st]["s"]
            print(f"  {st:<12}{x:>12.1f}{y:>13.1f}{(x / y if y else float('nan')):>7.2f}x")
    if a.reuse:
        with tempfile.TemporaryDirectory() as d:
            kw = dict(models=str(Path(d) / "models"), store=str(Path(d) / "store"))
            cold = run_child(a.reuse, a.executor, a.workers, a.fast, drop_hours=1, **kw)
            hour = run_child(a.reuse, a.executor, a.workers, a.fast, **kw)
            same = run_child(a.reuse, a.executor, a.workers, a.fast, **kw)
        print(f"\n{a.reuse} series on one store (registry + cache; target: warm <= 40 % of cold):")
        for label, r in (("cold", cold), ("an hour later", hour), ("again, no new data", same)):
            print(f"  {label:<20}{r['total_s']:>8.1f} s = {100 * r['total_s'] / cold['total_s']:>4.0f} % of cold   "
                  + "  ".join(f"{st} {v['s']:.1f}" for st, v in r["stages"].items()))
            print(f"  {'':<20}reused: {r['reuse']}; plan fits: {r['models']}")

