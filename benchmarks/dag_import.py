"""Time to import capplan's DAG files, as Airflow's DAG processor does.

Prints, per DAG file, the time to import it in a fresh interpreter (Airflow
itself already imported, so only the file and what it pulls in are counted),
plus the time of a whole ``DagBag`` fill. Every run uses a throwaway
``AIRFLOW_HOME``. Reported, not asserted: Airflow's
``dagbag_import_timeout`` (default 30 s) is the hard limit; a few hundred ms
per file is the goal (no TensorFlow, Prophet or network at module level).

    python -m benchmarks dag-import [--repeat 3]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import common

DAGS = common.REPO / "airflow_dags"

PROBE = r"""
import importlib.util, json, sys, time
import airflow.sdk  # noqa: F401  (Airflow's own import is not the DAG file's cost)
path = sys.argv[1]
t = time.perf_counter()
if path == "DAGBAG":
    from airflow.models.dagbag import DagBag
    t = time.perf_counter()
    bag = DagBag(dag_folder=sys.argv[2])
    n, errors = len(bag.dags), len(bag.import_errors)
else:
    spec = importlib.util.spec_from_file_location("bench_dag_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    n, errors = sum(1 for v in vars(mod).values() if type(v).__name__ == "DAG"), 0
dt = time.perf_counter() - t
heavy = sorted(m for m in ("tensorflow", "prophet", "keras", "cmdstanpy", "statsmodels", "pandas") if m in sys.modules)
print("BENCH" + json.dumps({"seconds": dt, "dags": n, "errors": errors, "heavy": heavy}))
"""


def run_once(args: list[str], env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"probe failed for {args}:\n{proc.stderr[-2000:]}")
    return json.loads(line[5:])


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "dag-import")
    ap.add_argument("--repeat", type=int, default=3, help="fresh interpreters per file (median reported)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update({"AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "PYTHONWARNINGS": "ignore"})
        files = sorted(p for p in DAGS.glob("capplan_*.py"))
        print(f"{'file':32} {'median ms':>10} {'min ms':>8} {'DAGs':>5}  heavy modules loaded")
        for target in [*map(str, files), "DAGBAG"]:
            args = [target] if target != "DAGBAG" else ["DAGBAG", str(DAGS)]
            runs = [run_once(args, env) for _ in range(a.repeat)]
            secs = [r["seconds"] * 1000 for r in runs]
            name = Path(target).name if target != "DAGBAG" else "DagBag(airflow_dags/)"
            print(f"{name:32} {statistics.median(secs):10.1f} {min(secs):8.1f} {runs[0]['dags']:5d}  "
                  f"{', '.join(runs[0]['heavy']) or '-'}" + (f"  import errors: {runs[0]['errors']}"
                                                            if runs[0]["errors"] else ""))

