"""Secret headers and redirects: a Prometheus URL that redirects to another origin gets no secret header
there (a tenant id read from a file, as ``Authorization`` is dropped by ``requests``), for the client that
``capplan ingest`` uses and for ``capplan discover``. Two fake servers on 127.0.0.1."""

from __future__ import annotations

import json

import pandas as pd

from capplan.config.prometheus import PrometheusConfig
from capplan.prometheus.client import PrometheusClient
from tests.capplan.prometheus.test_prometheus_faults import epoch, fake_server, send
from tests.conftest import run_cli

DAY = pd.Timestamp("2024-03-04T00:00:00Z")
TENANT = "tenant-9c1e-secret"


def _body(result) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()




def test_client_drops_secret_headers_on_a_redirect_to_another_origin(tmp_path):
    tenant_file = tmp_path / "tenant"
    tenant_file.write_text(TENANT + "\n")
    got_first, got_other = [], []
    values = [[epoch(DAY), "3"]]
    with fake_server(lambda h, q: (got_other.append(dict(h.headers)),
                                   send(h, 200, _body([{"metric": {}, "values": values}])))) as other:
        def redirect(h, q):
            got_first.append(dict(h.headers))
            h.send_response(307)
            h.send_header("Location", other + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()

        with fake_server(redirect) as first:
            cfg = PrometheusConfig.model_validate({"url": first, "retries": 0,
                                                   "headers": {"X-Scope-OrgID": {"file": str(tenant_file)}}})
            client = PrometheusClient(cfg, env={})
            try:
                answer = client.query_range("demand", epoch(DAY), epoch(DAY), 60)
            finally:
                client.close()
    assert answer.result and got_first and got_other
    assert got_first[0].get("X-Scope-OrgID") == TENANT  # the configured origin gets it
    assert all(TENANT not in json.dumps(h) for h in got_other)  # the other origin never does
    assert all("X-Scope-OrgID" not in h and "x-scope-orgid" not in {k.lower() for k in h} for h in got_other)


def test_same_origin_redirect_keeps_the_header(tmp_path):
    got = []

    def handler(h, q):
        if h.path.startswith("/old"):
            h.send_response(308)
            h.send_header("Location", h.path.replace("/old", "", 1))
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        got.append(h.headers.get("X-Scope-OrgID"))
        send(h, 200, _body([]))

    with fake_server(handler) as url:
        cfg = PrometheusConfig.model_validate({"url": url + "/old", "retries": 0,
                                               "headers": {"X-Scope-OrgID": {"env": "T"}}})
        client = PrometheusClient(cfg, env={"T": TENANT})
        try:
            client.query_range("demand", epoch(DAY), epoch(DAY), 60)
        finally:
            client.close()
    assert got == [TENANT]


def test_discover_sends_no_tenant_to_the_host_it_is_redirected_to(tmp_path, capsys):
    got_other = []
    res = [{"metric": {"queue_name": "q-r", "resource": "nvidia.com/gpu"}, "values": [[epoch(DAY), "4"]]}]

    def answer(h, q):
        got_other.append(dict(h.headers))
        send(h, 200, _body(res if "volcano_queue_request_scalar_resources" in q else []))

    with fake_server(answer) as other:
        def redirect(h, q):
            h.send_response(302)
            h.send_header("Location", other + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()

        with fake_server(redirect) as first:
            code, out, err = run_cli(["discover", "--prometheus-url", first, "--header", f"X-Scope-OrgID={TENANT}",
                                      "--out", str(tmp_path / "c.yaml"), "--at", DAY.isoformat()], capsys)
    assert code == 0, err
    assert got_other and all(TENANT not in json.dumps(h) for h in got_other)
    assert TENANT not in out + err
    assert f"note: answered by {other.rstrip('/')}" in err  # another host's answers are read, never silently


def test_ingest_notes_the_other_origin_that_answered(tmp_path):
    from capplan.sources.prometheus import ingest
    from capplan.store.local import Store
    from tests.capplan.prometheus.test_prometheus_tenants import cfg

    got_other = []
    t0 = epoch(DAY)
    with fake_server(lambda h, q: (got_other.append(dict(h.headers)), send(h, 200, _body(
            [{"metric": {}, "values": [[t0 + 300 * i, "3"] for i in range(4)]}])))) as other:
        def redirect(h, q):
            h.send_response(307)
            h.send_header("Location", other + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()

        with fake_server(redirect) as first:
            c = cfg(first, tmp_path / "s", headers={"X-Scope-OrgID": {"env": "CAPPLAN_TEST_TENANT"}})
            [r] = ingest(c, start=DAY.isoformat(), end=(DAY + pd.Timedelta("15min")).isoformat(),
                         env={"CAPPLAN_TEST_TENANT": TENANT})
    assert r.status == "ok" and got_other and all(TENANT not in json.dumps(h) for h in got_other)
    assert any(n.startswith(f"answered by {other}") and "redirected" in n for n in r.notes)
    assert any("redirected" in n for n in Store(tmp_path / "s").read_series("pool/a")[2]["notes"])
