"""Manifests a platform engineer can apply as-is.

Each test stands for one kind of fault and checks the value that is right.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from capplan.config.settings import CapplanConfig
from optimizer.exporters import export_warnings, render_all, write_all
from optimizer.exporters.checks.lint import lint_object
from optimizer.exporters.checks.schemas import default_schemas_dir
from optimizer.exporters.checks.validate import validate_dir, validate_object
from optimizer.exporters.crd import CRD_FILE, crd_text
from optimizer.inference.prescale import fallback_replicas, prescale_windows
from optimizer.plan.history_levels import baseline_levels, last_nonzero_peak
from optimizer.plan.policy import InferenceParams
from tests.optimizer.exporters.test_exporters import PLANS, _cli, inference, load, rules, training

T0 = pd.Timestamp("2026-11-30T00:00:00Z")  # a Monday


def forecast(values_per_hour, issued=T0 - pd.Timedelta("5min")) -> pd.DataFrame:
    """A plan forecast on the 5-minute grid from T0 whose quantiles all equal the given hourly values."""
    ts = pd.date_range(issued + pd.Timedelta("5min"), periods=12 * len(values_per_hour), freq="5min")
    v = np.repeat(np.asarray(values_per_hour, dtype=float), 12)
    return pd.DataFrame({"series_id": "infer/x", "tier": "combined", "issued_at": issued, "timestamp": ts,
                         "p50": v, "p90": v, "p95": v, "p99": v})


PARAMS = InferenceParams(target_utilization=0.5, min_replicas=2, max_replicas=100, prescale_quantile="p90",
                         prescale_lead_s=600)


def so_of(out: Path) -> dict:
    return load(next((out / "manifests").glob("*-scaledobject.yaml")))


# 1 ------------------------------------------------------------------------------------------------
def test_prescale_window_is_as_long_as_its_peak_in_the_series_timezone(tmp_path):
    # flat at 5 (10 replicas at 0.5) all week, one 3-hour peak of 20 (40 replicas) on Tuesday 02:00-05:00 UTC
    hours = [5.0] * 168
    hours[24 + 2: 24 + 5] = [20.0] * 3
    (w,) = prescale_windows(forecast(hours), PARAMS)
    assert w["desired_replicas"] == 40
    start, end = pd.Timestamp(w["start"]), pd.Timestamp(w["end"])
    assert end - start == pd.Timedelta("3h")  # as long as the peak, 10 min early (the tuned lead)
    assert start == T0 + pd.Timedelta("1D 2h") - pd.Timedelta("10min")
    # a flat forecast (e.g. a one-hour trace) has no peak: no window that pins the service for a week
    assert prescale_windows(forecast([18.0] * 168), PARAMS) == []
    # a steady rise: every window shorter than a day
    ws = prescale_windows(forecast(np.linspace(1, 40, 168)), PARAMS)
    assert ws and all(pd.Timestamp(x["end"]) - pd.Timestamp(x["start"]) <= pd.Timedelta("1D") for x in ws)
    # in the series' timezone: 01:50 UTC Tuesday is 09:50 Tuesday in Asia/Shanghai
    plan = inference()
    plan.plan["prescale"] = [w]
    plan.timezone = "Asia/Shanghai"
    write_all([plan], tmp_path)
    cron = so_of(tmp_path)["spec"]["triggers"][1]["metadata"]
    assert (cron["start"], cron["end"], cron["timezone"]) == ("50 9 * * 2", "50 12 * * 2", "Asia/Shanghai")


def test_validate_flags_cron_end_not_after_start_and_windows_over_a_day(tmp_path, capsys):
    write_all(PLANS, tmp_path)
    f = next((tmp_path / "manifests").glob("*-scaledobject.yaml"))
    good = load(f)
    for end, words in (("39 19 * * 4", "not after"), ("0 20 * * 5", "lasts 24.3 h")):
        so = copy.deepcopy(good)
        so["spec"]["triggers"][1]["metadata"].update(start="40 19 * * 4", end=end)
        (p,) = lint_object("so.yaml", so)
        assert (p.rule, p.path) == ("cron-trigger", "spec.triggers[1].metadata.end") and words in p.message
    so = copy.deepcopy(good)
    # a weekly window that wraps round
    so["spec"]["triggers"][1]["metadata"].update(start="40 19 * * 4", end="39 19 * * 4")
    f.write_text(yaml.safe_dump(so))
    capsys.readouterr()
    assert _cli(["export", "--validate", str(tmp_path)]) == 2
    assert "[cron-trigger]" in capsys.readouterr().out


# 2 ------------------------------------------------------------------------------------------------
def test_fallback_serves_forecast_p95_for_the_coming_day_not_max_replicas(tmp_path):
    hours = [10.0] * 24 + [45.0] * 144  # 20 replicas today; a later surge must not set the fallback
    f = forecast(hours)
    f.loc[f["timestamp"] == T0 + pd.Timedelta("3h"), "p95"] = 13.2  # the day's p95 peak: ceil(13.2 / 0.5) = 27
    assert fallback_replicas(f, PARAMS) == 27
    plan = inference()
    plan.plan["fallback_replicas"] = 27
    write_all([plan], tmp_path)
    so = so_of(tmp_path)
    assert so["spec"]["fallback"]["replicas"] == 27 < so["spec"]["maxReplicaCount"]
    line = next(x for x in next((tmp_path / "manifests").glob("*-scaledobject.yaml")).read_text().splitlines()
                if x.strip().startswith("replicas: 27"))
    assert "p95" in line and "next 24 h" in line


# 3 ------------------------------------------------------------------------------------------------
def test_idle_pool_gets_a_nonzero_cap_and_a_warning(tmp_path):
    idle = training("train/idle")
    idle.plan.update(reserved_gpus=0, on_demand_gpus=0, spot_gpus=0, on_demand_hourly_gpus=0, capability_gpus=0,
                     deserved_gpus=0, quota_gpus=16.0, last_peak_gpus=6.0)
    no_quota = training("train/idle2")
    no_quota.plan.update(reserved_gpus=0, on_demand_gpus=0, spot_gpus=0, on_demand_hourly_gpus=0,
                         capability_gpus=0, deserved_gpus=0, quota_gpus=None, last_peak_gpus=6.0)
    write_all([idle, no_quota, training()], tmp_path)
    caps = {load(p)["metadata"]["annotations"]["capplan.io/series-id"]: load(p)["spec"]["capability"]["nvidia.com/gpu"]
            for p in (tmp_path / "manifests").glob("*-queue.yaml")}
    assert caps["train/idle"] == "16" and caps["train/idle2"] == "6"  # the quota, else the last non-zero peak
    warns = export_warnings([idle, no_quota, training()])
    assert set(warns) == {"train/idle", "train/idle2"}
    assert all(w.startswith("export:") and "instead of 0" in w for ws in warns.values() for w in ws)
    # the last non-zero peak is that of the last day with demand, even after days of zeros
    t = pd.date_range("2026-11-20", periods=10 * 288, freq="5min", tz="UTC")
    v = np.zeros(len(t))
    v[288 * 4 + 10] = 7.0  # the peak of day 5; days 6-10 are idle
    v[288 * 2 + 10] = 9.0
    assert last_nonzero_peak(pd.DataFrame({"timestamp": t, "value": v})) == 7.0


# 4 ------------------------------------------------------------------------------------------------
def test_volcano_quantities_fit_plan_and_quota(tmp_path):
    big = training("train/vc6YE")  # the plan's cap is about twice the quota
    big.plan.update(reserved_gpus=100, on_demand_gpus=20, spot_gpus=30, on_demand_hourly_gpus=0, capability_gpus=387,
                    deserved_gpus=140, quota_gpus=208.0)
    spot = training("train/vc3sl")  # deserved below what the plan buys
    spot.plan.update(reserved_gpus=0, on_demand_gpus=0, spot_gpus=45, on_demand_hourly_gpus=0, capability_gpus=70,
                     deserved_gpus=27, quota_gpus=64.0)
    write_all([big, spot], tmp_path)
    qs = {load(p)["metadata"]["annotations"]["capplan.io/series-id"]: load(p)["spec"]
          for p in (tmp_path / "manifests").glob("*-queue.yaml")}
    g = {s: (int(q["guarantee"]["resource"]["nvidia.com/gpu"]), int(q["deserved"]["nvidia.com/gpu"]),
             int(q["capability"]["nvidia.com/gpu"])) for s, q in qs.items()}
    assert g["train/vc6YE"] == (100, 150, 208)  # capability = quota; deserved = what it buys
    assert g["train/vc3sl"] == (0, 45, 64)
    # configured: the plan's cap may exceed the quota, and the Queue says so
    out2 = tmp_path / "plan"
    write_all([big], out2, {"capability_limit": "plan"})
    assert load(next((out2 / "manifests").glob("*-queue.yaml")))["spec"]["capability"]["nvidia.com/gpu"] == "387"
    # lint: capability above the quota without that annotation, deserved below what the plan buys
    q = load(next((tmp_path / "manifests").glob("*vc6ye*-queue.yaml")))
    q["spec"]["capability"]["nvidia.com/gpu"] = "387"
    q["spec"]["deserved"]["nvidia.com/gpu"] = "27"
    probs = [p for p in lint_object("q.yaml", q) if p.rule == "volcano-queue-quota"]
    assert {p.path for p in probs} == {"spec.capability.nvidia.com/gpu", "spec.deserved.nvidia.com/gpu"}
    # the plan buying more than the quota is capped at the quota, with a warning
    over = training("train/over")
    over.plan.update(reserved_gpus=10, on_demand_gpus=0, spot_gpus=80, on_demand_hourly_gpus=0, capability_gpus=95,
                     quota_gpus=64.0)
    assert any("above its quota of 64" in w for w in export_warnings([over])["train/over"])


# 5 ------------------------------------------------------------------------------------------------
def test_authentication_only_when_the_config_names_credentials(tmp_path):
    write_all(PLANS, tmp_path)  # no Prometheus configured
    so = so_of(tmp_path)
    prom = so["spec"]["triggers"][0]
    assert "authenticationRef" not in prom and "authModes" not in prom["metadata"]
    assert not list(tmp_path.rglob("*triggerauthentication*"))
    text = next((tmp_path / "manifests").glob("*-scaledobject.yaml")).read_text()
    assert "serverAddress: http://prometheus-operated.monitoring.svc:9090  # PLACEHOLDER" in text
    assert any("placeholder" in w for w in export_warnings(PLANS)["infer/llm-chat"])
    cfg = CapplanConfig.model_validate({"prometheus": {"url": "https://prom.corp:9090", "bearer_token_env": "TOK"}})
    out = tmp_path / "auth"
    write_all(PLANS, out, cfg.export)
    prom = so_of(out)["spec"]["triggers"][0]
    assert prom["metadata"]["serverAddress"] == "https://prom.corp:9090" and prom["metadata"]["authModes"] == "bearer"
    auth = load(next(out.rglob("*triggerauthentication.yaml")))
    assert auth["spec"]["secretTargetRef"][0]["parameter"] == "bearerToken"
    plain = CapplanConfig.model_validate({"prometheus": {"url": "http://prom.lan:9090"}})
    assert "authModes" not in so_of_written(tmp_path / "plain", plain.export)["spec"]["triggers"][0]["metadata"]
    assert export_warnings(PLANS, plain.export) == {}


def so_of_written(out: Path, settings) -> dict:
    write_all(PLANS, out, settings)
    return so_of(out)


# 6 ------------------------------------------------------------------------------------------------
def test_namespace_per_series(tmp_path):
    cfg = CapplanConfig.model_validate({"series": [
        {"id": "infer/llm-chat", "kind": "inference", "unit": "replica", "query": "sum(up)", "namespace": "llm",
         "target": "chat-server"},
        {"id": "infer/other", "kind": "inference", "unit": "replica", "query": "sum(up)", "namespace": "batch"}],
        "export": {"namespace": "serving", "targets": {"infer/other": {"namespace": "edge"}}}})
    other = inference("infer/other")
    write_all([inference(), other], tmp_path, cfg.export)
    by = {load(p)["metadata"]["annotations"]["capplan.io/series-id"]: load(p)
          for p in (tmp_path / "manifests").glob("*-scaledobject.yaml")}
    assert by["infer/llm-chat"]["metadata"]["namespace"] == "llm"
    assert by["infer/llm-chat"]["spec"]["scaleTargetRef"]["name"] == "chat-server"
    assert 'namespace="llm"' in by["infer/llm-chat"]["spec"]["triggers"][0]["metadata"]["query"]
    assert by["infer/other"]["metadata"]["namespace"] == "edge"  # export.targets wins over the series entry
    with pytest.raises(Exception, match="RFC 1123"):
        CapplanConfig.model_validate({"export": {"targets": {"infer/x": {"namespace": "Bad_NS"}}}})


# 7 ------------------------------------------------------------------------------------------------
def test_tuned_numbers_carry_origin_and_baseline_and_policy_is_rounded(tmp_path):
    plan = inference()
    plan.params["target_utilization"] = 0.7897946257902195
    plan.plan["target_utilization"] = 0.7897946257902195
    plan.recommended = plan.recommended.model_copy(update={"cost_usd": 17797.260000000002})
    write_all([plan, training()], tmp_path)
    text = next((tmp_path / "manifests").glob("*-scaledobject.yaml")).read_text()
    lines = {ln.split(":")[0].strip().lstrip("- "): ln for ln in text.splitlines()}
    for key in ("minReplicaCount", "maxReplicaCount", "threshold", "replicas", "desiredReplicas"):
        assert "#" in lines[key], key
    assert "baseline: 6 (1.5 x the last day's peak)" in lines["minReplicaCount"]
    windows = [ln for ln in text.splitlines() if "stabilizationWindowSeconds" in ln]
    assert len(windows) == 2 and "300 s window" in windows[1] and "0 s window" in windows[0]
    q = next((tmp_path / "manifests").glob("*-queue.yaml")).read_text()
    assert all("# " in ln for ln in q.splitlines() if ln.strip().startswith(("guarantee:", "deserved:", "capability:")))
    pol = (tmp_path / "policy.yaml").read_text()
    assert "0.7897946257902195" not in pol and "targetUtilization: 0.7898" in pol
    assert "17797.260000000002" not in pol and "costUsd: 17797.26" in pol
    assert baseline_levels("inference", pd.DataFrame({"timestamp": [T0], "value": [4.0]}))["floor_replicas"] == 6
    # the manifests use the rounded values too, so a re-render from policy.yaml changes nothing
    assert "threshold: '78.98'" in text
    assert _cli(["export", "--out", str(tmp_path), "--diff"]) == 0


# 8 ------------------------------------------------------------------------------------------------
def test_validate_checks_keda_trigger_metadata_by_type(tmp_path, capsys):
    write_all(PLANS, tmp_path)
    f = next((tmp_path / "manifests").glob("*-scaledobject.yaml"))
    so = load(f)
    so["spec"]["triggers"][0]["metadata"]["threshold"] = "abc"
    so["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = "no"
    so["spec"]["triggers"][1]["metadata"]["desiredReplicas"] = "ten"
    found = {(p.rule, p.path) for p in lint_object("so.yaml", so)}
    assert ("keda-trigger-metadata", "spec.triggers[0].metadata.threshold") in found
    assert ("keda-trigger-metadata", "spec.triggers[0].metadata.ignoreNullValues") in found
    assert ("keda-trigger-metadata", "spec.triggers[1].metadata.desiredReplicas") in found
    f.write_text(yaml.safe_dump(so))
    capsys.readouterr()
    assert _cli(["export", "--validate", str(tmp_path)]) == 2
    assert "'abc' is not a valid prometheus threshold" in capsys.readouterr().out


# 9 ------------------------------------------------------------------------------------------------
def test_export_exit_codes(tmp_path, capsys):
    out = tmp_path / "out"
    write_all(PLANS, out)
    assert _cli(["export", "--out", str(out), "--diff"]) == 0  # nothing differs
    f = next((out / "manifests").glob("*-scaledobject.yaml"))
    f.write_text(f.read_text().replace("threshold: '65'", "threshold: 'abc'"))
    assert _cli(["export", "--out", str(out), "--diff"]) == 1  # differences: as diff(1) and kubectl diff
    assert _cli(["export", "--out", str(tmp_path / "none"), "--diff"]) == 2  # no policy: bad input
    assert _cli(["export", "--validate", str(out)]) == 2  # problems: the files are bad input
    assert _cli(["export", "--out", str(out)]) == 0
    assert _cli(["export", "--validate", str(out)]) == 0
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert "`capplan export --diff --out DIR` | no differences | differences" in readme


# 10 -----------------------------------------------------------------------------------------------
def test_dispatcherpolicy_crd_is_generated_structural_and_used(tmp_path):
    sd = default_schemas_dir()
    assert (sd / CRD_FILE).read_text() == crd_text(sd)  # the packaged CRD is current
    crd = yaml.safe_load(crd_text(sd))
    assert validate_object(crd, "crd.yaml") == []  # apiextensions.k8s.io/v1, strict
    text = json.dumps(crd)
    for word in ('"$ref"', '"anyOf"', '"const"', '"additionalProperties": false', '"if"', '"$defs"'):
        assert word not in text, word  # not structural
    v = crd["spec"]["versions"][0]
    assert (crd["spec"]["group"], crd["spec"]["names"]["kind"], v["name"]) == ("capplan.io", "DispatcherPolicy",
                                                                              "v1alpha1")
    write_all(PLANS, tmp_path)
    assert (tmp_path / "crds" / CRD_FILE).is_file() and validate_dir(tmp_path) == []
    # policy.yaml is checked against the CRD too: with a permissive JSON Schema the CRD still catches it
    lax = tmp_path / "schemas"
    shutil.copytree(sd, lax)
    (lax / "dispatcherpolicy.schema.json").write_text("{}")
    pol = load(tmp_path / "policy.yaml")
    pol["spec"]["series"][0]["capacity"]["reserved"]["gpus"] = "many"
    assert rules(validate_object(pol, "policy.yaml", lax)) == {"schema:crd/DispatcherPolicy"}
    assert render_all(PLANS)[f"crds/{CRD_FILE}"].startswith("# CustomResourceDefinition")
