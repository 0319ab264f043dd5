"""Manifest writers, validation and lint rules.

Every test asserts an outcome that could fail: the written files pass the
Kubernetes/CRD/DispatcherPolicy schemas and the lint rules, and each lint
rule fires on a concrete bad example (a planning guide's GPU Resource HPA among them).
"""

from __future__ import annotations

import copy
import socket
from pathlib import Path

import pytest
import yaml

from optimizer.exporters import WRITERS, ExportValidationError, is_own_file, render_all, write_all
from optimizer.exporters.base import Doc
from optimizer.exporters.checks.lint import lint, lint_object
from optimizer.exporters.checks.schemas import default_schemas_dir
from optimizer.exporters.checks.validate import validate_dir, validate_object
from optimizer.exporters.dispatcher_policy import read_policy
from optimizer.exporters.keda import cron_window
from optimizer.exporters.names import assign_names, is_label, k8s_name, sanitise
from optimizer.plan.policy import Metrics, SeriesPlan

M = Metrics(cost_usd=1234.5, coverage=0.987, idle_ratio=0.21, unmet=3.25, scale_events=12, p95_utilization=0.81)
B = Metrics(cost_usd=1500.0, coverage=0.95, idle_ratio=0.35, unmet=9.5, scale_events=30, p95_utilization=0.7)


def training(sid="train/Team_A") -> SeriesPlan:
    return SeriesPlan(
        series_id=sid, kind="training", unit="gpu", gpu_model="A100-80GB", timezone="Asia/Shanghai",
        params={"reservation_ratio": 0.8, "quantile": "p90", "headroom": 1.1, "spot_fraction": 0.4,
                "topup_quantile": "p95", "topup_headroom": 1.2},
        plan={"reserved_gpus": 24, "on_demand_gpus": 6, "spot_gpus": 4, "on_demand_hourly_gpus": 3,
              "capability_gpus": 48, "deserved_gpus": 30,
              "quota_gpus": 64.0, "valid_from": "2026-11-29T14:00:00+00:00"},
        recommended=M, baseline=B, forecast_version="20261129T140000Z-s0", fallbacks=["daily: LSTM fell back"])


def inference(sid="infer/llm-chat") -> SeriesPlan:
    return SeriesPlan(
        series_id=sid, kind="inference", unit="replica", gpu_model="A10G-24GB", timezone="Asia/Shanghai",
        params={"target_utilization": 0.65, "min_replicas": 2, "max_replicas": 40, "scale_up_window_s": 60,
                "scale_down_window_s": 600, "scale_up_percent": 200, "scale_down_percent": 50, "period_s": 60,
                "prescale_lead_s": 900, "prescale_quantile": "p90"},
        plan={"min_replicas": 2, "max_replicas": 40, "target_utilization": 0.65,
              "prescale": [{"start": "2026-11-30T00:45:00+00:00", "end": "2026-11-30T03:45:00+00:00",
                            "desired_replicas": 12},
                           {"start": "2026-12-01T00:45:00+00:00", "end": "2026-12-01T01:45:00+00:00",
                            "desired_replicas": 60}],
              "fallback_replicas": 9, "baseline": {"floor_replicas": 6},
              "valid_from": "2026-11-29T14:00:00+00:00"},
        recommended=M, baseline=B, forecast_version="20261129T140000Z-s0")


PLANS = [training(), inference()]

SEEDS_HPA = {  # a planning guide's example: schema-valid, but GPU is not a Resource metric
    "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "llm-chat", "namespace": "default"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-chat"},
             "minReplicas": 1, "maxReplicas": 10,
             "metrics": [{"type": "Resource", "resource": {"name": "nvidia.com/gpu",
                                                           "target": {"type": "Utilization",
                                                                      "averageUtilization": 70}}}]},
}


def rules(problems) -> set[str]:
    return {p.rule for p in problems}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# --- every writer's output validates ------------------------------------------------------------

