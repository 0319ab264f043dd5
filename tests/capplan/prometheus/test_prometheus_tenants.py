"""Multi-tenant stores and answers that look right but are not: a tenant front that refuses requests
without X-Scope-OrgID (as Grafana Mimir and Cortex do), Thanos-style partial responses, native
histograms, vector answers and a series that stops. Fake servers on 127.0.0.1; the tenant front
forwards to a real Prometheus."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest
import yaml

from capplan.config.settings import CapplanConfig
from capplan.sources.prometheus import ingest
from capplan.store.local import Store
from optimizer.exporters import write_all
from tests import prom_fixture as pf
from tests.capplan.prometheus.test_prometheus_faults import epoch, fake_server, send
from tests.conftest import run_cli
from tests.optimizer.exporters.test_exporters import PLANS

DAY = pd.Timestamp("2024-03-04T00:00:00Z")
HOUR = DAY + pd.Timedelta(hours=1)
TENANT = "tenant-7f3a-secret"


def cfg(url: str, store, query: str = "demand", **prom) -> CapplanConfig:
    return CapplanConfig.model_validate({"store": str(store), "prometheus": {"url": url, "retries": 0, **prom},
                                         "series": [{"id": "pool/a", "query": query, "step": "5m"}]})


def points(t0: int, n: int, value="3") -> list:
    return [[t0 + 300 * i, value] for i in range(n)]


def body(result, result_type: str = "matrix", **extra) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": result_type, "result": result}, **extra}).encode()


# -- tenants -------------------------------------------------------------------------------------------------
def test_tenant_header_from_env_reaches_the_store_and_is_never_printed(prom, tmp_path, capsys, monkeypatch):
    refused = (401, b'{"status":"error","errorType":"unauthorized","error":"no org id"}')
    url, stop = pf.start_proxy(prom.url, lambda h: None if h.get("X-Scope-OrgID") == TENANT else refused)
    t0 = pd.Timestamp("2020-05-01T00:00:00Z")  # inside the backfilled Helios history
    args = ["ingest", "--start", t0.isoformat(), "--end", (t0 + pd.Timedelta(hours=1)).isoformat()]
    try:
        plain = tmp_path / "plain.yaml"
        plain.write_text(json.dumps({"store": "s1", "prometheus": {"url": url, "retries": 0},
                                     "series": [{"id": "t/a", "template": "k8s_gpus_requested"}]}))
        code, out, err = run_cli([*args, "--config", str(plain)], capsys)
        assert code == 2 and "HTTP 401" in err and "X-Scope-OrgID" in err  # the hint names the missing header
        tenant = tmp_path / "tenant.yaml"
        tenant.write_text(json.dumps({"store": "s2", "prometheus": {
            "url": url, "retries": 0, "headers": {"X-Scope-OrgID": {"env": "MIMIR_TENANT"}}},
            "series": [{"id": "t/a", "template": "k8s_gpus_requested"}]}))
        monkeypatch.setenv("MIMIR_TENANT", TENANT + "\n")
        code, out, err = run_cli([*args, "--config", str(tenant), "--format", "json"], capsys)
        assert code == 0, err
        assert json.loads(out)[0]["new_points"] == 13 and TENANT not in out + err
        monkeypatch.setenv("MIMIR_TENANT", "wrong-" + TENANT)
        code, out, err = run_cli([*args, "--config", str(tenant)], capsys)
        assert code == 2 and "headers X-Scope-OrgID from $MIMIR_TENANT" in err and TENANT not in out + err
        monkeypatch.delenv("MIMIR_TENANT")
        code, out, err = run_cli([*args, "--config", str(tenant)], capsys)
        assert code == 2 and "MIMIR_TENANT is not set" in err
    finally:
        stop()


def test_tenant_header_from_a_file(tmp_path):
    seen = []
    secret = tmp_path / "org"
    secret.write_text(TENANT + "\n")

    def answer(h, q):
        seen.append(h.headers.get("X-Scope-OrgID"))
        send(h, 200, body([{"metric": {}, "values": points(epoch(DAY), 13)}]))

    with fake_server(answer) as url:
        [r] = ingest(cfg(url, tmp_path / "s", headers={"X-Scope-OrgID": {"file": str(secret)}}),
                     start=DAY.isoformat(), end=HOUR.isoformat())
    assert r.status == "ok" and set(seen) == {TENANT}


# -- Thanos partial responses --------------------------------------------------------------------------------
def test_partial_answer_is_a_note_and_the_next_pull_refills_it(tmp_path):
    t0 = epoch(DAY)
    state = {"partial": True, "params": []}

    def answer(h, q):
        params = parse_qs(urlparse(h.path).query)
        state["params"].append(params)
        s, e = int(params["start"][0]), int(params["end"][0])
        n = (e - s) // 300 + 1
        if state["partial"]:  # one store down: half the points, and a warning saying so
            send(h, 200, body([{"metric": {}, "values": [[s + 300 * i, "3"] for i in range(0, n, 2)]}],
                              warnings=["No StoreAPIs matched for this query (store 10.0.0.7:10901 down)"]))
        else:
            send(h, 200, body([{"metric": {}, "values": [[s + 300 * i, "3"] for i in range(n)]}]))

    with fake_server(answer) as url:
        c = cfg(url, tmp_path / "s")
        [r] = ingest(c, start=DAY.isoformat(), end=HOUR.isoformat())
        assert state["params"][0]["partial_response"] == ["false"]
        assert r.status == "ok" and any("StoreAPIs" in n and "partial" in n for n in r.notes)
        store = Store(tmp_path / "s")
        assert store.read_series("pool/a")[2]["refill_from"] == t0
        state["partial"] = False
        [r2] = ingest(c, end=(HOUR + pd.Timedelta("10min")).isoformat())  # resumes at the partial range
        assert int(state["params"][-1]["start"][0]) == t0
        f = store.read_series("pool/a")[0]
        assert len(f) == 15 and f["value"].notna().all() and not any("partial" in n for n in r2.notes)
        assert store.read_series("pool/a")[2]["refill_from"] is None


# -- histograms and vectors ----------------------------------------------------------------------------------
def test_native_histogram_answer_is_refused_whole(tmp_path):
    t0 = epoch(DAY)
    hist = [[t0 + 300 * i, {"count": "4", "sum": "10", "buckets": [[0, "1", "2", "4"]]}] for i in range(6, 13)]

    def answer(h, q):  # a series that switched to native histograms halfway
        send(h, 200, body([{"metric": {"__name__": "lat"}, "values": points(t0, 6), "histograms": hist}]))

    with fake_server(answer) as url:
        [r] = ingest(cfg(url, tmp_path / "s"), start=DAY.isoformat(), end=HOUR.isoformat())
    assert r.status == "failed" and r.exit_code == 2
    assert "native-histogram samples (7 points, beside 6 float points)" in r.error and "histogram_" in r.error
    assert Store(tmp_path / "s").series_ids() == []  # nothing half-kept


@pytest.mark.parametrize("rtype,result", [("vector", [{"metric": {}, "value": [1, "3"]}]), ("scalar", [1, "3"])])
def test_vector_or_scalar_answer_names_the_real_cause(tmp_path, rtype, result):
    with fake_server(lambda h, q: send(h, 200, body(result, rtype))) as url:
        [r] = ingest(cfg(url, tmp_path / "s"), start=DAY.isoformat(), end=HOUR.isoformat())
    assert r.status == "failed" and f"answered a {rtype}, not a range" in r.error
    assert "check the selector" not in r.error


# -- a series that stops ---------------------------------------------------------------------------------------
def test_a_window_with_nothing_after_data_is_a_warning_not_up_to_date(tmp_path, capsys):
    t0 = epoch(DAY)
    state = {"alive": True}

    def answer(h, q):
        params = parse_qs(urlparse(h.path).query)
        s, e = int(params["start"][0]), int(params["end"][0])
        res = [{"metric": {}, "values": [[x, "2"] for x in range(s, e + 1, 300)]}] if state["alive"] else []
        send(h, 200, body(res))

    with fake_server(answer) as url:
        c = tmp_path / "c.yaml"
        c.write_text(json.dumps({"store": "s", "prometheus": {"url": url, "retries": 0},
                                 "series": [{"id": "pool/a", "query": "demand", "step": "5m"}]}))
        code, out, err = run_cli(["ingest", "--config", str(c), "--start", DAY.isoformat(),
                                  "--end", HOUR.isoformat()], capsys)
        assert code == 0
        state["alive"] = False
        code, out, err = run_cli(["ingest", "--config", str(c), "--end", (DAY + pd.Timedelta(days=1)).isoformat(),
                                  "--format", "json"], capsys)
    [r] = json.loads(out)
    assert r["status"] == "stopped" and r["status"] != "up-to-date"
    assert "pool/a" in r["warning"] and "rename" in r["warning"] and "exporter" in r["warning"]
    assert "warning: series pool/a" in err
    assert t0  # the window started after the stored data


# -- KEDA customHeaders ------------------------------------------------------------------------------------------
def test_keda_trigger_carries_custom_headers_for_a_tenant(tmp_path):

    cfg = CapplanConfig.model_validate({"prometheus": {"url": "http://127.0.0.1:9090"},
                                        "export": {"autoscaler": "keda",
                                                   "custom_headers": {"X-Scope-OrgID": "team-a"}}})
    write_all(PLANS, tmp_path, cfg.export)
    seen = [trig["metadata"].get("customHeaders") for f in (tmp_path / "manifests").glob("*-scaledobject.yaml")
            for trig in yaml.safe_load(f.read_text())["spec"]["triggers"] if trig["type"] == "prometheus"]
    assert seen and set(seen) == {"X-Scope-OrgID=team-a"}
    with pytest.raises(Exception, match="without commas"):
        CapplanConfig.model_validate({"export": {"custom_headers": {"X-Scope-OrgID": "a,b=c"}}})


# -- one-off URLs and discovery through a tenant front -----------------------------------------------------------
def test_prometheus_url_option_overrides_the_config_for_one_run(tmp_path, capsys):
    def answer(h, q):
        send(h, 200, body([{"metric": {}, "values": points(epoch(DAY), 13)}]))

    c = tmp_path / "c.yaml"
    c.write_text(json.dumps({"store": "s", "prometheus": {"url": "http://127.0.0.1:9", "retries": 0},
                             "series": [{"id": "pool/a", "query": "demand"}]}))
    with fake_server(answer) as url:
        code, out, err = run_cli(["ingest", "--config", str(c), "--prometheus-url", url, "--start", DAY.isoformat(),
                                  "--end", HOUR.isoformat(), "--format", "json"], capsys)
    assert code == 0 and json.loads(out)[0]["new_points"] == 13, err
    code, out, err = run_cli(["plan", "--config", str(c), "--prometheus-url", "http://u:p@127.0.0.1:9",
                              "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "--prometheus-url" in err and "u:p" not in err


def test_discover_sends_the_header_and_writes_only_its_variable_name(tmp_path, capsys):
    seen = []

    def answer(h, q):
        seen.append(h.headers.get("X-Scope-OrgID"))
        if "volcano_queue_request_scalar_resources" in q:
            res = [{"metric": {"queue_name": "q-x", "resource": "nvidia.com/gpu"}, "values": [[epoch(DAY), "6"]]}]
        else:
            res = []
        send(h, 200, body(res))

    out_file = tmp_path / "capplan.yaml"
    with fake_server(answer) as url:
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--header", f"X-Scope-OrgID={TENANT}",
                                  "--out", str(out_file), "--at", DAY.isoformat()], capsys)
    assert code == 0, err
    assert set(seen) == {TENANT} and "q-x" in out and TENANT not in out + err + out_file.read_text()
    doc = yaml.safe_load(out_file.read_text())
    assert doc["prometheus"]["headers"] == {"X-Scope-OrgID": {"env": "CAPPLAN_HEADER_X_SCOPE_ORGID"}}
    assert [s["id"] for s in doc["series"]] == ["volcano/q-x", "volcano/q-x/pending"]
    CapplanConfig.model_validate(doc)  # a config capplan takes as written
    with fake_server(lambda h, q: send(h, 200, body([]))) as url:
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--out", str(tmp_path / "none.yaml")], capsys)
    assert code == 2 and "no GPU namespace" in err and not (tmp_path / "none.yaml").exists()
