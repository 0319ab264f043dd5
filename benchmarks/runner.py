"""The benchmark runner: ``python -m benchmarks [--no-record] [--results FILE] NAME [options]``.

``NAME`` is one of :data:`BENCHMARKS` (``python -m benchmarks list`` prints them);
the options after it are the benchmark's own (``python -m benchmarks NAME --help``).
The runner imports ``benchmarks.<module>``, calls its ``main(argv)``, shows what it
prints as it prints it, and, when it ends without error, records the output in
``benchmarks/RESULTS.md`` (:mod:`benchmarks.results`) unless ``--no-record``, in the section
``NAME``, or the one the module's ``record_as(options)`` names for those options.
A benchmark that fails (exception or a non-zero exit) is not recorded and the
runner exits with its status.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import shlex
import sys
import time
from pathlib import Path

from benchmarks.results import RESULTS, Run, record

#: name -> (module under benchmarks/, what it measures in one line); module names say what they
#: measure so that none repeats a library module's name
BENCHMARKS: dict[str, tuple[str, str]] = {
    "accuracy": ("accuracy", "forecast accuracy of the combination against its peers per lead band (MASE, coverage)"),
    "tier-accuracy": ("tier_accuracy", "each tier against its reference on its own horizon, from a backtest JSON"),
    "persistence": ("persistence_bound", "how far any forecast can beat the last value at 1 h: unchanged share, "
                    "hindsight and causal bounds"),
    "fresh-hour": ("fresh_hour", "the top-up's fresh forecast of the next hour against the latest forecast's "
                   "shifted rows for it (MAE of the hour maximum)"),
    "rescore": ("rescore", "the combination and calibration re-scored on saved member forecasts"),
    "capacity": ("capacity", "every policy against the perfect-foresight limit (regret), spread over seeds"),
    "predictive": ("predictive", "the predictive KEDA rule against cron pre-scaling per inference service, "
                   "by rolling origin"),
    "sharing": ("sharing", "stranded GPUs of the openb pods on the openb nodes: whole-GPU placement against "
                "sharing as capplan recommends (FGD packing, MPS replicas)"),
    "fleet": ("fleet", "a heterogeneous fleet from the sample: cost against each team alone and pooled without "
              "substitution, coverage, fleet regret, placement violations"),
    "spot-cap": ("spot_cap", "the fleet's regret with spot capped at a share of the GPUs bought, against uncapped"),
    "plan": ("plan_speed", "seconds and peak memory per stage of one plan"),
    "quick": ("quick_speed", "a first `capplan plan --quick` against a first default plan, seconds and ratio"),
    "scale": ("scale", "plan time against the number of series; Dask 1 worker against 2; warm reruns"),
    "replay": ("replay_speed", "replay simulator throughput (simulated steps per second)"),
    "tiers": ("tier_fit_cost", "cost of fitting the three tiers against one default Prophet fit"),
    "prometheus": ("prometheus_pull", "capplan's Prometheus pull against a plain query_range (needs promtool)"),
    "dag-import": ("dag_import", "import time of the Airflow DAG files (needs Airflow)"),
    "same-figures": ("same_figures", "a plan at a git revision against the working tree's: the same report figures, "
                     "parquet files and manifests"),
}


class _Tee(io.TextIOBase):
    """Writes to the real stdout and keeps a copy."""

    def __init__(self, out):
        self.out, self.kept = out, io.StringIO()

    def write(self, s: str) -> int:
        self.out.write(s)
        self.kept.write(s)
        return len(s)

    def flush(self) -> None:
        self.out.flush()


def _listing() -> str:
    return "\n".join(f"  {n:14} {d}" for n, (_, d) in BENCHMARKS.items())


def main(argv: list[str] | None = None) -> None:
    """Parse the runner's options, run the named benchmark, record it (module docstring).

    Exits 2 for an unknown benchmark name, with the list of names.
    """
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0],
                                 epilog="benchmarks:\n" + _listing(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-record", action="store_true", help="print only; leave benchmarks/RESULTS.md as it is")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the results file to record in")
    ap.add_argument("name", help="the benchmark, or 'list'")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own options")
    a = ap.parse_args(argv)
    if a.name == "list":
        print(_listing())
        return
    if a.name not in BENCHMARKS:
        ap.error(f"unknown benchmark {a.name!r}; one of: {', '.join(BENCHMARKS)}")
    module = importlib.import_module(f"benchmarks.{BENCHMARKS[a.name][0]}")
    if "-h" in a.args or "--help" in a.args:
        module.main(a.args)
        return
    command = shlex.join(["python", "-m", "benchmarks", a.name, *a.args])
    tee = _Tee(sys.stdout)
    load_before, t0 = os.getloadavg(), time.perf_counter()
    with contextlib.redirect_stdout(tee):
        module.main(a.args)
    # a module may record some option sets in a section of their own (e.g. capacity --retrain)
    name = module.record_as(a.args) if hasattr(module, "record_as") else a.name
    run = Run(name, command, tee.kept.getvalue(), time.perf_counter() - t0, load_before, os.getloadavg())
    if not a.no_record:
        path = record(run, a.results)
        print(f"recorded in {path}", file=sys.stderr)