@pytest.mark.parametrize("settings", [
    {},
    {"autoscaler": "hpa", "namespace": "llm", "resource_metrics": {"cpu": 80},
     "targets": {"infer/llm-chat": {"name": "llm-chat-server", "gpus_per_replica": 2}}},
    {"keda_auth": {"mode": "basic"}, "allow_scale_to_zero": True, "fallback_replicas": 8},
])
def test_every_writer_output_validates(tmp_path, settings):
    paths = write_all(PLANS, tmp_path, settings)
    rels = {p.relative_to(tmp_path).as_posix() for p in paths}
    kinds = {load(p).get("kind") for p in paths}
    auth = {"TriggerAuthentication"} if settings.get("keda_auth") else set()  # only when credentials are named
    assert {"DispatcherPolicy", "CustomResourceDefinition", "ScaledObject", "HorizontalPodAutoscaler", "Queue",
            "PriorityClass", "Kustomization", None} | auth == kinds  # None: the prometheus-adapter rules file
    assert set(WRITERS) >= {"policy", "keda", "hpa", "adapter", "volcano", "priorityclass"}
    # each file passes its schema on its own, and the folder passes schemas + lint together
    for p in paths:
        assert validate_object(load(p), p.name) == [], p
        assert is_own_file(tmp_path, p.relative_to(tmp_path).as_posix()), p  # a re-render may replace it
    assert validate_dir(tmp_path) == []
    # kustomization lists exactly the files in manifests/
    k = load(tmp_path / "manifests/kustomization.yaml")
    listed = set(k["resources"])
    assert listed == {r.split("/", 1)[1] for r in rels if r.startswith("manifests/") and r.count("/") == 1
                      and not r.endswith("kustomization.yaml")}
    # exactly one autoscaler per workload goes into manifests/
    chosen = "HorizontalPodAutoscaler" if settings.get("autoscaler") == "hpa" else "ScaledObject"
    assert [load(tmp_path / "manifests" / f)["kind"] for f in listed].count(chosen) == 1
    other = "ScaledObject" if chosen == "HorizontalPodAutoscaler" else "HorizontalPodAutoscaler"
    assert all(r.startswith("alternatives/") for r in rels if load(tmp_path / r).get("kind") == other)


def test_hpa_scales_on_external_dcgm_metric_with_tuned_behavior(tmp_path):
    write_all(PLANS, tmp_path, {"autoscaler": "hpa",
                                "targets": {"infer/llm-chat": {"name": "llm-chat", "gpus_per_replica": 2}}})
    hpa = load(next((tmp_path / "manifests").glob("*-hpa.yaml")))
    (m,) = hpa["spec"]["metrics"]
    assert m["type"] == "External"
    assert m["external"]["target"] == {"type": "AverageValue", "averageValue": "130"}  # 0.65 x 100 x 2 GPUs
    beh = hpa["spec"]["behavior"]
    assert beh["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert beh["scaleUp"]["policies"] == [{"type": "Percent", "value": 200, "periodSeconds": 60}]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "llm-chat"
    rules_ = load(tmp_path / "adapter/prometheus-adapter-rules.yaml")["externalRules"]
    assert rules_[0]["name"]["as"] == m["external"]["metric"]["name"]
    assert 'pod=~"llm-chat-' in rules_[0]["metricsQuery"] and rules_[0]["metricsQuery"].startswith("sum(")
    assert "percent points per replica" in next((tmp_path / "manifests").glob("*-hpa.yaml")).read_text()


def test_keda_scaled_object_contents(tmp_path):
    write_all(PLANS, tmp_path, {"namespace": "llm"})
    f = next((tmp_path / "manifests").glob("*-scaledobject.yaml"))
    so = load(f)
    spec = so["spec"]
    prom = spec["triggers"][0]
    assert prom["type"] == "prometheus" and prom["metricType"] == "AverageValue"
    md = prom["metadata"]
    assert md["ignoreNullValues"] == "false"
    assert md["threshold"] == "65"  # percent per replica, from target_utilization 0.65
    assert md["query"].startswith("sum(DCGM_FI_DEV_GPU_UTIL{") and " by " not in md["query"]
    assert "per replica" in next(line for line in f.read_text().splitlines() if "threshold: " in line
                                 and "activation" not in line)
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 9}  # the plan's p95 need, not maxReplicaCount
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["policies"][0]["value"] == 50
    crons = [t for t in spec["triggers"] if t["type"] == "cron"]
    # 2026-11-30 00:45 UTC is Monday 08:45 in Asia/Shanghai; the 60-replica window is capped at maxReplicaCount
    assert crons[0]["metadata"] == {"timezone": "Asia/Shanghai", "start": "45 8 * * 1", "end": "45 11 * * 1",
                                    "desiredReplicas": "12"}
    assert crons[1]["metadata"]["desiredReplicas"] == "40"
    assert spec["minReplicaCount"] == 2


