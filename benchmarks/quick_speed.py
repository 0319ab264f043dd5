"""Benchmark: a first `capplan plan --quick` against a first default plan, timed in one run.

Run: ``python -m benchmarks quick [--series ID ...] [--executor local|processes]``

Both plans start cold (a fresh store and model registry each, so nothing is reused from a
cache) on the same source and series, one after the other in this process; the quick one
applies :data:`capplan.config.quick.QUICK` and :data:`capplan.config.quick.QUICK_SET`
(:func:`capplan.config.quick.apply_quick`). Prints each plan's seconds and its seconds per stage, what the
quick plan reduced (:func:`capplan.config.quick.quick_reductions`), and the ratio quick / default; the target
is under 1/3.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import common
from capplan.config.quick import apply_quick
from capplan.config.settings import CapplanConfig
from capplan.report.model import Report
from capplan.run import pipeline
from capplan.store.local import Store

TARGET = 1 / 3


def _timed(cfg: CapplanConfig, series: list[str] | None, seed: int) -> tuple[float, Report]:
    with tempfile.TemporaryDirectory() as d:
        cfg.store, cfg.models = str(Path(d) / "store"), str(Path(d) / "models")
        t0 = time.perf_counter()
        rep = pipeline.run_plan("sample", cfg, Path(d) / "out", series=series, seed=seed, store=Store(cfg.store))
        return time.perf_counter() - t0, rep


def fleet_regret(rep: Report) -> float:
    """Σ recommended cost / Σ perfect-foresight cost over the series of ``rep`` that have both
    (USD / USD, a ratio; 1.0 is perfect). NaN when no series has both."""
    pairs = [(s.recommended.cost_usd, s.oracle.cost_usd) for s in rep.series.values()
             if s.oracle is not None and s.recommended.cost_usd is not None]
    limit = sum(o for _, o in pairs)
    return sum(c for c, _ in pairs) / limit if limit > 0 else float("nan")


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "quick")
    common.add_series(ap)
    common.add_seed(ap)
    ap.add_argument("--executor", default=None, choices=["local", "processes"],
                    help="where the per-series work runs (default: plan.executor's default)")
    a = ap.parse_args(argv)
    secs = {}
    for name in ("default", "quick"):
        cfg = CapplanConfig()
        if a.executor:
            cfg.plan.executor = a.executor
        if name == "quick":
            apply_quick(cfg)
        secs[name], rep = _timed(cfg, a.series, a.seed)
        stages = ", ".join(f"{k} {v:.0f}" for k, v in rep.run.stage_seconds.items())
        print(f"{name:<8}{secs[name]:>10.1f} s  ({len(rep.series)} series; stages, s: {stages})", flush=True)
        print(f"{'':<8}fleet regret {fleet_regret(rep):.3f} (Σ recommended cost / Σ perfect-foresight cost; "
              "quick's windows are shorter, so its figure is not the default's)", flush=True)
    for line in rep.run.quick_reductions:
        print(f"quick reduced: {line}")
    ratio = secs["quick"] / secs["default"]
    print(f"ratio quick/default = {ratio:.2f} (target < {TARGET:.2f}: {'met' if ratio < TARGET else 'not met'})")
