"""Demand as a real cluster records it: the synthetic cluster of :mod:`tests.synth_cluster` loaded
into a real Prometheus 2.x (promtool backfill) and a real VictoriaMetrics (import API), both on
127.0.0.1; every stored step of every template series must equal the ground truth (0 over,
0 under), idle steps stored as 0 and exporter-outage steps missing."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from capplan.config.settings import CapplanConfig
from capplan.sources.prometheus import ingest
from capplan.store.local import Store
from tests import prom_fixture as pf
from tests import synth_cluster as sc
from tests import vm_fixture as vf
from tests.conftest import FAST_CONFIG, run_cli

SERIES = {
    "pool/team-a": ({"template": "k8s_gpus_requested", "selector": {"namespace": "team-a"}}, "team-a"),
    "pool/team-b": ({"template": "k8s_gpus_requested", "selector": {"namespace": "team-b"}}, "team-b"),
    "pool/team-c-mig": ({"template": "k8s_gpus_requested", "selector": {"namespace": "team-c"},
                         "params": {"resource": "nvidia.com/mig-1g.10gb"}}, "team-c"),
    "cluster/gpus": ({"template": "k8s_gpus_requested"}, "cluster"),
    "queue/q-a": ({"template": "volcano_queue_allocated_gpus", "selector": {"queue_name": "q-a"}}, "q-a_allocated"),
    "queue/q-a-pending": ({"template": "volcano_queue_pending_gpus", "selector": {"queue_name": "q-a"}},
                          "q-a_pending"),
    "queue/cq-b": ({"template": "kueue_admitted_gpus", "selector": {"cluster_queue": "cq-b"}}, "cq-b_admitted"),
    "queue/cq-b-pending": ({"template": "kueue_pending_gpus", "selector": {"cluster_queue": "cq-b"}},
                           "cq-b_pending"),
    "queue/lq-b": ({"template": "kueue_local_queue_gpus", "selector": {"name": "lq-b", "namespace": "team-b"}},
                   "lq-b_admitted"),
    "cluster/busy": ({"template": "dcgm_gpus_busy"}, "busy"),
}
FROM = sc.START + pd.Timedelta("5min")
UNTIL = sc.START + pd.Timedelta(days=sc.DAYS) - pd.Timedelta("5min")


@pytest.fixture(scope="module")
def cluster():
    return sc.generate()


@pytest.fixture(scope="module")
def engines(cluster, tmp_path_factory):
    """{"prometheus": url, "victoriametrics": url} holding the same history."""
    prom, tool = pf.require_prometheus()
    vm = vf.require_victoria_metrics()
    root = tmp_path_factory.mktemp("engines")
    om = root / "cluster.om"
    cluster.write_openmetrics(om)
    pf.create_blocks(tool, om, root / "tsdb")
    ps = pf.start_prometheus(prom, root / "tsdb", root / "prom")
    vs = vf.start_vm(vm, root / "vm")
    try:
        vs.load(cluster.prometheus_text())
        yield {"prometheus": ps.url, "victoriametrics": vs.url}
    finally:
        ps.stop()
        vs.stop()


def config(url: str, store, **prom) -> CapplanConfig:
    return CapplanConfig.model_validate({
        "store": str(store), "prometheus": {"url": url, "scrape_interval": "1m", **prom},
        "series": [{"id": sid, "step": "5m", **spec} for sid, (spec, _) in SERIES.items()]})


@pytest.fixture(scope="module")
def pulled(engines, tmp_path_factory):
    """{engine: (results by id, Store)} after one ingest over the whole history."""
    out = {}
    for name, url in engines.items():
        store = Store(tmp_path_factory.mktemp(name))
        res = ingest(config(url, store.root), store, start=FROM.isoformat(), end=UNTIL.isoformat())
        out[name] = ({r.series_id: r for r in res}, store)
    return out


@pytest.mark.parametrize("engine", ["prometheus", "victoriametrics"])
def test_every_step_equals_the_ground_truth(cluster, pulled, engine):
    results, store = pulled[engine]
    truth = sc.truth_per_step(cluster.truth).loc[FROM:UNTIL]
    report = {}
    for sid, (_, col) in SERIES.items():
        r = results[sid]
        assert r.status == "ok", (sid, r.error)
        got = store.read_series(sid)[0].set_index("timestamp")["value"].reindex(truth.index)
        want = truth[col]
        both = want.notna() & got.notna()
        over = int((got[both] > want[both] + 1e-9).sum())
        under = int((got[both] < want[both] - 1e-9).sum())
        lost = int((want.notna() & got.isna()).sum())
        invented = int((want.isna() & got.notna()).sum())
        report[sid] = (over, under, lost, invented)
    assert all(v == (0, 0, 0, 0) for v in report.values()), str(report)


@pytest.mark.parametrize("engine", ["prometheus", "victoriametrics"])
def test_idle_steps_are_zero_and_outage_steps_missing_in_the_report(cluster, pulled, engine):
    results, _ = pulled[engine]
    truth = sc.truth_per_step(cluster.truth).loc[FROM:UNTIL]
    r = results["cluster/gpus"]
    assert r.idle_steps == int((truth["cluster"] == 0).sum()) > 12  # the idle night is there, as 0
    assert r.missing_steps == int(truth["cluster"].isna().sum()) == 23  # 16:00-17:59 without kube-state-metrics
    assert r.missing_ranges == ["2024-06-03T16:05Z .. 2024-06-03T17:55Z"]
    assert any("idle" in n for n in r.notes) and any("missing" in n for n in r.notes)
    # the queue series do not depend on kube-state-metrics: nothing missing there
    assert results["queue/q-a"].missing_steps == 0


def test_queued_demand_reaches_the_store_in_gpus(cluster, pulled):
    _, store = pulled["prometheus"]
    truth = sc.truth_per_step(cluster.truth).loc[FROM:UNTIL]
    for sid, col in (("queue/q-a-pending", "q-a_pending"), ("queue/cq-b-pending", "cq-b_pending")):
        got = store.read_series(sid)[0].set_index("timestamp")["value"]
        assert got.max() == truth[col].max() >= 8  # whole GPUs queued, not milli-units, not pod counts
        assert got.max() < 1000


def test_discover_finds_every_namespace_and_queue_and_its_config_plans(cluster, engines, tmp_path, capsys):

    written = tmp_path / "capplan.yaml"
    code, out, err = run_cli(["discover", "--prometheus-url", engines["victoriametrics"], "--out", str(written),
                              "--at", UNTIL.isoformat(), "--lookback", "2d", "--store", str(tmp_path / "store"),
                              "--format", "json"], capsys)
    assert code == 0, err
    found = json.loads(out)
    assert set(found["namespaces"]) == {"team-a", "team-b", "team-c"}
    truth = sc.truth_per_step(cluster.truth).loc[FROM:UNTIL]
    assert found["namespaces"]["team-c"] == {"nvidia_com_mig_1g_10gb": pytest.approx(truth["team-c"].max())}
    assert found["namespaces"]["team-a"]["nvidia_com_gpu"] == truth["team-a"].max()
    assert found["volcano_queues"]["q-a"] == (truth["q-a_allocated"] + truth["q-a_pending"]).max()
    assert set(found["volcano_queues"]) == {"q-a"} and set(found["kueue_cluster_queues"]) == {"cq-b"}
    doc = yaml.safe_load(written.read_text())
    ids = [s["id"] for s in doc["series"]]
    assert {"pool/team-a", "pool/team-b", "pool/team-c/mig_1g_10gb", "cluster/gpus", "volcano/q-a",
            "volcano/q-a/pending", "kueue/cq-b", "kueue/cq-b/pending"} == set(ids)
    code, out, err = run_cli(["ingest", "--config", str(written), "--start", FROM.isoformat(),
                              "--end", UNTIL.isoformat(), "-q"], capsys)
    assert code == 0, err
    # the written config plans as written (only the fast planning settings of the test suite added)
    fast = yaml.safe_load(FAST_CONFIG)
    plan_cfg = tmp_path / "plan.yaml"
    plan_cfg.write_text(yaml.safe_dump({**doc, **{k: v for k, v in fast.items() if k != "store"}}))
    code, out, err = run_cli(["plan", "--config", str(plan_cfg), "--out", str(tmp_path / "out"), "--series",
                              "pool/team-a,volcano/q-a/pending", "--format", "json", "-q"], capsys)
    assert code == 0, err[-3000:]
    assert set(json.loads(out)["series"]) == {"pool/team-a", "volcano/q-a/pending"}


@pytest.mark.parametrize("auth", ["bearer", "basic"])
def test_discover_through_an_auth_proxy_in_front_of_a_real_prometheus(engines, tmp_path, capsys, monkeypatch, auth):
    """A first connection as a cluster has it: the real Prometheus behind a proxy that wants a bearer token or basic
    auth (as kube-rbac-proxy or an ingress does). ``discover --config`` with the config's credentials lists what the
    open server lists; without them it is one line naming the URL, exit 2."""
    import base64

    token, password = "t0ken-xyz", "pa55-xyz"
    monkeypatch.setenv("PROM_TOKEN", token)
    monkeypatch.setenv("PROM_PASSWORD", password)
    expect = (f"Bearer {token}" if auth == "bearer"
              else "Basic " + base64.b64encode(f"capplan:{password}".encode()).decode())
    refused = (401, b'{"status":"error","errorType":"unauthorized","error":"unauthorized"}')
    url, stop = pf.start_proxy(engines["prometheus"], lambda h: None if h.get("Authorization") == expect else refused)
    try:
        cfg = tmp_path / "access.yaml"
        cfg.write_text(yaml.safe_dump({"prometheus": {"url": url, **(
            {"bearer_token_env": "PROM_TOKEN"} if auth == "bearer"
            else {"basic_auth": {"username": "capplan", "password_env": "PROM_PASSWORD"}})}}))
        code, out, err = run_cli(["discover", "--config", str(cfg), "--out", str(tmp_path / "capplan.yaml"),
                                  "--at", UNTIL.isoformat(), "--lookback", "2d", "--format", "json"], capsys)
        assert code == 0, err
        assert set(json.loads(out)["namespaces"]) == {"team-a", "team-b", "team-c"}
        written = (tmp_path / "capplan.yaml").read_text()
        assert token not in written and password not in written
        code, _, err = run_cli(["discover", "--prometheus-url", url, "--out", str(tmp_path / "none.yaml"),
                                "--at", UNTIL.isoformat(), "-q"], capsys)
        assert code == 2 and url in err and len(err.strip().splitlines()) == 1, err
    finally:
        stop()