def test_cron_window_crosses_midnight_and_weekday():
    assert cron_window("2026-11-28T23:30:00+00:00", "2026-11-29T01:00:00+00:00", "America/New_York") == \
        ("30 18 * * 6", "0 20 * * 6")
    assert cron_window("2026-11-28T17:00:00+00:00", "2026-11-28T18:00:00Z", "Asia/Shanghai") == \
        ("0 1 * * 0", "0 2 * * 0")
    # a window of a week (start == end as cron) or of more than a day is refused, as is an end before the start
    for end in ("2026-12-07T00:00:00Z", "2026-12-01T00:01:00Z", "2026-11-29T23:00:00Z"):
        with pytest.raises(ValueError):
            cron_window("2026-11-30T00:00:00Z", end, "UTC")
    assert cron_window("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z", "UTC") == ("0 0 * * 1", "0 0 * * 2")


def test_volcano_queue_from_plan(tmp_path):
    write_all(PLANS, tmp_path, {"reclaimable": False})
    q = load(next((tmp_path / "manifests").glob("*-queue.yaml")))
    assert q["metadata"]["name"].startswith("train-team-a-") and "namespace" not in q["metadata"]
    assert q["spec"]["guarantee"] == {"resource": {"nvidia.com/gpu": "24"}}
    assert q["spec"]["deserved"] == {"nvidia.com/gpu": "37"}  # what the plan buys: 24 + 6 + 4 + 3 (p50 need: 30)
    assert q["spec"]["capability"] == {"nvidia.com/gpu": "48"}
    assert q["spec"]["reclaimable"] is False


def test_priority_classes_order(tmp_path):
    write_all(PLANS, tmp_path)
    pcs = {d["metadata"]["name"]: d for d in (load(p) for p in (tmp_path / "manifests").glob("*-priorityclass.yaml"))}
    rt, tr, ba = (pcs[f"capplan-{n}"] for n in ("realtime-inference", "training", "batch"))
    assert rt["value"] > tr["value"] > ba["value"]
    assert ba["preemptionPolicy"] == "Never" and rt["preemptionPolicy"] == "PreemptLowerPriority"
    assert not any(d["globalDefault"] for d in pcs.values())


# --- validation runs on every write and fails hard ----------------------------------------------

def test_write_fails_on_invalid_output(tmp_path, monkeypatch):
    monkeypatch.setitem(WRITERS, "seeds",
                        lambda plans, ctx: [Doc("manifests/seeds-hpa.yaml", copy.deepcopy(SEEDS_HPA))])
    with pytest.raises(ExportValidationError) as ei:
        write_all(PLANS, tmp_path)
    assert "resource-metric-cpu-memory" in rules(ei.value.problems)
    assert any(p.file == "manifests/seeds-hpa.yaml" and p.path == "spec.metrics[0].resource.name"
               for p in ei.value.problems)


def test_kubernetes_validate_strict_works_offline(monkeypatch):
    def no_network(*a, **k):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    hpa = copy.deepcopy(SEEDS_HPA)
    assert validate_object(hpa, "x.yaml") == []  # that HPA passes the schema: lint must catch it
    hpa["spec"]["bogusField"] = 1
    (p,) = validate_object(hpa, "x.yaml")
    assert p.rule == "schema:kubernetes" and "bogusField" in p.message


def test_crd_schemas_are_strict_and_packaged(tmp_path):
    assert (default_schemas_dir() / "keda.sh_scaledobjects.yaml").is_file()
    assert (default_schemas_dir() / "README.md").read_text().count("Apache-2.0") >= 3
    write_all(PLANS, tmp_path)
    so = load(next((tmp_path / "manifests").glob("*-scaledobject.yaml")))
    so["spec"]["minReplicas"] = 3  # HPA spelling, unknown to the CRD
    del so["spec"]["fallback"]["replicas"]
    probs = validate_object(so, "so.yaml")
    assert {p.rule for p in probs} == {"schema:crd/ScaledObject"}
    assert any("minReplicas" in p.message for p in probs) and any("replicas" in p.message for p in probs)
    q = load(next((tmp_path / "manifests").glob("*-queue.yaml")))
    q["spec"]["guarantee"]["resource"]["nvidia.com/gpu"] = "lots"
    assert rules(validate_object(q, "q.yaml")) == {"schema:crd/Queue"}


