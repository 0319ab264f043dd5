"""One registry idiom for every plug-in kind (forecasting.plugins.Registry): a toy forecaster, inference family,
peer, exporter and source each register from one place and are then used by the code that runs them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capplan.errors import InputError
from capplan.sources import SOURCES, load_source
from capplan.sources.history import LoadedHistory
from forecasting.plugins import Registry, UnknownPlugin
from forecasting.tiers import base as tiers
from optimizer.book.prices import GpuPrice
from optimizer.engine.replay import replay_inference
from optimizer.engine.replay_core import INFERENCE_FAMILIES, ReplayInput
from optimizer.exporters import render_all
from optimizer.exporters.base import WRITERS, Doc
from optimizer.plan.policy import InferenceParams, Metrics
from optimizer.rivals.peers import PEERS, Peer, replay_peers
from tests.optimizer.exporters.test_exporters import training


def test_a_registry_refuses_a_taken_name_and_names_the_known_ones_for_an_unknown_one():
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    assert reg.register("a", reg["a"]) == 1  # the same object again is harmless
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register("a", 2)
    with pytest.raises(UnknownPlugin, match="unknown widget 'b'; known: a"):
        reg["b"]


def test_every_plug_in_kind_uses_the_one_idiom():
    for reg in (tiers._REGISTRY, INFERENCE_FAMILIES, PEERS, WRITERS, SOURCES):
        assert isinstance(reg, Registry) and reg.kind


def _inference_input(n: int = 48) -> ReplayInput:
    t = pd.date_range("2024-01-01", periods=n, freq="5min", tz="UTC")
    d = np.full(n, 3.0)
    return ReplayInput(times=t, demand=d, step_s=300, price=GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4))


def test_a_toy_inference_family_registered_in_its_module_is_replayed_and_validated():
    @INFERENCE_FAMILIES.register("toy_fixed")
    def replay_fixed(inp, p, cold_start_s=90, initial=None, metrics_lag_s=60):
        replicas = np.full(len(inp.demand), float(p.min_replicas))
        return Metrics(cost_usd=float(replicas.sum()), coverage=float(np.mean(replicas >= inp.demand)),
                       idle_ratio=0.0, unmet=0.0), {"replicas": replicas, "provisioned": replicas}

    try:
        p = InferenceParams(family="toy_fixed", min_replicas=4, target_utilization=0.7)
        m, series = replay_inference(_inference_input(), p)
        assert m.coverage == 1.0 and (series["replicas"] == 4).all()
        with pytest.raises(ValueError, match="not a registered inference family; use one of .*hpa"):
            InferenceParams(family="nope", target_utilization=0.7)
    finally:
        INFERENCE_FAMILIES.unregister("toy_fixed")


def test_a_toy_peer_is_replayed_beside_the_others():
    def always_ten(inp, cold_start_s, metrics_lag_s):
        r = np.full(len(inp.demand), 10.0)
        return Metrics(cost_usd=float(r.sum()), coverage=1.0, idle_ratio=0.7, unmet=0.0), {"replicas": r}

    PEERS.register("toy_ten", Peer("toy_ten", "ten replicas, always", None, always_ten))
    try:
        out = replay_peers(_inference_input(), "inference")
        assert "toy_ten" in out and out["toy_ten"][0].cost_usd == 480.0 and "reactive" in out
    finally:
        PEERS.unregister("toy_ten")


def test_a_toy_exporter_is_rendered_with_the_others():
    @WRITERS.register("toy_note")
    def write_note(plans, ctx):
        return [Doc(path="manifests/toy-note.yaml", obj={"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "toy-note"},
                                                          "data": {"series": str(len(plans))}})]

    try:
        files = render_all([training()])
        assert "manifests/toy-note.yaml" in files and "series: '1'" in files["manifests/toy-note.yaml"]
    finally:
        WRITERS.unregister("toy_note")


def test_a_toy_source_is_loaded_by_its_name_and_an_unknown_one_lists_the_known_ones(tmp_path):
    def load_flat(arg, *, timezone="UTC", config=None):
        t = pd.date_range("2024-01-01", periods=12, freq="5min", tz="UTC")
        frame = pd.DataFrame({"series_id": "train/flat", "timestamp": t, "value": float(arg or 1)})
        return LoadedHistory(frame=frame, meta={}, label="flat")

    SOURCES.register("toy_flat", load_flat)
    try:
        loaded = load_source("toy_flat:5")
        assert loaded.frame["value"].eq(5.0).all()
        with pytest.raises(InputError, match="toy_flat"):
            load_source("nope:1")
    finally:
        SOURCES.unregister("toy_flat")
