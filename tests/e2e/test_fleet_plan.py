"""`capplan plan` with fleet keys writes the fleet's Kueue objects (a ResourceFlavor per GPU model the quotas
use, a ClusterQueue and LocalQueue per team in one cohort), policy.yaml's spec.fleet and fleet.parquet; the folder
validates, and `capplan export --out` re-renders the same Kueue objects from policy.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tests.conftest import FAST_CONFIG, REPO


def _capplan(*args, timeout=1800):
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "capplan", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout, env=env)


def test_a_fleet_plan_writes_its_kueue_quotas(tmp_path):
    cfg = yaml.safe_load(FAST_CONFIG)
    cfg["fleet"] = {"name": "research"}
    cfg["series"] = [{"id": "train/vc6YE", "gpu_models": ["A100-80GB", "H100-80GB"], "min_gpu_memory_gb": 80},
                     {"id": "train/vcJLV", "gpu_models": ["A100-40GB", "A100-80GB"], "namespace": "team-ml"}]
    conf = tmp_path / "capplan.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    r = _capplan("plan", "--quick", "--config", str(conf), "--series", "train/vc6YE,train/vcJLV", "--out", str(out),
                 "-q")
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    fleet = report["fleet"]
    docs = {p.name: yaml.safe_load(p.read_text()) for p in (out / "manifests").glob("*.yaml")}
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs.values() if d["apiVersion"].startswith("kueue")}
    flavors = {n for k, n in kinds if k == "ResourceFlavor"}
    queues = {n for k, n in kinds if k == "ClusterQueue"}
    assert "team-ml" in queues and len(queues) == 2 and {n for k, n in kinds if k == "LocalQueue"} == queues
    assert flavors and flavors <= {m.lower() for m in fleet["mix"]}
    policy = yaml.safe_load((out / "policy.yaml").read_text())["spec"]["fleet"]
    assert policy["cohort"] == "research" and set(policy["teams"]) == queues
    for m, e in policy["models"].items():
        assert e["mix"]["spot"]["gpuHours"] == pytest.approx(fleet["mix"][m]["spot"]["gpu_hours"], rel=1e-3, abs=0.01)
        held = sum(t["quotas"][m]["nominalQuota"] for t in policy["teams"].values() if m in t["quotas"])
        assert held <= e["capacityGpus"]
    for d in docs.values():
        if d["kind"] == "ClusterQueue":
            assert d["spec"]["cohortName"] == "research"
            for f in d["spec"]["resourceGroups"][0]["flavors"]:
                assert f["name"] in flavors
    # vc6YE (80 GB floor) is never placed on a smaller model, and its team lists no such flavor
    assert set(fleet["series"]["train/vc6YE"]["placement"]) <= {"A100-80GB", "H100-80GB"}
    hourly = pd.read_parquet(out / "fleet.parquet")
    assert {"timestamp", "gpu_model", "capacity_gpus", "demand_gpus"} <= set(hourly.columns)
    assert hourly["timestamp"].nunique() == fleet["hours"] and "fleet.parquet" in report["run"]["files"]
    v = _capplan("export", "--validate", str(out), timeout=600)
    assert v.returncode == 0, v.stdout[-2000:]
    before = {p.name: p.read_text() for p in (out / "manifests").glob("*.yaml")}
    e = _capplan("export", "--out", str(out), "--config", str(conf), timeout=600)
    assert e.returncode == 0, e.stderr[-2000:]
    after = {p.name: p.read_text() for p in (out / "manifests").glob("*.yaml")}
    assert after == before