# --- each lint rule has a failing example -------------------------------------------------------

def test_lint_seeds_hpa_gpu_resource_metric():
    probs = lint_object("seeds.yaml", SEEDS_HPA)
    assert rules(probs) == {"resource-metric-cpu-memory"}
    ok = copy.deepcopy(SEEDS_HPA)
    ok["spec"]["metrics"][0]["resource"]["name"] = "cpu"
    assert lint_object("ok.yaml", ok) == []


def test_lint_windows_and_periods():
    hpa = copy.deepcopy(SEEDS_HPA)
    hpa["spec"]["metrics"][0]["resource"]["name"] = "memory"
    hpa["spec"]["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": 7200,
                                             "policies": [{"type": "Percent", "value": 10, "periodSeconds": 3600}]}}
    probs = lint_object("w.yaml", hpa)
    assert rules(probs) == {"stabilization-window-range", "period-seconds-range"}
    assert any(p.path == "spec.behavior.scaleDown.stabilizationWindowSeconds" for p in probs)


def test_lint_names_with_slash_and_capitals_and_collisions():
    bad = copy.deepcopy(SEEDS_HPA)
    bad["spec"]["metrics"][0]["resource"]["name"] = "cpu"
    bad["metadata"]["name"] = "train/Team_A"
    assert rules(lint_object("n.yaml", bad)) == {"rfc1123-name"}
    # two series that collide after naive sanitising get distinct, valid, stable names
    assert sanitise("train/Team_A") == sanitise("train/team-a") == "train-team-a"
    names = assign_names(["train/Team_A", "train/team-a"])
    assert len(set(names.values())) == 2 and all(is_label(n) and n.startswith("train-team-a-") for n in names.values())
    assert names == assign_names(["train/team-a", "train/Team_A"])  # independent of order and the rest of the set
    assert is_label(k8s_name("train/" + "X" * 200)) and len(k8s_name("train/" + "X" * 200)) == 63
    # hand-edited folder: two objects of one kind and namespace with one name
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "train-team-a"},
         "spec": {"guarantee": {"resource": {"nvidia.com/gpu": "1"}}}}
    probs = lint([("m/a.yaml", q), ("m/b.yaml", copy.deepcopy(q))])
    assert rules(probs) == {"unique-name"} and probs[0].file == "m/b.yaml"


def test_lint_replica_bounds_units_and_keda_rules(tmp_path):
    write_all(PLANS, tmp_path)
    f = next((tmp_path / "manifests").glob("*-scaledobject.yaml"))
    good = load(f)
    assert lint_object("so.yaml", good) == []

    so = copy.deepcopy(good)
    so["spec"]["minReplicaCount"] = 50
    assert "replica-bounds" in rules(lint_object("so.yaml", so))
    so = copy.deepcopy(good)
    so["spec"]["minReplicaCount"] = 0  # not configured: no annotation
    assert rules(lint_object("so.yaml", so)) == {"replica-bounds"}
    so["metadata"]["annotations"]["capplan.io/allow-scale-to-zero"] = "true"
    assert lint_object("so.yaml", so) == []

    so = copy.deepcopy(good)
    so["spec"]["triggers"][0]["metadata"]["threshold"] = "0.65"  # a ratio where DCGM reports percent
    (p,) = lint_object("so.yaml", so)
    assert (p.rule, p.path) == ("metric-units", "spec.triggers[0].metadata.threshold") and "65" in p.message

    so = copy.deepcopy(good)
    del so["spec"]["triggers"][0]["metadata"]["ignoreNullValues"]
    assert rules(lint_object("so.yaml", so)) == {"keda-null-values"}

    so = copy.deepcopy(good)
    del so["spec"]["fallback"]
    assert rules(lint_object("so.yaml", so)) == {"keda-fallback"}

    so = copy.deepcopy(good)
    so["spec"]["triggers"][0]["metadata"]["bearerToken"] = "s3cr3t"
    assert rules(lint_object("so.yaml", so)) == {"keda-inline-credentials", "keda-trigger-metadata"}

    so = copy.deepcopy(good)
    so["spec"]["triggers"][0]["metadata"]["query"] = "sum(DCGM_FI_DEV_GPU_UTIL) by (pod)"
    assert rules(lint_object("so.yaml", so)) == {"keda-query-single-element"}

    so = copy.deepcopy(good)
    so["spec"]["triggers"][1]["metadata"]["timezone"] = "Mars/Olympus"
    so["spec"]["triggers"][1]["metadata"]["start"] = "every monday"
    assert rules(lint_object("so.yaml", so)) == {"cron-trigger"}

    hpa = copy.deepcopy(SEEDS_HPA)
    hpa["spec"]["metrics"] = [{"type": "External", "external": {
        "metric": {"name": "capplan_gpu_util_x"}, "target": {"type": "Utilization", "averageUtilization": 70}}}]
    hpa["spec"]["minReplicas"] = 5
    hpa["spec"]["maxReplicas"] = 3
    assert rules(lint_object("h.yaml", hpa)) == {"metric-units", "replica-bounds"}


