"""Autoscaler parameters read back from the rendered ScaledObject and HPA equal the exported policy's."""

from __future__ import annotations

import pytest
import yaml

from optimizer.exporters import render_all
from optimizer.exporters.checks.readback import lookahead_fields, manifest_params
from optimizer.inference.lookahead import promql
from optimizer.plan.policy import InferenceParams
from optimizer.rivals.expressed import expressed_params
from tests.optimizer.exporters.test_exporters import inference

SEARCHED = {"target_utilization": 0.65, "min_replicas": 2, "max_replicas": 40, "scale_up_window_s": 60,
            "scale_down_window_s": 600, "scale_up_percent": 200, "scale_down_percent": 50, "period_s": 30,
            "prescale_lead_s": 900, "prescale_quantile": "p90", "data_step_s": 60, "lookahead_lead_s": 240,
            "lookahead_cover_s": 180}
VARIANTS = {
    "searched": SEARCHED,
    "lookahead": {**SEARCHED, "family": "lookahead", "level_window_s": 900, "headroom_quantile": 0.875},
    "predictive": {**SEARCHED, "family": "predictive", "prescale_quantile": "p95"},
    "naive_conformal": expressed_params("naive_conformal", "inference", SEARCHED),
    "reactive": expressed_params("reactive", "inference", SEARCHED),
}


def _docs(params: dict, autoscaler: str) -> dict:
    plan = inference().model_copy(update={"params": params})
    files = render_all([plan], {"autoscaler": autoscaler})
    return {d["kind"]: d for path, text in files.items() if path.startswith("manifests/")
            for d in yaml.safe_load_all(text) if d}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("autoscaler", ["keda", "hpa"])
def test_the_manifest_carries_the_policy(variant, autoscaler):
    params = InferenceParams(**VARIANTS[variant]).model_dump()
    kind = "ScaledObject" if autoscaler == "keda" else "HorizontalPodAutoscaler"
    got = manifest_params(_docs(params, autoscaler)[kind])
    assert got == pytest.approx({k: params[k] for k in got}), variant
    assert got["family"] == params["family"]
    if autoscaler == "keda" and params["family"] == "lookahead":
        assert {"headroom_quantile", "level_window_s", "data_step_s"} <= got.keys()


def test_a_changed_manifest_reads_back_changed():
    docs = _docs(InferenceParams(**VARIANTS["lookahead"]).model_dump(), "keda")
    so = docs["ScaledObject"]
    so["spec"]["triggers"][0]["metadata"]["threshold"] = "80"
    so["spec"]["maxReplicaCount"] = 7
    got = manifest_params(so)
    assert got["target_utilization"] == pytest.approx(0.8) and got["max_replicas"] == 7


@pytest.mark.parametrize("level_window_s,step", [(0, 60), (60, 60), (900, 300), (1800, 60)])
def test_lookahead_query_fields_round_trip(level_window_s, step):
    p = InferenceParams(target_utilization=0.95, family="lookahead", level_window_s=level_window_s,
                        headroom_quantile=0.9, data_step_s=step)
    got = lookahead_fields(promql('sum(X{a="b"})', p))
    assert got["headroom_quantile"] == 0.9 and got["data_step_s"] == step
    assert got["level_window_s"] == (0 if level_window_s <= step else level_window_s)


def test_not_an_autoscaler_is_refused():
    with pytest.raises(ValueError, match="not an autoscaler"):
        manifest_params({"kind": "Queue"})
    with pytest.raises(ValueError, match="no lookahead|not in capplan"):
        lookahead_fields("sum(up)")
