"""``capplan serve``: metrics, reloads, half-written and failed runs, and a real Prometheus scraping it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import requests

from capplan.serve.metrics import forecast_at
from capplan.serve.plan import PlanSource
from capplan.serve.server import API_LATEST, make_server
from capplan.store.local import Store
from optimizer.exporters.base import Context
from optimizer.exporters.keda import scaled_object
from optimizer.exporters.settings import ExportSettings
from optimizer.plan.policy import Metrics, SeriesPlan
from tests.prom_fixture import free_port, require_prometheus
from tests.serve_fixture import SERIES, SERIES_DOC, write_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(tmp_path):
    store = Store(tmp_path / "store")
    source = PlanSource(str(store.root), poll_s=0)
    server = make_server(source, "127.0.0.1", 0, 150)
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    yield store, source, url
    server.shutdown()
    server.server_close()


def _metric(text: str, name: str, **labels) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


def test_binds_localhost_by_default_and_waits_for_a_plan(served):
    store, source, url = served
    assert url.startswith("http://127.0.0.1:")
    assert requests.get(url + "/healthz", timeout=5).status_code == 200
    r = requests.get(url + "/readyz", timeout=5)
    assert r.status_code == 503 and r.json()["ready"] is False
    assert "no plan published" in r.json()["reason"]  # says why in one line
    assert requests.get(url + API_LATEST, timeout=5).status_code == 503
    assert requests.get(url + "/nope", timeout=5).status_code == 404


def test_metrics_and_report_follow_latest(served):
    store, source, url = served
    rid = write_run(store, 10.0)
    assert requests.get(url + "/readyz", timeout=5).json()["run_id"] == rid
    doc = requests.get(url + API_LATEST, timeout=5).json()
    assert doc["run"]["run_id"] == rid and SERIES in doc["series"]
    text = requests.get(url + "/metrics", timeout=5).text
    t = pd.Timestamp.now(tz="UTC")
    g = source.plan.forecasts
    want = forecast_at(g, t + pd.Timedelta(seconds=150), "p90")
    got = _metric(text, "capplan_forecast_demand", series_id=SERIES, quantile="p90", lead="150")
    assert got == pytest.approx(want, abs=0.11)  # the scrape may fall in the next 5-minute step
    assert _metric(text, "capplan_plan_info", run_id=rid) == 1.0
    assert 0 <= _metric(text, "capplan_plan_age_seconds") < 60
    assert _metric(text, "capplan_recommended_replicas", series_id=SERIES) >= 12.0 / 0.95
    # a new run moves LATEST: the next request serves it
    rid2 = write_run(store, 50.0)
    assert rid2 != rid
    assert requests.get(url + API_LATEST, timeout=5).json()["run"]["run_id"] == rid2
    got2 = _metric(requests.get(url + "/metrics", timeout=5).text, "capplan_forecast_demand", series_id=SERIES,
                   quantile="p50", lead="0")
    assert got2 == pytest.approx(50.0, abs=0.11)


def test_a_run_that_does_not_load_keeps_the_last_good_plan(served):
    store, source, url = served
    good = write_run(store, 10.0)
    assert requests.get(url + "/readyz", timeout=5).json()["run_id"] == good
    bad = write_run(store, 20.0, report_text='{"run": {"run_id": "x"')  # broken JSON, published
    assert store.latest_run() == bad
    r = requests.get(url + "/readyz", timeout=5).json()
    assert r["run_id"] == good and bad in r["last_error"]
    text = requests.get(url + "/metrics", timeout=5).text
    assert _metric(text, "capplan_plan_last_reload_failed") == 1.0
    assert _metric(text, "capplan_plan_reload_failures_total") >= 1
    assert requests.get(url + API_LATEST, timeout=5).json()["run"]["run_id"] == good
    newer = write_run(store, 30.0)  # the next good run is served again
    assert requests.get(url + API_LATEST, timeout=5).json()["run"]["run_id"] == newer
    assert _metric(requests.get(url + "/metrics", timeout=5).text, "capplan_plan_last_reload_failed") == 0.0


WRITER = textwrap.dedent("""
    import sys, time, json
    from pathlib import Path
    from capplan.store import atomic
    from capplan.store.local import Store
    from tests.serve_fixture import forecasts, report_doc
    from capplan.store.runs import new_run_id
    import datetime as dt, pandas as pd
    store, n, pause = Store(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    for k in range(n):
        now = dt.datetime.now(dt.timezone.utc)
        rid = new_run_id(now, k)
        with atomic.replace_dir(store.run_dir(rid)) as tmp:
            (Path(tmp) / "report.json").write_text(json.dumps(report_doc(rid, now)))
            print("writing", rid, flush=True)
            time.sleep(pause)   # a long run: files keep coming
            forecasts(pd.Timestamp(now), 100.0 + k).to_parquet(Path(tmp) / "forecasts.parquet", index=False)
            for i in range(20):
                (Path(tmp) / f"part{i}.bin").write_bytes(b"x" * 100000)
        store.mark_latest(rid)
        print("published", rid, flush=True)
""")


def _writer(store: Store, n: int, pause: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(store.root), str(n), str(pause)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


def test_readers_never_see_a_half_written_run(served):
    store, source, url = served
    write_run(store, 10.0)
    proc = _writer(store, 4, 0.3)
    seen, bad = set(), []
    while proc.poll() is None:
        doc = requests.get(url + API_LATEST, timeout=5).json()
        plan = source.plan
        seen.add(doc["run"]["run_id"])
        if plan is None or plan.forecasts.empty or SERIES not in doc["series"]:
            bad.append(doc["run"]["run_id"])
    assert proc.wait(60) == 0
    doc = requests.get(url + API_LATEST, timeout=5).json()
    seen.add(doc["run"]["run_id"])
    assert not bad
    assert source.reload_failures == 0  # never a run LATEST named that was not complete
    assert len(seen) >= 3  # the reader followed the runs as they were published
    assert doc["run"]["run_id"] == store.latest_run()


def test_a_run_killed_mid_write_leaves_the_previous_plan(served):
    store, source, url = served
    good = write_run(store, 10.0)
    proc = _writer(store, 1, 30.0)
    line = proc.stdout.readline()
    assert line.startswith("writing")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert store.latest_run() == good
    assert requests.get(url + API_LATEST, timeout=5).json()["run"]["run_id"] == good
    assert source.reload_failures == 0
    # the half-written folder is a temporary, never a run
    assert store.list_runs() == [good]


def _plan_for_export() -> SeriesPlan:
    params = dict(SERIES_DOC["recommended"]["params"])
    m = Metrics(**{k: v for k, v in SERIES_DOC["baseline"].items() if k in Metrics.model_fields})
    return SeriesPlan(series_id=SERIES, kind="inference", unit="replica", params=params,
                      plan=dict(SERIES_DOC["plan"]), recommended=m, baseline=m, forecast_version="test")


def test_prometheus_scrapes_serve_and_the_scaledobject_query_returns_the_prediction(served, tmp_path):
    prom, _ = require_prometheus()
    store, source, url = served
    write_run(store, 10.0)
    target = url.removeprefix("http://")
    work = tmp_path / "prom"
    work.mkdir()
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: capplan\n    static_configs:\n      - targets: ['{target}']\n")
    port = free_port()
    log = open(work / "log", "wb")
    p = subprocess.Popen([prom, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
                          f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], stdout=log,
                         stderr=subprocess.STDOUT, cwd=work)
    try:
        ctx = Context(ExportSettings(prometheus_url=f"http://127.0.0.1:{port}"), {SERIES: "infer-nasa-http-eea705"})
        doc = scaled_object(_plan_for_export(), ctx)
        trig = [t for t in doc.obj["spec"]["triggers"] if t["name"] == "predicted-demand"]
        assert len(trig) == 1 and trig[0]["metadata"]["threshold"] == "0.95"
        assert not [t for t in doc.obj["spec"]["triggers"] if t["type"] == "cron"]
        query = trig[0]["metadata"]["query"]
        prom_url = f"http://127.0.0.1:{port}"
        got = None
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end and got is None:
            time.sleep(1)
            try:
                r = requests.get(prom_url + "/api/v1/query", params={"query": query}, timeout=5).json()
            except requests.RequestException:
                continue
            res = r.get("data", {}).get("result", [])
            if res:
                got = (float(res[0]["value"][0]), float(res[0]["value"][1]), len(res))
        assert got is not None, (work / "log").read_text()[-2000:]
        ts, value, n = got
        assert n == 1  # one element, as KEDA's Prometheus scaler needs
        g = source.plan.forecasts
        # what serve exposed at the scrape (at most a few seconds before the query's time)
        near = {forecast_at(g, pd.Timestamp(ts - d, unit="s", tz="UTC") + pd.Timedelta(seconds=150), "p90")
                for d in range(0, 6)}
        assert any(value == pytest.approx(v, rel=1e-9) for v in near), (value, near)
    finally:
        p.terminate()
        p.wait(10)
