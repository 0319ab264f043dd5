"""`capplan backtest --policies` end to end on a small csv: one training pool with exactly a training
week and two complete weeks, and an inference service one hour long (skipped with a note)."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from capplan.cli.commands.output import to_csv
from capplan.report.policy_table import csv_rows, print_tables
from tests.conftest import REPO, run_cli

T0 = pd.Timestamp("2024-03-04", tz="UTC")


@pytest.fixture(scope="module")
def demand_csv(tmp_path_factory):
    ts = pd.date_range(T0, T0 + pd.Timedelta("21D") - pd.Timedelta("5min"), freq="5min")
    hour = ts.hour.to_numpy() + ts.minute.to_numpy() / 60
    rng = np.random.default_rng(3)
    pool = np.maximum(np.round(30 + 10 * np.sin(2 * np.pi * hour / 24) + rng.normal(0, 2, len(ts))), 0)
    short = pd.date_range(T0 + pd.Timedelta("20D"), periods=60, freq="1min")
    df = pd.concat([pd.DataFrame({"timestamp": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "series_id": "train/pool",
                                  "value": pool, "kind": "training"}),
                    pd.DataFrame({"timestamp": short.strftime("%Y-%m-%dT%H:%M:%SZ"), "series_id": "infer/short",
                                  "value": 2.0, "kind": "inference"})])
    p = tmp_path_factory.mktemp("wf") / "demand.csv"
    df.to_csv(p, index=False)
    return p


@pytest.fixture(scope="module")
def policy_run(demand_csv, fast_config):
    r = subprocess.run([sys.executable, "-m", "capplan", "backtest", "--policies", "--source", f"csv:{demand_csv}",
                        "--config", str(fast_config), "--n-calls", "4", "--format", "json"],
                       capture_output=True, text=True, cwd=REPO, timeout=1500)
    return r


def test_policies_print_every_week_and_the_spread(policy_run):
    r = policy_run
    assert r.returncode == 0, r.stderr[-3000:]
    assert "walk-forward" in r.stderr  # progress on stderr, the document alone on stdout
    doc = json.loads(r.stdout)
    assert list(doc["series"]) == ["train/pool"]
    assert "complete week" in doc["skipped"]["infer/short"]
    weeks = doc["series"]["train/pool"]["weeks"]
    # 21 days: a training week, a tuning week and one scored week
    assert [w["week"] for w in weeks] == [2]
    w = weeks[0]
    assert w["start"] == (T0 + pd.Timedelta("14D")).isoformat()
    assert w["tuning"] == [(T0 + pd.Timedelta("7D")).isoformat(), (T0 + pd.Timedelta("14D")).isoformat()]
    assert set(w["policies"]) >= {"recommended", "baseline", "reactive", "naive_conformal"}
    for f in w["policies"].values():
        assert math.isclose(f["regret"], f["cost_usd"] / w["limit_usd"])
        assert f["regret"] >= 1 - 1e-9  # no causal policy beats perfect foresight
    spread = doc["series"]["train/pool"]["summary"]["recommended"]["spread"]
    assert spread["weeks"] == 1 and spread["min"] == spread["max"] == w["policies"]["recommended"]["regret"]
    assert doc["summary"]["recommended_spread"]["weeks"] == 1

    c = Console(file=io.StringIO(), width=160, color_system=None)
    print_tables(doc, c)
    text = c.file.getvalue()
    assert "2: 2024-03-18" in text and "naive_conformal" in text and "spread" in text
    assert "skipped infer/short" in text
    rows = to_csv(csv_rows(doc)).splitlines()
    assert rows[0].startswith("series_id,week,start,end,tuning_start,tuning_end,policy")
    assert len(rows) == 1 + len(w["policies"])


def test_policies_exit_2_when_no_series_has_two_weeks(demand_csv, fast_config, capsys):
    code, out, err = run_cli(["backtest", "--policies", "--source", f"csv:{demand_csv}", "--series", "infer/short",
                              "--config", str(fast_config), "--quiet"], capsys)
    assert code == 2
    assert "no series has two complete weeks" in err and "infer/short" in err
