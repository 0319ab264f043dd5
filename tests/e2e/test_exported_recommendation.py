"""What is exported is what is recommended: for every series of a plan, the parameters read back from
the written ``policy.yaml`` and autoscaler manifests replay, on the evaluation window, to the
report's recommended cost and coverage."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import yaml

from capplan.backtest.whatif import load_whatif
from capplan.config.settings import load_config
from capplan.report.summary import exported_metrics
from optimizer.engine.replay import replay_inference
from optimizer.exporters.checks.readback import manifest_params
from optimizer.exporters.dispatcher_policy import read_policy
from optimizer.inference.lookahead import level_steps
from optimizer.plan.policy import InferenceParams
from optimizer.rivals.expressed import expressed_params
from optimizer.rivals.peers import replay_peers
from tests.optimizer.inference.test_lookahead import inp


def _autoscaler(out, name: str) -> dict:
    docs = [d for p in sorted((out / "manifests").glob(f"{name}-*.yaml")) for d in yaml.safe_load_all(p.read_text())
            if d and d.get("kind") in ("ScaledObject", "HorizontalPodAutoscaler")]
    assert len(docs) == 1, f"{name}: {len(docs)} autoscalers in manifests/"
    return docs[0]


def _steps(p: dict) -> dict:
    """``p`` with a lookahead level window in whole steps (one step reads back as 0: the last value)."""
    if "level_window_s" not in p:
        return p
    return {**p, "level_window_s": level_steps(p["level_window_s"], p["data_step_s"])}


def test_every_series_exports_what_it_recommends(plan_run, fast_config):
    out, report, _ = plan_run
    cfg = load_config(fast_config)
    plans = {p.series_id: p for p in read_policy(out / "policy.yaml")}
    names = {e["seriesId"]: e["name"] for e in yaml.safe_load((out / "policy.yaml").read_text())["spec"]["series"]}
    assert plans.keys() == report["series"].keys()
    for sid, s in report["series"].items():
        params = dict(plans[sid].params)
        if s["kind"] == "inference":  # the manifest, not policy.yaml, is what the cluster runs
            carried = manifest_params(_autoscaler(out, names[sid]))
            assert _steps({k: params[k] for k in carried}) == pytest.approx(_steps(carried)), sid
            params.update(carried)
        wi = load_whatif(out, sid, cfg)
        m, _ = wi.simulate(params)
        rec = s["recommended"]
        assert math.isclose(m.cost_usd, rec["cost_usd"], rel_tol=1e-6), (sid, s["recommendation"], m, rec)
        assert math.isclose(m.coverage, rec["coverage"], rel_tol=1e-9), (sid, s["recommendation"], m, rec)
        if s.get("quota") and s["quota"].get("held", True):  # the Queue holds the pool: the headline is held too
            wi.inp = dataclasses.replace(wi.inp, hold_to_quota=True)
            held, _ = wi.simulate(params)
            ex = exported_metrics(s)
            assert ex is s["quota"]["capped"] and math.isclose(held.cost_usd, ex["cost_usd"], rel_tol=1e-6), sid
            assert math.isclose(held.coverage, ex["coverage"], rel_tol=1e-9), sid


def test_an_expressed_peer_is_a_valid_policy_that_keeps_the_service_fields():
    searched = {"target_utilization": 0.8, "min_replicas": 3, "max_replicas": 60, "family": "hpa",
                "data_step_s": 60, "lookahead_lead_s": 240, "lookahead_cover_s": 180, "period_s": 30}
    for name in ("naive_conformal", "reactive"):
        p = InferenceParams(**expressed_params(name, "inference", searched))
        assert (p.max_replicas, p.data_step_s, p.lookahead_lead_s, p.period_s) == (60, 60, 240, 30)
        assert expressed_params(name, "training", {"reservation_ratio": 0.5}) is None
    assert expressed_params("baseline", "inference", searched) is None
    assert InferenceParams(**expressed_params("naive_conformal", "inference", searched)).family == "lookahead"


@pytest.mark.parametrize("name", ["naive_conformal", "reactive"])
def test_an_expressed_peer_behaves_like_the_peer(name):
    # on a daily cycle the expression's replay is close to the peer's own rule: only the HPA's tolerance
    # and the steps already decided differ
    def daily(n_days, seed):
        t = np.arange(n_days * 288)
        rng = np.random.default_rng(seed)
        return np.round(10 + 6 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 1.0, len(t))).clip(1)

    w = inp(daily(3, 1), before=daily(7, 2))
    peer = replay_peers(w, "inference")[name][0]
    searched = {"target_utilization": 0.8, "max_replicas": 60, "data_step_s": 300, "lookahead_lead_s": 900,
                "lookahead_cover_s": 600}
    ex = replay_inference(w, InferenceParams(**expressed_params(name, "inference", searched)))[0]
    assert ex.coverage == pytest.approx(peer.coverage, abs=0.08)
    assert ex.cost_usd == pytest.approx(peer.cost_usd, rel=0.15)