def test_lint_volcano_bounds_two_autoscalers_and_kustomization(tmp_path):
    write_all(PLANS, tmp_path, {"autoscaler": "hpa"})
    q = load(next((tmp_path / "manifests").glob("*-queue.yaml")))
    q["spec"]["deserved"]["nvidia.com/gpu"] = "100"  # above capability 48
    assert rules(lint_object("q.yaml", q)) == {"volcano-queue-bounds"}
    neg = load(next((tmp_path / "manifests").glob("*-queue.yaml")))
    neg["spec"]["guarantee"]["resource"]["nvidia.com/gpu"] = "-3"  # a hand edit the CRD schema lets through
    assert any("negative" in p.message for p in lint_object("q.yaml", neg))
    # copying the KEDA alternative next to the HPA: two autoscalers on one Deployment
    alt = next((tmp_path / "alternatives/keda").glob("*-scaledobject.yaml"))
    (tmp_path / "manifests" / alt.name).write_text(alt.read_text())
    probs = validate_dir(tmp_path)
    assert rules(probs) == {"one-autoscaler-per-target", "kustomization-resources"}
    assert any(p.file == "manifests/kustomization.yaml" and alt.name in p.message for p in probs)


# --- round trip, CLI ----------------------------------------------------------------------------

def test_policy_round_trip(tmp_path):
    write_all(PLANS, tmp_path)
    back = read_policy(tmp_path / "policy.yaml")
    assert [p.model_dump() for p in back] == [p.model_dump() for p in PLANS]
    doc = load(tmp_path / "policy.yaml")
    tr = doc["spec"]["series"][0]
    assert tr["capacity"]["reserved"] == {"leadTime": "P7D", "gpus": 24}
    assert tr["capacity"]["spot"] == {"leadTime": "P1D", "gpus": 4}
    assert tr["capacity"]["onDemandHourly"] == {"leadTime": "PT1H", "gpus": 3}
    assert tr["params"]["topupQuantile"] == "p95" and tr["params"]["topupHeadroom"] == 1.2
    assert "planExtra" not in tr  # the hourly layer is a first-class lead time, not an extra
    bad = copy.deepcopy(doc)
    bad["spec"]["series"][0]["capacity"]["onDemandHourly"] = {"leadTime": "PT1H", "gpus": -1}
    assert rules(validate_object(bad, "policy.yaml")) == {"schema:dispatcherpolicy"}
    for errors, where in (([1.0] * 29 + [float("nan")], "params.dayErrorsGpus.29"), ("many", "params.dayErrorsGpus"),
                          ([1.0] * 500, "params.dayErrorsGpus")):  # a hand edit JSON or the rule cannot hold
        bad = copy.deepcopy(doc)
        bad["spec"]["series"][0]["params"]["dayErrorsGpus"] = errors
        probs = lint_object("policy.yaml", bad)
        assert [p.path for p in probs if p.rule == "policy-params"] == [f"spec.series[0].{where}"], errors
    assert tr["expected"]["baseline"]["costUsd"] == 1500.0 and tr["forecastVersion"] == "20261129T140000Z-s0"
    inf = doc["spec"]["series"][1]
    assert inf["scaling"]["prescale"]["leadTime"] == "PT900S" and inf["params"]["targetUtilization"] == 0.65
    # re-rendering from the parsed policy gives byte-identical files
    assert render_all(back) == render_all(PLANS)


