"""Benchmark: a series' recommendation must not depend on which other series share the run.

Run: ``.venv/bin/python benchmarks/bench_alone.py [--fleet OUT_DIR] [--series ID ...] [--seed 0]
[--source SRC --timezone TZ]``.

Issue 12's "stable across runs" target: every series planned alone (``capplan plan --series ID``,
on a fresh store and model registry, so nothing is reused) and in the full fleet costs within
3 % of each other and chooses the same layers. In a fleet run the daily tier's LSTM is trained
on every series' windows (it is global, DESIGN.md), so the forecasts differ a little between the
two runs; the policy must be robust to that.

``--fleet OUT_DIR`` compares with an existing full-fleet ``capplan plan`` output (same source,
seed and defaults); without it the fleet plan runs first. Each plan runs as its own
``capplan plan`` process with the defaults, ``--no-reuse`` and a store of its own.

Prints one row per series: recommended cost in the fleet and alone (USD), the difference (%),
the recommended policy in each, and whether the layers match (training: the daily rule and cap,
the top-up quantile, whether a reservation and spot are bought; inference: whether forecast
pre-scaling is used, and the rule), then how many series meet the target.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRAINING_LAYERS = ("daily_rule", "daily_cap", "topup_quantile")
TOLERANCE = 0.03  #: issue 12: cost within 3 % alone and in the fleet


def layers(series: dict) -> dict:
    """What a series' recommendation buys, from its ``report.json`` entry: the recommended
    policy's name and, for a searched policy, its layers (module docstring)."""
    rec = series["recommended_policy"]
    p = series["recommended"].get("params", {})
    if rec != "searched":
        return {"policy": rec}
    if series["kind"] == "training":
        return {"policy": rec, **{k: p.get(k) for k in TRAINING_LAYERS},
                "reserved": p.get("reservation_ratio", 0) > 0, "spot": p.get("spot_fraction", 0) > 0}
    return {"policy": rec, "prescale": p.get("prescale_quantile", "none") != "none"}


def plan(out: Path, source: str, timezone: str, seed: int, series: list[str] | None) -> dict:
    """``capplan plan`` in its own process on a fresh store; returns its report.json."""
    cfg = out.parent / f"{out.name}.yaml"
    cfg.write_text(f"store: {out.parent / (out.name + '-store')}\nmodels: {out.parent / (out.name + '-models')}\n")
    args = [sys.executable, "-m", "capplan", "plan", "--config", str(cfg), "--source", source, "--timezone",
            timezone, "--seed", str(seed), "--no-reuse", "--out", str(out), "--format", "json", "-q"]
    for s in series or []:
        args += ["--series", s]
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in (0, 3):
        raise SystemExit(f"capplan plan {' '.join(series or ['(fleet)'])} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return json.loads((out / "report.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleet", type=Path, default=None, help="a full-fleet capplan plan output folder to compare with")
    ap.add_argument("--series", nargs="*", default=None, help="series to plan alone (default: every fleet series)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--source", default="sample")
    ap.add_argument("--timezone", default="UTC")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        fleet = (json.loads((a.fleet / "report.json").read_text()) if a.fleet
                 else plan(Path(d) / "fleet", a.source, a.timezone, a.seed, None))
        print(f"fleet: {len(fleet['series'])} series ({'from ' + str(a.fleet) if a.fleet else 'planned'}, "
              f"{time.perf_counter() - t0:.0f} s)")
        ids = a.series or sorted(fleet["series"])
        print(f"{'series':<24}{'fleet USD':>12}{'alone USD':>12}{'diff %':>8}  {'policy fleet/alone':<28}layers  met")
        met = 0
        for sid in ids:
            t = time.perf_counter()
            alone = plan(Path(d) / sid.replace("/", "_"), a.source, a.timezone, a.seed, [sid])
            f, s = fleet["series"].get(sid), alone["series"].get(sid)
            if f is None or s is None:
                print(f"{sid:<24}  not planned in {'the fleet' if f is None else 'its own run'}")
                continue
            cf, ca = f["recommended"]["cost_usd"], s["recommended"]["cost_usd"]
            diff = (ca - cf) / cf if cf else 0.0
            same = layers(f) == layers(s)
            ok = same and abs(diff) <= TOLERANCE
            met += ok
            pol = f"{f['recommended_policy']}/{s['recommended_policy']}"
            print(f"{sid:<24}{cf:>12,.0f}{ca:>12,.0f}{100 * diff:>+8.1f}  {pol:<28}{'same' if same else 'DIFFER'}  "
                  f"{'yes' if ok else 'no'}   ({time.perf_counter() - t:.0f} s)")
            if not same:
                print(f"{'':<24}fleet {layers(f)}\n{'':<24}alone {layers(s)}")
        print(f"\nwithin {100 * TOLERANCE:.0f} % and the same layers alone and in the fleet: {met} of {len(ids)} "
              f"(target: every series)")


if __name__ == "__main__":
    main()
