"""policy.yaml's spec.fleet: written with a fleet quota, valid against the DispatcherPolicy schema and CRD, read
back to the same quota, and `capplan export --out` re-renders the Kueue objects from it; without a fleet the
files are as before."""

from __future__ import annotations

import pytest
import yaml

from optimizer.exporters import render_all, write_all
from optimizer.exporters.checks.validate import validate_dir
from optimizer.exporters.fleet.policy_block import fleet_entry, fleet_from_policy, fleet_of
from tests.optimizer.exporters.fleet.test_kueue import _fleet
from tests.optimizer.exporters.test_exporters import PLANS, _cli


def _with_mix():
    q = _fleet()
    q.models["A100-80GB"].mix = {"reserved": {"gpus": 4.0, "gpu_hours": 288.0, "cost_usd": 673.9212345},
                                 "spot": {"gpus": 6.0, "gpu_hours": 400.5, "cost_usd": 624.0},
                                 "on_demand": {"gpus": 2.0, "gpu_hours": 10.0, "cost_usd": 39.0}}
    q.teams["research"].series = ["train/a", "train/b"]
    return q


def test_the_fleet_entry_reads_back_to_the_same_quota():
    q = _with_mix()
    e = fleet_entry(q)
    assert e["teams"]["research"]["quotas"]["A100-80GB"] == {"nominalQuota": 8, "borrowingLimit": 4,
                                                             "lendingLimit": 2}
    assert "borrowingLimit" not in e["teams"]["research"]["quotas"]["H100-80GB"]  # None: no limit, left out
    assert e["models"]["A100-80GB"]["mix"]["onDemand"]["gpuHours"] == 10.0
    back = fleet_of(e)
    assert back.teams == q.teams | {t: q.teams[t].model_copy(update={"namespace": q.teams[t].namespace or t})
                                    for t in q.teams}
    assert back.models["A100-80GB"].mix["reserved"]["cost_usd"] == pytest.approx(673.92)  # rounded for reading
    assert fleet_entry(back) == e  # stable after one round
    assert fleet_from_policy({"spec": {"series": []}}) is None


def test_policy_carries_the_fleet_validates_and_re_renders_the_same_files(tmp_path):
    q = _with_mix()
    out = tmp_path / "out"
    write_all(PLANS, out, fleet=q)
    assert validate_dir(out) == []  # JSON Schema and the generated CRD both accept spec.fleet
    pol = yaml.safe_load((out / "policy.yaml").read_text())
    assert pol["spec"]["fleet"]["cohort"] == "gpu-fleet" and set(pol["spec"]["fleet"]["teams"]) == set(q.teams)
    first = {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.is_file()}
    assert "manifests/a100-80gb-resourceflavor.yaml" in first and "manifests/research-clusterqueue.yaml" in first
    assert _cli(["export", "--out", str(out)]) in (0, None)
    again = {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.is_file()}
    assert again == first
    # a hand-raised quota in policy.yaml is caught when rendered (lint kueue-quota-capacity)
    pol["spec"]["fleet"]["teams"]["research"]["quotas"]["A100-80GB"]["nominalQuota"] = 99
    (out / "policy.yaml").write_text(yaml.safe_dump(pol, sort_keys=False))
    assert _cli(["export", "--out", str(out)]) == 2
    assert (out / "manifests/research-clusterqueue.yaml").read_text() == first["manifests/research-clusterqueue.yaml"]


def test_without_a_fleet_the_files_are_as_before():
    files = render_all(PLANS)
    assert "fleet" not in yaml.safe_load(files["policy.yaml"])["spec"]
    assert not [f for f in files if f.endswith(("clusterqueue.yaml", "resourceflavor.yaml", "localqueue.yaml"))]
    assert list(yaml.safe_load(files["policy.yaml"])["spec"]) == ["series"]
