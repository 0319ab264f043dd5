"""A selection that vanishes is missing (then ``stopped``), never idle: a REAL Prometheus holding two
GPU groups (node-a with A100s, node-b with L4s), where everything of group b stops reporting at noon
(its dcgm-exporter, its node, its namespace, its Volcano queue and its Kueue flavor) while group a
reports on. Every template that answers 0 while its exporter reports must scope that "alive" term to
its own selection, or b's afternoon is stored as idle with status ok."""

from __future__ import annotations

import pandas as pd
import pytest

from capplan.config.settings import CapplanConfig
from capplan.sources.prometheus import ingest
from capplan.store.local import Store
from tests import prom_fixture as pf

pytestmark = pytest.mark.slow

DAY = pd.Timestamp("2024-05-06T00:00:00Z")
STOP = DAY + pd.Timedelta("12h")
END = DAY + pd.Timedelta("23:55:00")
PRODUCT = {"a": "NVIDIA-A100-SXM4-80GB", "b": "NVIDIA-L4"}
MODEL_NAME = {"a": "NVIDIA A100-SXM4-80GB", "b": "NVIDIA L4"}

# (template, selector, value of group b before it stops; group a's value with the same selector pattern)
CASES = {
    "dcgm-host": ("dcgm_gpus_busy", "Hostname", {"a": "node-a", "b": "node-b"}, 1.0),
    "dcgm-model": ("dcgm_gpus_busy", "gpu_product", PRODUCT, 1.0),
    "capacity-model": ("k8s_gpus_allocatable_by_model", "gpu_product", PRODUCT, 2.0),
    "requested-model": ("k8s_gpus_requested_by_model", "gpu_product", PRODUCT, 1.0),
    "requested-namespace": ("k8s_gpus_requested", "namespace", {"a": "team-a", "b": "team-b"}, 1.0),
    "requested-node": ("k8s_gpus_requested", "node", {"a": "node-a", "b": "node-b"}, 1.0),
    "reporting-model": ("dcgm_gpus_reporting", "gpu_model", {"a": "A100-80GB", "b": "L4"}, 2.0),
    "quota-flavor": ("kueue_nominal_quota_gpus", "flavor", {"a": "a100-80gb", "b": "l4"}, 4.0),
    "volcano-queue": ("volcano_queue_allocated_gpus", "queue_name", {"a": "q-a", "b": "q-b"}, 1.0),
    "kueue-flavor": ("kueue_admitted_gpus", "flavor", {"a": "a100-80gb", "b": "l4"}, 1.0),
}


