"""Benchmark: a first `capplan plan --quick` against a first default plan, timed in one run.

Run: ``python -m benchmarks quick [--series ID ...] [--executor local|processes]``

Both plans start cold (a fresh store and model registry each, so nothing is reused from a
cache) on the same source and series, one after the other in this process; the quick one
applies :data:`capplan.config.QUICK` (:func:`capplan.config.apply_quick`). Prints each plan's
seconds and the ratio quick / default; the target is under 1/3.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import common
from capplan import pipeline
from capplan.config import CapplanConfig, apply_quick
from capplan.store import Store

TARGET = 1 / 3


def _timed(cfg: CapplanConfig, series: list[str] | None, seed: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as d:
        cfg.store, cfg.models = str(Path(d) / "store"), str(Path(d) / "models")
        t0 = time.perf_counter()
        rep = pipeline.run_plan("sample", cfg, Path(d) / "out", series=series, seed=seed, store=Store(cfg.store))
        return time.perf_counter() - t0, len(rep.series)


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
        secs[name], n = _timed(cfg, a.series, a.seed)
        print(f"{name:<8}{secs[name]:>10.1f} s  ({n} series)", flush=True)
    ratio = secs["quick"] / secs["default"]
    print(f"ratio quick/default = {ratio:.2f} (target < {TARGET:.2f}: {'met' if ratio < TARGET else 'not met'})")
