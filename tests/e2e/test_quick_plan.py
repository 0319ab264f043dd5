"""`capplan plan --quick` runs end to end, says it was a quick run and lists what it reduced."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd

from capplan.config.quick import apply_quick, quick_reductions
from capplan.config.settings import load_config
from tests.conftest import REPO


def test_quick_plan_runs_and_says_so(tmp_path, fast_config):
    out = tmp_path / "out"
    env = {**os.environ, "COLUMNS": "120"}
    r = subprocess.run([sys.executable, "-m", "capplan", "plan", "--quick", "--config", str(fast_config), "--out",
                        str(out), "--series", "infer/azure-llm-conv,train/vcJkd", "-q"],
                       capture_output=True, text=True, cwd=REPO, timeout=1800, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    text = " ".join(r.stdout.split())
    assert text.startswith("quick run (--quick)") and "for a first look" in text
    assert text.count("quick run (--quick)") == 2  # before the table and after the file count
    assert f"store: {fast_config.parent / 'store'}" in text
    report = json.loads((out / "report.json").read_text())
    run = report["run"]
    assert run["quick"] is True and run["n_calls"] == 8
    assert report["series"]["infer/azure-llm-conv"].get("random_search") is None
    # every reduction is stated, in report.json and in the output
    reductions = run["quick_reductions"]
    assert reductions == quick_reductions(apply_quick(load_config(fast_config)))
    assert any(x.startswith("models: kept in ") and x.split()[3].rstrip(",").endswith("quick") for x in reductions)
    assert any(x.startswith("grid scan: the coarse grid") for x in reductions)
    assert any(x.startswith("windows: 3-day tuning and 3-day evaluation") for x in reductions)
    assert any(x.startswith("search: the grid scan's policy, no Gaussian-process refinement") for x in reductions)
    for x in reductions:
        assert f"reduced: {x}" in text
    # the coarse scan and the 3-day windows were used
    pool = report["series"]["train/vcJkd"]
    assert pool["tuning"]["grid_points"] <= 144
    start, end = (pd.Timestamp(t) for t in pool["evaluation_window"])
    assert pd.Timedelta("2D") < end - start <= pd.Timedelta("3D")
    # the tuning window stays at 3 days (a default plan widens it to a complete week of evidence)
    t_start, t_end = (pd.Timestamp(t) for t in pool["windows"]["tuning"])
    assert pd.Timedelta("2D") < t_end - t_start <= pd.Timedelta("3D")
    # the scan's policy, with no Gaussian-process refinement after it
    assert pool["tuning"]["refinement_kept"] is False
    assert pool["tuning"]["gp_objective"] == pool["tuning"]["anchor_objective"]
    # the training pool's rolling origins 12 hours apart (4 in a default plan)
    bt = pd.read_parquet(out / "backtest.parquet", filters=[("series_id", "==", "train/vcJkd")])
    issued = pd.DatetimeIndex(bt["issued_at"].unique()).sort_values()
    assert len(issued) > 3 and (issued[1:] - issued[:-1]).min() == pd.Timedelta("12h")