def _series() -> list[str]:
    """OpenMetrics lines: one sample a minute; group b's series end at :data:`STOP`."""
    out: dict[str, list[str]] = {}
    minutes = pd.date_range(DAY, DAY + pd.Timedelta(days=1), freq="1min", inclusive="left")

    def emit(name, labels, t, v):
        lab = ",".join(f'{k}="{x}"' for k, x in labels.items())
        out.setdefault(name, []).append(f"{name}{{{lab}}} {v:g} {int(t.value // 10**9)}")

    for t in minutes:
        emit("kube_pod_status_phase", {"namespace": "monitoring", "pod": "ksm-0", "uid": "k", "phase": "Running"}, t, 1)
        emit("kueue_cluster_queue_status", {"cluster_queue": "cq", "status": "active"}, t, 1)
        for g in ("a", "b"):
            if g == "b" and t >= STOP:
                continue
            node, ns, pod = f"node-{g}", f"team-{g}", f"{g}-0"
            for i in range(2):
                emit("DCGM_FI_DEV_GPU_UTIL", {"gpu": str(i), "UUID": f"GPU-{g}-{i}", "device": f"nvidia{i}",
                                              "modelName": MODEL_NAME[g], "Hostname": node}, t, 50)
            emit("kube_node_labels", {"node": node, "label_nvidia_com_gpu_product": PRODUCT[g]}, t, 1)
            emit("kube_node_status_allocatable", {"node": node, "resource": "nvidia_com_gpu", "unit": "integer"}, t, 2)
            emit("kube_namespace_status_phase", {"namespace": ns, "phase": "Active"}, t, 1)
            emit("kube_pod_info", {"namespace": ns, "pod": pod, "uid": f"u-{g}", "node": node}, t, 1)
            emit("kube_pod_status_phase", {"namespace": ns, "pod": pod, "uid": f"u-{g}", "phase": "Running"}, t, 1)
            emit("kube_pod_container_resource_requests", {"namespace": ns, "pod": pod, "container": "main",
                                                          "node": node, "resource": "nvidia_com_gpu",
                                                          "unit": "integer"}, t, 1)
            q = {"queue_name": f"q-{g}"}
            emit("volcano_queue_allocated_scalar_resources", {**q, "resource": "nvidia.com/gpu"}, t, 1000)
            emit("volcano_queue_weight", q, t, 1)
            fl = {"cohort": "fleet", "cluster_queue": "cq", "flavor": CASES["kueue-flavor"][2][g],
                  "resource": "nvidia.com/gpu"}
            emit("kueue_cluster_queue_resource_usage", fl, t, 1)
            emit("kueue_cluster_queue_nominal_quota", fl, t, 4)
    lines = []
    for name, ls in out.items():
        lines += [f"# TYPE {name} gauge", *ls]
    return lines + ["# EOF"]


@pytest.fixture(scope="module")
def two_groups(tmp_path_factory):
    prom, tool = pf.require_prometheus()
    root = tmp_path_factory.mktemp("alive")
    om = root / "groups.om"
    om.write_text("\n".join(_series()) + "\n")
    pf.create_blocks(tool, om, root / "tsdb")
    srv = pf.start_prometheus(prom, root / "tsdb", root / "prom")
    yield srv.url
    srv.stop()


def _cfg(url: str, store, case: str) -> CapplanConfig:
    template, key, values, _ = CASES[case]
    return CapplanConfig.model_validate({
        "store": str(store), "prometheus": {"url": url, "scrape_interval": "1m", "retries": 1},
        "series": [{"id": f"{case}/{g}", "template": template, "selector": {key: values[g]}, "step": "5m"}
                   for g in ("a", "b")]})


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_vanished_selection_is_missing_then_stopped_never_idle(two_groups, tmp_path, case):
    value = CASES[case][3]
    store = Store(tmp_path / "store")
    cfg = _cfg(two_groups, store.root, case)
    res = {r.series_id: r for r in ingest(cfg, store, start=(DAY + pd.Timedelta("5min")).isoformat(),
                                          end=END.isoformat())}
    for g in ("a", "b"):
        assert res[f"{case}/{g}"].status == "ok", res[f"{case}/{g}"]
    a = store.read_series(f"{case}/a")[0].set_index("timestamp")["value"]
    b = store.read_series(f"{case}/b")[0].set_index("timestamp")["value"].dropna()
    # group a reports all day; group b until noon, then nothing: no step after it is stored, least of all as 0
    assert len(a) == 287 and (a == value).all()
    assert (b == value).all() and b.index.max() == STOP and len(b) == 144
    assert res[f"{case}/b"].idle_steps == 0 and res[f"{case}/b"].missing_steps == 287 - 144
    assert any("missing" in n for n in res[f"{case}/b"].notes)
    # the next pull sees only the afternoon: b is reported stopped with a warning, a is ok
    res2 = {r.series_id: r for r in ingest(cfg, store, start=(STOP + pd.Timedelta("1h")).isoformat(),
                                           end=END.isoformat())}
    assert res2[f"{case}/a"].status == "ok"
    assert res2[f"{case}/b"].status == "stopped" and res2[f"{case}/b"].exit_code == 0
    assert "stopped" in res2[f"{case}/b"].warning
