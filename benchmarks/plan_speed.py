"""Benchmark: `capplan plan` on the full embedded sample, seconds and peak memory per stage.

Run: ``python -m benchmarks plan [--n-calls N] [--series ID ...]``

Prints one line per stage of :data:`capplan.run.pipeline.PLAN` (load, forecast, combine, score,
search, export): wall seconds, and the process's peak RSS (MiB) after the stage
(``resource.getrusage`` high-water mark, so it only grows; :func:`benchmarks.common.stage_meter`),
then the total against a 10-minute budget.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import common
from capplan.config.settings import CapplanConfig
from capplan.run import pipeline


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "plan")
    ap.add_argument("--n-calls", type=int, default=30, help="evaluations per search (plan.n_calls)")
    common.add_series(ap)
    a = ap.parse_args(argv)
    cfg = CapplanConfig()
    cfg.plan.n_calls = a.n_calls
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d, common.stage_meter(pipeline.PLAN) as rows:
        cfg.models = str(Path(d) / "models")  # a cold registry: every model is fitted
        rep = pipeline.run_plan("sample", cfg, Path(d) / "out", series=a.series, seed=0,
                                progress=lambda stage, msg: print(
                                    f"  [{time.perf_counter() - t0:6.1f}s] {stage}: {msg}", flush=True))
    total = time.perf_counter() - t0
    print(f"{'stage':<12}{'seconds':>10}{'peak RSS MiB':>15}")
    for name, v in rows.items():
        print(f"{name:<12}{v['s']:>10.1f}{v['peak_mib']:>15.0f}")
    print(f"{'total':<12}{total:>10.1f}{common.peak_rss_mib():>15.0f}")
    print(f"series: {len(rep.series)}; budget 600 s; ratio total/budget = {total / 600:.2f}")
