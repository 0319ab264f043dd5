"""Prometheus pulls: stale samples, peaks between steps, exported_* labels, 200 answers
with bad content, slow servers and credentials echoed back. A real Prometheus 2.x for the query
semantics, small fake HTTP servers on 127.0.0.1 for the faults."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from contextlib import contextmanager
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd
import pytest

from capplan.config.prometheus import PrometheusConfig
from capplan.config.settings import CapplanConfig, SeriesConfig
from capplan.prometheus.client import PrometheusClient
from capplan.promql.render import render
from capplan.sources.prometheus import pull
from capplan.store.local import Store
from optimizer.exporters.settings import ExportSettings
from tests import prom_fixture as pf
from tests.conftest import run_cli

DAY = pd.Timestamp("2024-03-04T00:00:00Z")
STOP, BACK = DAY + pd.Timedelta("12:02:30"), DAY + pd.Timedelta("14:00:00")


def epoch(t: pd.Timestamp) -> int:
    return int(t.value // 10**9)


def synthetic() -> dict[str, pd.Series]:
    """Two gauges scraped every 30 s for one day: ``peaky`` 4 GPUs, 32 for 2 minutes at :17 of every
    hour; ``dying`` 7 GPUs whose exporter stops at 12:02:30 and returns at 14:00."""
    t = pd.date_range(DAY, DAY + pd.Timedelta(days=1), freq="30s", inclusive="left")
    minute = t.minute + t.second / 60
    peaky = pd.Series(np.where((minute >= 17) & (minute < 19), 32.0, 4.0), index=t)
    dying = pd.Series(7.0, index=t[(t <= STOP) | (t >= BACK)])
    return {"peaky": peaky, "dying": dying}


@pytest.fixture(scope="module")
def synth_prom(tmp_path_factory):
    prom, tool = pf.require_prometheus()
    root = tmp_path_factory.mktemp("synth")
    lines = ["# TYPE capplan_test_gpus gauge"]
    for name, s in synthetic().items():
        lines += [f'capplan_test_gpus{{job="{name}",exported_namespace="team-a",namespace="gpu-operator"}} '
                  f"{v:g} {epoch(t)}" for t, v in s.items()]
    lines.append("# EOF")
    om = root / "synth.om"
    om.write_text("\n".join(lines) + "\n")
    pf.create_blocks(tool, om, root / "tsdb")
    srv = pf.start_prometheus(prom, root / "tsdb", root / "prom")
    yield srv
    srv.stop()


def pulled(url: str, job: str, **series) -> pd.Series:
    client = PrometheusClient(PrometheusConfig(url=url, scrape_interval="30s"))
    try:
        f, _ = pull(client, SeriesConfig(id=job, query=f'capplan_test_gpus{{job="{job}"}}', step="5m", **series),
                    epoch(DAY), epoch(DAY + pd.Timedelta(days=1)) - 300)
    finally:
        client.close()
    return f.set_index("timestamp")["value"]


# -- 9: staleness -------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["max", "last"])
def test_points_after_the_last_sample_are_missing(synth_prom, how):
    got = pulled(synth_prom.url, "dying", step_aggregation=how)
    # 12:05 holds the real samples of (12:00, 12:05]; nothing is stored from 12:10 until the exporter is back
    assert got[DAY + pd.Timedelta("12:05:00")] == 7.0
    gap = got[(got.index > DAY + pd.Timedelta("12:05:00")) & (got.index < BACK)]
    assert gap.empty, gap.head()
    assert got[BACK] == 7.0 and len(got) == 288 - 22  # 12:10 ... 13:55 missing


# -- 10: per-step maximum by default ----------------------------------------------------------
def test_short_peaks_are_kept_by_default(synth_prom):
    src = synthetic()["peaky"]
    expect = src.rolling("5min", closed="right").max()
    got = pulled(synth_prom.url, "peaky")
    assert len(got) == 288 and (got.to_numpy() == expect.loc[got.index].to_numpy()).all()
    assert (got == 32).sum() == 24  # the 2-minute burst of every hour falls in the step ending at :20
    last = pulled(synth_prom.url, "peaky", step_aggregation="last")
    assert (last == 4).all()  # the step's last value alone never sees the burst


# -- 11: exported_namespace / exported_pod ----------------------------------------------------------
def test_exported_labels_setting_reaches_templates_keda_and_adapter(synth_prom, tmp_path):
    q = render("dcgm_gpus_busy", {"namespace": "team-a", "pod": "p-1"}, exported_labels=True)
    assert 'exported_namespace="team-a"' in q and 'exported_pod="p-1"' in q and 'namespace="team-a"' not in \
        q.replace("exported_namespace", "")
    cfg = CapplanConfig.model_validate({"prometheus": {"url": synth_prom.url, "exported_labels": True}})
    assert (cfg.export.namespace_label, cfg.export.pod_label) == ("exported_namespace", "exported_pod")
    # the real server: the workload's namespace is found under exported_namespace
    client = PrometheusClient(cfg.prometheus)
    f, _ = pull(client, SeriesConfig(id="x", query='sum(capplan_test_gpus{exported_namespace="team-a",job="peaky"})'),
                epoch(DAY), epoch(DAY) + 3600)
    client.close()
    assert len(f) == 13


@pytest.mark.parametrize("autoscaler", ["keda", "hpa"])
def test_keda_and_adapter_queries_use_the_exported_labels(tmp_path, autoscaler):
    import yaml

    from optimizer.exporters import write_all
    from tests.optimizer.exporters.test_exporters import PLANS

    cfg = CapplanConfig.model_validate({"prometheus": {"url": "http://127.0.0.1:9090", "exported_labels": True},
                                        "export": {"autoscaler": autoscaler}})
    write_all(PLANS, tmp_path, cfg.export)
    so = yaml.safe_load(next((tmp_path / ("manifests" if autoscaler == "keda" else "alternatives/keda"))
                             .glob("*-scaledobject.yaml")).read_text())
    q = so["spec"]["triggers"][0]["metadata"]["query"]
    assert 'exported_namespace="' in q and "exported_pod=~" in q and " namespace=" not in q
    rule = yaml.safe_load((tmp_path / "adapter/prometheus-adapter-rules.yaml").read_text())["externalRules"][0]
    assert rule["seriesQuery"] == 'DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}'
    assert rule["resources"]["overrides"] == {"exported_namespace": {"resource": "namespace"}}
    assert "exported_pod=~" in rule["metricsQuery"]
    with pytest.raises(Exception, match="not a Prometheus label name"):
        ExportSettings(namespace_label="exported-namespace")


# -- fake servers ---------------------------------------------------------------------------------
@contextmanager
def fake_server(handler):
    """``handler(request_handler, query) -> None`` answers GETs on 127.0.0.1:<free port>."""

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802
            q = parse_qs(urlparse(self.path).query).get("query", [""])[0]
            handler(self, q)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def send(h, status: int, body: bytes, ctype: str = "application/json") -> None:
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def matrix(values) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                      "result": [{"metric": {}, "values": values}]}}).encode()


# -- 12: a 200 answer with bad content ----------------------------------------------------------------
def test_bad_200_content_fails_that_series_and_keeps_the_others(tmp_path, capsys):
    t0 = epoch(DAY)

    def answer(h, q):
        if "bad_value" in q:
            send(h, 200, matrix([[t0, "abc"]]))
        elif "no_data" in q:
            send(h, 200, b'{"status":"success"}')
        else:
            send(h, 200, matrix([[t0 + 300 * i, "5"] for i in range(13)]))

    with fake_server(answer) as url:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(json.dumps({"prometheus": {"url": url, "retries": 0}, "store": "store", "series": [
            {"id": "a/bad", "query": "bad_value"}, {"id": "b/nodata", "query": "no_data"},
            {"id": "c/good", "query": "good", "step_aggregation": "last"}]}))
        code, out, err = run_cli(["ingest", "--config", str(cfg), "--start", DAY.isoformat(),
                                  "--end", (DAY + pd.Timedelta(hours=1)).isoformat(), "--format", "json"], capsys)
    assert code == 1
    res = {r["series_id"]: r for r in json.loads(out)}
    assert [res[s]["status"] for s in ("a/bad", "b/nodata", "c/good")] == ["failed", "failed", "ok"]
    assert ("series a/bad: query 'max_over_time((last_over_time(bad_value[59999ms]))[299s:60s])'"
            in res["a/bad"]["error"])
    assert "'abc'" in res["a/bad"]["error"] and "without data.result" in res["b/nodata"]["error"]
    assert "internal error" not in err and "Traceback" not in err
    assert Store(tmp_path / "store").series_ids() == ["c/good"]


def test_implausible_prometheus_values_stored_as_missing_with_a_note(tmp_path):
    t0 = epoch(DAY)
    vals = [[t0 + 300 * i, "+Inf" if i == 3 else "1e308" if i == 5 else "5"] for i in range(13)]
    with fake_server(lambda h, q: send(h, 200, matrix(vals))) as url:
        from capplan.sources.prometheus import ingest

        cfg = CapplanConfig.model_validate({"prometheus": {"url": url, "retries": 0}, "store": str(tmp_path / "s"),
                                            "series": [{"id": "a", "query": "x", "step_aggregation": "last"}]})
        r = ingest(cfg, start=DAY.isoformat(), end=(DAY + pd.Timedelta(hours=1)).isoformat())[0]
    assert r.status == "ok" and any("2 implausible value(s)" in n for n in r.notes)
    f, _, _ = Store(tmp_path / "s").read_series("a")
    assert f["value"].isna().sum() == 2 and f["value"].max() == 5


# -- 13: timeout_s is a deadline ----------------------------------------------------------------------
def trickle(h, q):
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "100000")
    h.end_headers()
    try:
        for _ in range(40):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(1.5)
    except OSError:
        pass


def silent(h, q):
    time.sleep(8)


@pytest.mark.parametrize("handler", [trickle, silent], ids=["one-byte-every-1.5s", "no-answer"])
def test_timeout_is_a_deadline_and_says_timed_out(handler):
    from capplan.prometheus.client import PrometheusError

    with fake_server(handler) as url:
        client = PrometheusClient(PrometheusConfig(url=url, timeout_s=2, retries=0))
        t0 = time.monotonic()
        with pytest.raises(PrometheusError) as ei:
            client.query_range("up", epoch(DAY), epoch(DAY) + 600, 300, series_id="s")
        took = time.monotonic() - t0
        client.close()
    assert took < 5, took
    assert "timed out" in str(ei.value) and "cannot connect" not in str(ei.value)


# -- 14: credentials echoed by a server --------------------------------------------------------------------
def echo_auth(status: int):
    def answer(h, q):
        send(h, status, f'{{"status":"error","error":"denied for Authorization: {h.headers.get("Authorization")}", '
                        f'"echo":"{h.headers.get("Authorization")}"}}'.encode())
    return answer


@pytest.mark.parametrize("status", [401, 400, 503])
@pytest.mark.parametrize("auth", ["basic", "bearer"])
def test_echoed_credentials_never_printed(tmp_path, capsys, monkeypatch, status, auth):
    user, pw = "capplan", "pässw0rd-s3cret"
    b64 = base64.b64encode(f"{user}:{pw}".encode()).decode()
    monkeypatch.setenv("PROM_PW", pw)
    prom = {"basic_auth": {"username": user, "password_env": "PROM_PW"}} if auth == "basic" else \
        {"bearer_token_env": "PROM_PW"}
    with fake_server(echo_auth(status)) as url:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(json.dumps({"prometheus": {"url": url, "retries": 0, **prom}, "store": "store",
                                   "series": [{"id": "a", "query": "up"}]}))
        code, out, err = run_cli(["ingest", "--config", str(cfg), "--start", DAY.isoformat(),
                                  "--end", (DAY + pd.Timedelta(hours=1)).isoformat()], capsys)
    assert code in (1, 2)
    text = out + err
    assert "Authorization: ***" in text and f"HTTP {status}" in text
    for secret in (pw, b64, f"Basic {b64}", f"Bearer {pw}", b64[:16]):
        assert secret not in text