def test_pipeline_settings_model_is_accepted(tmp_path):
    from capplan.config.settings import CapplanConfig

    cfg = CapplanConfig.model_validate({"export": {"namespace": "gpu", "autoscaler": "hpa"}})
    write_all(PLANS, tmp_path, cfg.export)
    hpa = load(next((tmp_path / "manifests").glob("*-hpa.yaml")))
    assert hpa["metadata"]["namespace"] == "gpu"
    with pytest.raises(Exception):
        CapplanConfig.model_validate({"export": {"namespace": "Not_A_Label"}})


def _cli(argv) -> int:
    from capplan.cli.app import main

    with pytest.raises(SystemExit) as ei:
        main(argv)
    return ei.value.code


def test_cli_validate_and_diff(tmp_path, capsys):
    out = tmp_path / "out"
    write_all(PLANS, out)
    assert _cli(["export", "--validate", str(out)]) == 0
    f = next((out / "manifests").glob("*-queue.yaml"))
    q = load(f)
    q["metadata"]["name"] = "Train/Team_A"
    q["spec"]["deserved"]["nvidia.com/gpu"] = "99"
    f.write_text(yaml.safe_dump(q))
    capsys.readouterr()
    assert _cli(["export", "--validate", str(out)]) == 2  # problems in the files: bad input
    lines = capsys.readouterr().out.splitlines()
    rel = f"manifests/{f.name}"
    assert f"{rel}: metadata.name: [rfc1123-name] 'Train/Team_A' is not an RFC 1123 label " \
           "(lower-case a-z, 0-9, '-', <= 63 chars)" in lines
    assert any(line.startswith(f"{rel}: spec.deserved.nvidia.com/gpu: [volcano-queue-bounds]") for line in lines)

    assert _cli(["export", "--out", str(out), "--diff"]) == 1  # differences, as diff(1) and kubectl diff
    text = capsys.readouterr().out
    assert f"--- a/{rel}" in text and "-  name: Train/Team_A" in text
    assert _cli(["export", "--out", str(out)]) == 0  # re-render replaces the hand edit
    capsys.readouterr()
    assert _cli(["export", "--out", str(out), "--diff"]) == 0
    assert "no changes" in capsys.readouterr().out
    assert _cli(["export", "--validate", str(out)]) == 0


def test_cli_validate_missing_folder(tmp_path):
    assert _cli(["export", "--validate", str(tmp_path / "nope")]) == 2


# --- capplan.report.validation: the one entry point for the CLI and the dashboard ---------------------
def test_capplan_validation_file_statuses(tmp_path):
    from capplan.report.validation import file_statuses, folder_files, validate_folder

    out = tmp_path / "out"
    write_all(PLANS, out)
    (out / "report.json").write_text('{"series": {}}')
    assert validate_folder(out) == validate_dir(out) == []
    st = {s.file: s.status for s in file_statuses(out, [])}
    assert set(st) == {f.relative_to(out).as_posix() for f in folder_files(out)}
    assert st.pop("report.json") == "not checked"  # a data file, skipped by the validator
    assert set(st.values()) == {"valid"} and "policy.yaml" in st

    # a hand-added GPU Resource HPA: its own lint finding makes it invalid; the kustomization's
    # "not listed" finding is a cross-file rule and leaves kustomization.yaml valid
    (out / "manifests" / "seeds-hpa.yaml").write_text(yaml.safe_dump(SEEDS_HPA))
    probs = validate_folder(out)
    assert {p.rule for p in probs} >= {"resource-metric-cpu-memory", "kustomization-resources"}
    bad = {s.file: s for s in file_statuses(out, probs) if not s.ok}
    assert list(bad) == ["manifests/seeds-hpa.yaml"]
    assert all(p.file == "manifests/seeds-hpa.yaml" for p in bad["manifests/seeds-hpa.yaml"].problems)
