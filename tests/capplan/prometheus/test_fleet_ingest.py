"""Per-GPU-model demand and capacity as a real heterogeneous cluster records it: the synthetic fleet of
:mod:`tests.synth_fleet` (A100 whole and single-strategy MIG nodes, H100 whole and mixed-strategy MIG
nodes, whole and time-sliced L4s; Kueue flavors in a cohort; pending pods with a nodeSelector on a
model) loaded into a real Prometheus 2.x (promtool backfill) and a real VictoriaMetrics (import API).
Each per-model series is an ordinary ``capplan.yaml`` series (template + model selector + ``gpu_model``);
``capplan ingest`` must store its truth at every step (0 over, 0 under, none lost, none invented), and
``capplan discover`` must list the models, flavors and MIG resources and write a config that sets
``gpu_model`` per series."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from capplan.config.settings import CapplanConfig
from capplan.sources.prometheus import ingest
from capplan.store.local import Store
from tests import prom_fixture as pf
from tests import synth_fleet as sf
from tests import vm_fixture as vf
from tests.conftest import run_cli
from tests.synth_cluster import truth_per_step

pytestmark = pytest.mark.slow

FROM = sf.START + pd.Timedelta("5min")
UNTIL = sf.START + pd.Timedelta(minutes=sf.MINUTES) - pd.Timedelta("5min")
GPU_PRODUCT = {"A100-80GB": "NVIDIA-A100-SXM4-80GB", "H100-80GB": "NVIDIA-H100-80GB-HBM3",
               "L4": "NVIDIA-L4"}
SHARED = {"L4": {"shared_replicas": str(sf.REPLICAS)}}


def _series() -> dict[str, dict]:
    """{truth column: series config}. A100 and L4 are selected by GFD product, H100 by catalogue name."""
    out = {}
    for m in sf.MODELS:
        sel = {"gpu_model": m} if m == "H100-80GB" else {"gpu_product": GPU_PRODUCT[m]}
        out[f"capacity/{m}"] = {"template": "k8s_gpus_allocatable_by_model", "selector": sel,
                                "params": SHARED.get(m, {})}
        out[f"requested/{m}"] = {"template": "k8s_gpus_requested_by_model", "selector": sel,
                                 "params": SHARED.get(m, {})}
        out[f"busy/{m}"] = {"template": "dcgm_gpus_busy", "selector": sel}
        out[f"reporting/{m}"] = {"template": "dcgm_gpus_reporting", "selector": sel}
    out["requested/A100-80GB/team-train"] = {"template": "k8s_gpus_requested_by_model",
                                             "selector": {"gpu_product": GPU_PRODUCT["A100-80GB"],
                                                          "namespace": "team-train"}}
    for f in sf.FLAVORS:
        out[f"admitted/{f}"] = {"template": "kueue_admitted_gpus", "selector": {"flavor": f}}
        out[f"quota/{f}"] = {"template": "kueue_nominal_quota_gpus", "selector": {"flavor": f}}
    return out


SERIES = _series()


def _model_of(column: str) -> str:
    part = column.split("/")[1]
    return sf.FLAVORS.get(part, part)


@pytest.fixture(scope="module")
def fleet():
    return sf.generate()


@pytest.fixture(scope="module")
def engines(fleet, tmp_path_factory):
    """{"prometheus": url, "victoriametrics": url} holding the same history."""
    prom, tool = pf.require_prometheus()
    vm = vf.require_victoria_metrics()
    root = tmp_path_factory.mktemp("fleet")
    om = root / "fleet.om"
    fleet.write_openmetrics(om)
    pf.create_blocks(tool, om, root / "tsdb")
    om.unlink()
    ps = pf.start_prometheus(prom, root / "tsdb", root / "prom")
    vs = vf.start_vm(vm, root / "vm")
    try:
        vs.load(fleet.prometheus_text())
        yield {"prometheus": ps.url, "victoriametrics": vs.url}
    finally:
        ps.stop()
        vs.stop()


def _config(url: str, store) -> CapplanConfig:
    return CapplanConfig.model_validate({
        "store": str(store), "prometheus": {"url": url, "scrape_interval": "1m"},
        "series": [{"id": col, "step": "5m", "gpu_model": _model_of(col), **spec} for col, spec in SERIES.items()]})


@pytest.mark.parametrize("engine", ["prometheus", "victoriametrics"])
def test_ingest_equals_the_truth_per_model_at_every_step(fleet, engines, tmp_path, engine):
    store = Store(tmp_path / engine)
    results = {r.series_id: r for r in ingest(_config(engines[engine], store.root), store,
                                              start=FROM.isoformat(), end=UNTIL.isoformat())}
    truth = truth_per_step(fleet.truth).loc[FROM:UNTIL]
    report = {}
    for col in SERIES:
        r = results[col]
        assert r.status == "ok", (col, r.error)
        frame, meta, _ = store.read_series(col)
        assert meta.gpu_model == _model_of(col)
        got = frame.set_index("timestamp")["value"].reindex(truth.index)
        want = truth[col]
        both = want.notna() & got.notna()
        report[col] = (int((got[both] > want[both] + 1e-9).sum()), int((got[both] < want[both] - 1e-9).sum()),
                       int((want.notna() & got.isna()).sum()), int((want.isna() & got.notna()).sum()))
    assert all(v == (0, 0, 0, 0) for v in report.values()), str(report)
    # the truth is not flat: capacity moves (a node joins, one is deleted), pending demand exceeds capacity,
    # idle steps are 0 and the kube-state-metrics outage is missing
    assert truth["capacity/H100-80GB"].nunique() > 1 and truth["capacity/L4"].nunique() > 1
    assert (truth["requested/L4"] > truth["capacity/L4"]).any()
    assert results["requested/A100-80GB"].missing_steps == int(truth["requested/A100-80GB"].isna().sum()) > 0
    assert results["admitted/h100-80gb"].missing_steps == 0


def test_discover_lists_models_flavors_and_mig_and_sets_gpu_model(fleet, engines, tmp_path, capsys):
    written = tmp_path / "capplan.yaml"
    at = sf.START + pd.Timedelta(hours=19)
    code, out, err = run_cli(["discover", "--prometheus-url", engines["prometheus"], "--out", str(written),
                              "--at", at.isoformat(), "--lookback", "1d", "--store", str(tmp_path / "store"),
                              "--format", "json"], capsys)
    assert code == 0, err
    found = json.loads(out)
    models = found["gpu_models"]
    assert set(models) == set(sf.MODELS)
    nodes = sf.nodes()
    for m in sf.MODELS:
        present = [n for n in nodes.values() if n.model == m and n.present(19 * 60)]
        assert sorted(models[m]["products"]) == sorted({n.product for n in present})
        assert models[m]["gpus"] == pytest.approx(sum(k * n.share[r] for n in present for r, k in n.resources.items()))
        assert models[m]["nodes"] == len(present)
        assert models[m]["dcgm_gpus"] == sum(n.gpus for n in present)
        assert models[m]["model_names"] == [sf.MODEL_NAME[m]]
    assert models["L4"]["shared_replicas"] == sf.REPLICAS and "shared_replicas" not in models["A100-80GB"]
    assert found["mig_resources"] == [
        {"resource": "nvidia.com/gpu", "profile": "1g.10gb", "strategy": "single", "units": 7.0,
         "gpu_models": ["A100-80GB"]},
        {"resource": "nvidia.com/mig-3g.40gb", "profile": "3g.40gb", "strategy": "mixed", "units": 2.0,
         "gpu_models": ["H100-80GB"]}]
    flavors = found["kueue_flavors"]
    assert set(flavors) == set(sf.FLAVORS)
    assert flavors["a100-80gb"]["nominal_quota"] == sum(q["a100-80gb"] for q in sf.QUOTA.values())
    assert flavors["a100-80gb"]["cohorts"] == ["fleet"]
    assert flavors["h100-80gb"]["cluster_queues"] == sorted(sf.QUOTA)
    doc = yaml.safe_load(written.read_text())
    by_id = {s["id"]: s for s in doc["series"]}
    for m in sf.MODELS:
        for kind, template in (("capacity", "k8s_gpus_allocatable_by_model"),
                               ("requested", "k8s_gpus_requested_by_model")):
            s = by_id[f"gpu/{m}/{kind}"]
            assert (s["gpu_model"], s["template"], s["selector"]) == (m, template, {"gpu_product": GPU_PRODUCT[m]})
    assert by_id["gpu/L4/capacity"]["params"] == {"shared_replicas": str(sf.REPLICAS)}
    assert by_id["kueue/flavor/a100-80gb"]["gpu_model"] == "A100-80GB"
    # a namespace that ran on one model only is planned on it; one that ran on several is left unset
    assert found["namespace_gpu_models"]["team-research"] == ["A100-80GB"]
    assert found["namespace_gpu_models"]["team-serve"] == sorted(sf.MODELS)
    assert by_id["pool/team-research"]["gpu_model"] == "A100-80GB" and "gpu_model" not in by_id["pool/team-serve"]
    assert flavors["a100-80gb"]["gpu_model"] == "A100-80GB"
    assert flavors["a100-80gb"]["peak_usage"] == truth_per_step(fleet.truth)["admitted/a100-80gb"].loc[:at].max()
    # the written config pulls, and its per-model series equal the truth
    code, out, err = run_cli(["ingest", "--config", str(written), "--start", FROM.isoformat(),
                              "--end", UNTIL.isoformat(), "-q"], capsys)
    assert code == 0, err
    store = Store(doc["store"])
    truth = truth_per_step(fleet.truth).loc[FROM:UNTIL]
    for m in sf.MODELS:
        got = store.read_series(f"gpu/{m}/capacity")[0].set_index("timestamp")["value"].reindex(truth.index)
        assert (got - truth[f"capacity/{m}"]).abs().max() < 1e-9
