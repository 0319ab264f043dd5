"""Pulling history from a REAL Prometheus (tests/prom_fixture.py), no mocks on this path.

The server holds May 2020 of the Helios team vc6YE (running + pending GPUs per
minute) as kube-state-metrics series, and two days of DCGM series.
Without prometheus/promtool these tests skip locally and fail under CI=true.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import requests

from capplan.config.prometheus import PrometheusConfig
from capplan.config.settings import CapplanConfig, SeriesConfig, load_config
from capplan.errors import InputError
from capplan.prometheus.client import PrometheusClient
from capplan.prometheus.parse import chunk_ranges, parse_values
from capplan.promql import render as promql
from capplan.sources.prometheus import ingest, pull
from capplan.store.local import Store
from tests import prom_fixture as pf
from tests.conftest import run_cli

T0 = pd.Timestamp("2020-04-30T16:00:00Z")  # 2020-05-01 00:00 in Asia/Shanghai, first Helios minute
T_END = pd.Timestamp("2020-05-31T15:59:00Z")
K8S = {"template": "k8s_gpus_requested", "selector": {"namespace": pf.NAMESPACE}}


def epoch(t: pd.Timestamp) -> int:
    return int(t.value // 10**9)


def source_demand(prom_data, step: str = "5min") -> pd.Series:
    """Helios running + pending GPUs at the grid points (the source of truth)."""
    h = prom_data.helios.set_index("timestamp")
    s = h["running"] + h["pending"]
    return s[s.index == s.index.floor(step)]


def source_peak(prom_data, step: str = "5min") -> pd.Series:
    """The per-step maximum a pull stores by default (``step_aggregation: max``): the peak
    of the per-minute source over the step ``(t - step, t]`` before each grid point t."""
    h = prom_data.helios.set_index("timestamp")
    s = (h["running"] + h["pending"]).sort_index()
    peak = s.rolling(pd.Timedelta(step), closed="right").max()
    return peak[peak.index == peak.index.floor(step)]


def cfg_for(url: str, series: list[dict], store: Path, **prom) -> CapplanConfig:
    return CapplanConfig.model_validate({"prometheus": {"url": url, "retries": 1, "backoff_s": 0.05, **prom},
                                         "series": series, "store": str(store)})


def snapshot(store_root: Path) -> dict[str, str]:
    return {str(p.relative_to(store_root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(store_root.rglob("*")) if p.is_file()}


# -- pure parts ---------------------------------------------------------------------------
def test_chunks_are_on_the_grid_without_overlap():
    step = 60
    chunks = chunk_ranges(epoch(T0) + 7, epoch(T_END), step, 11000)
    assert chunks[0][0] == epoch(T0) + 60  # rounded up to the grid
    pts = [(e - s) // step + 1 for s, e in chunks]
    assert max(pts) <= 11000 and sum(pts) == (epoch(T_END) - epoch(T0)) // step
    assert all(s % step == 0 and e % step == 0 for s, e in chunks)
    assert all(b[0] == a[1] + step for a, b in zip(chunks, chunks[1:]))


def test_string_values_parse_to_float_and_utc():
    t, x = parse_values([[1588262400, "1.5"], [1588262460.0, "NaN"], [1588262520, "+Inf"], [1588262580, "-Inf"]])
    assert x[0] == 1.5 and np.isnan(x[1]) and x[2] == np.inf and x[3] == -np.inf
    assert pd.Timestamp(int(t[0]), unit="ms", tz="UTC") == T0
    gap = [[1588262400, "1"], [1588262460, "2"], [1588262580, "3"]]  # a missing minute
    for step in (None, 60):
        t, x = parse_values(gap, step)
        np.testing.assert_array_equal(t, np.array([1588262400, 1588262460, 1588262580]) * 1000)
    t, _ = parse_values([[1588262400, "1"], [1588262460, "2"], [1588262520, "3"]], 60)
    np.testing.assert_array_equal(t, np.array([1588262400, 1588262460, 1588262520]) * 1000)


def test_escaping_keeps_label_values_one_string():
    evil = 'a"} or vector(1000) or x{b="\\'
    q = promql.render("dcgm_fb_used_mib", {"namespace": evil})
    inner = q[q.index('namespace="') + len("namespace="):q.rindex("})")]
    assert ast.literal_eval(inner) == evil  # PromQL and Python share these escapes
    with pytest.raises(InputError, match="label name"):
        promql.render("dcgm_fb_used_mib", {'namespace"} or vector(1) #': "x"})


def test_config_rejects_credentials_in_url_and_unknown_template(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("prometheus: {url: 'http://u:pw@127.0.0.1:9090'}\n")
    with pytest.raises(InputError, match="prometheus.url") as e:
        load_config(p)
    assert "pw" not in str(e.value).replace("password_env", "")
    p.write_text("series: [{id: a, template: dcgm_nope}]\n")
    with pytest.raises(InputError, match="dcgm_nope.*known"):
        load_config(p)


def test_require_prometheus_fails_under_ci(monkeypatch):
    monkeypatch.setattr(pf.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="prometheus"):
        pf.require_prometheus()


def test_ingest_cli_bad_input_exits_2(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("series: [{id: a, query: up}]\n")
    code, _, err = run_cli(["ingest", "--config", str(p)], capsys)
    assert code == 2 and "no `prometheus:` section" in err
    p.write_text("prometheus: {url: 'http://127.0.0.1:9'}\nseries: [{id: a, query: up}]\n")
    code, _, err = run_cli(["ingest", "--config", str(p), "--series", "nope"], capsys)
    assert code == 2 and "--series nope: not in the config; known: a" in err
    code, _, err = run_cli(["ingest", "--config", str(p), "--start", "2020-05-02", "--end", "2020-05-01"], capsys)
    assert code == 2 and "must be before --end" in err
    code, _, err = run_cli(["ingest", "--config", str(p), "--start", "yesterday"], capsys)
    assert code == 2 and "--start 'yesterday'" in err


# -- against the real server ------------------------------------------------------------
def test_ingest_values_equal_source_and_resume(prom, prom_data, tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prometheus": {"url": prom.url}, "store": "store",
                               "series": [{"id": "train/vc6YE", "step": "5m", **K8S}]}))
    mid = T0 + pd.Timedelta(days=10)
    code, out, err = run_cli(["ingest", "--config", str(cfg), "--start", T0.isoformat(), "--end", mid.isoformat(),
                              "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)[0]["new_points"] == 10 * 288 + 1
    # resume: no --start, continues one step after the stored last timestamp
    code, out, err = run_cli(["ingest", "--config", str(cfg), "--end", T_END.isoformat(), "--format", "json"], capsys)
    assert code == 0, err
    r = json.loads(out)[0]
    assert r["range_start"] == (mid + pd.Timedelta(minutes=5)).isoformat()
    frame, meta, state = Store(tmp_path / "store").read_series("train/vc6YE")
    assert r["total_points"] == len(frame) == 31 * 288
    assert frame["timestamp"].is_unique and str(frame["timestamp"].dtype) == "datetime64[ns, UTC]"
    src = source_peak(prom_data)
    got = frame.set_index("timestamp")["value"]
    pd.testing.assert_series_equal(got, src.loc[got.index], check_names=False, check_freq=False)
    assert meta.kind == "training" and meta.query_unit == "gpu" and state["step_s"] == 300
    assert state["step_aggregation"] == "max" and state["pulled_query"].startswith("max_over_time(")


def test_long_range_is_chunked_whole_without_duplicates(prom, prom_data):
    client = PrometheusClient(PrometheusConfig(url=prom.url))
    s = SeriesConfig(id="train/vc6YE", step="1m", **K8S)
    calls = []
    frame, _ = pull(client, s, epoch(T0), epoch(T_END), on_chunk=lambda *a: calls.append(a))
    assert len(calls) == 5  # 44,640 one-minute points > 11,000 per request
    assert len(frame) == 44640 and frame["timestamp"].is_unique
    np.testing.assert_array_equal(frame["value"].to_numpy(), source_demand(prom_data, "1min").to_numpy())


def test_label_set_changes_combined_per_aggregation(prom, prom_data):
    client = PrometheusClient(PrometheusConfig(url=prom.url))
    ns = f'namespace="{pf.NAMESPACE}"'
    join = (f'* on(namespace, pod) group_left() max by (namespace, pod) '
            f'(kube_pod_status_phase{{phase=~"Running|Pending", {ns}}} == 1)')
    start, end = epoch(T0 + pd.Timedelta(hours=20)), epoch(T0 + pd.Timedelta(days=2, hours=4))
    window = slice(pd.Timestamp(start, unit="s", tz="UTC"), pd.Timestamp(end, unit="s", tz="UTC"))
    src = source_demand(prom_data).loc[window]
    # per-pod series (pods are renamed daily) combined by the query's outer `sum by (pod)`: by the client
    # when each point is the step's last value, inside the step maximum (peak of the total) by default
    q = f"sum by (pod) (kube_pod_container_resource_requests{{{ns}}} {join})"
    f, notes = pull(client, SeriesConfig(id="x", query=q, step_aggregation="last"), start, end)
    np.testing.assert_array_equal(f["value"].to_numpy(), src.to_numpy())
    assert any("label sets combined with sum" in n for n in notes)
    f, notes = pull(client, SeriesConfig(id="x", query=q), start, end)
    np.testing.assert_array_equal(f["value"].to_numpy(), source_peak(prom_data).loc[window].to_numpy())
    # no aggregation, label sets that follow each other (one Running train pod per day): joined
    q2 = (f'kube_pod_container_resource_requests{{{ns}, pod=~".*-train-.*"}} * on(namespace, pod) group_left() '
          f'(kube_pod_status_phase{{phase="Running", {ns}}} == 1)')
    f2, notes2 = pull(client, SeriesConfig(id="x", query=q2), start, end)
    h = prom_data.helios.set_index("timestamp")["running"].rolling("5min", closed="right").max()
    np.testing.assert_array_equal(f2["value"].to_numpy(), h.loc[f2["timestamp"]].to_numpy())
    assert len(f2) == len(src) and any("followed each other" in n for n in notes2)
    # no aggregation and overlapping label sets: an error, never a silent pick or double count
    q3 = f"kube_pod_container_resource_requests{{{ns}}} {join}"
    with pytest.raises(Exception, match="overlap in time.*aggregate"):
        pull(client, SeriesConfig(id="x", query=q3), start, end)


def test_nan_and_inf_from_prometheus(prom):
    client = PrometheusClient(PrometheusConfig(url=prom.url))
    start = epoch(T0)
    for q, check in (("vector(0) / 0", np.isnan), ("vector(1) / 0", lambda v: v == np.inf),
                     ("vector(-1) / 0", lambda v: v == -np.inf)):
        f, _ = pull(client, SeriesConfig(id="x", query=q), start, start + 600)
        assert len(f) == 3 and all(check(v) for v in f["value"]), q


def test_dcgm_templates_mig_factor_100_and_gpu_share(prom, prom_data):
    client = PrometheusClient(PrometheusConfig(url=prom.url))
    n = pf.DCGM_DAYS * 1440
    v = pf.dcgm_values(prom_data.helios.iloc[:n])
    sel = {"namespace": pf.NAMESPACE}
    start, end = epoch(T0), epoch(T0) + (n - 1) * 60

    def get(t):
        f, _ = pull(client, SeriesConfig(id=t, template=t, selector=sel, step="1m"), start, end)
        assert len(f) == n
        return f["value"].to_numpy()

    # whole GPUs report GPU_UTIL (percent); MIG instances only PROF_GR_ENGINE_ACTIVE (ratio) -> x 100
    per_gpu = [v["util0"], v["util1"], v["util2"], 100 * v["mig1"], 100 * v["mig2"]]
    np.testing.assert_allclose(get("dcgm_gpu_util"), np.mean(per_gpu, axis=0), rtol=1e-9)
    # busy GPU-equivalents: a MIG instance counts its share of a GPU (3g.40gb: 3 of 7 slices)
    share = int(pf.MIG_PROFILE[0]) / 7
    busy = (v["util0"] + v["util1"] + v["util2"]) / 100 + (v["mig1"] + v["mig2"]) * share
    np.testing.assert_allclose(get("dcgm_gpus_busy"), busy, rtol=1e-9)
    np.testing.assert_allclose(get("dcgm_fb_used_mib"), sum(v[f"fb{g}"] for g in range(4)))
    np.testing.assert_allclose(get("dcgm_power_w"), sum(v[f"power{g}"] for g in range(4)), rtol=1e-9)


def test_escaped_selector_cannot_inject(prom, tmp_path):
    evil = pf.NAMESPACE + '"} or vector(1000) or up{x="\\'
    cfg = cfg_for(prom.url, [{"id": "evil", "template": "dcgm_fb_used_mib", "selector": {"namespace": evil}}],
                  tmp_path / "store")
    [r] = ingest(cfg, start=T0.isoformat(), end=(T0 + pd.Timedelta(hours=2)).isoformat())
    # the whole value is one label value: Prometheus accepts the query and finds no such namespace
    assert r.status == "empty" and "no samples" in r.error and r.exit_code == 2
    assert not (tmp_path / "store").exists()


def test_bad_query_is_a_clear_4xx_error(prom, tmp_path):
    q = "sum(rate(DCGM_FI_DEV_GPU_UTIL[5m])"
    cfg = cfg_for(prom.url, [{"id": "train/bad", "query": q}], tmp_path / "store")
    [r] = ingest(cfg, start=T0.isoformat(), end=(T0 + pd.Timedelta(hours=1)).isoformat())
    assert r.status == "failed" and r.exit_code == 2
    assert "train/bad" in r.error and q in r.error and "HTTP 400" in r.error and "bad_data" in r.error


def test_bearer_token_right_and_wrong(prom, prom_data, tmp_path, monkeypatch, capsys):
    url, stop = pf.start_bearer_proxy(prom.url, pf.BEARER_TOKEN)
    try:
        series = [{"id": "train/vc6YE", **K8S}]
        cfg = cfg_for(url, series, tmp_path / "s1", bearer_token_env="PROM_TOKEN")
        end = (T0 + pd.Timedelta(days=1)).isoformat()
        [ok] = ingest(cfg, start=T0.isoformat(), end=end, env={"PROM_TOKEN": pf.BEARER_TOKEN})
        assert ok.status == "ok" and ok.new_points == 289
        # a secret mounted from a file ends in a newline: stripped, accepted
        [nl] = ingest(cfg_for(url, series, tmp_path / "s0", bearer_token_env="PROM_TOKEN"), start=T0.isoformat(),
                      end=end, env={"PROM_TOKEN": pf.BEARER_TOKEN + "\n"})
        assert nl.status == "ok" and nl.new_points == 289
        # whitespace inside a token: refused before any request, the value never shown
        with pytest.raises(InputError, match="PROM_TOKEN holds whitespace") as exc:
            ingest(cfg, start=T0.isoformat(), end=end, env={"PROM_TOKEN": "S3CRET part\ttwo"})
        assert "S3CRET" not in str(exc.value)
        wrong = "wrong-token-123"
        [bad] = ingest(cfg_for(url, series, tmp_path / "s2", bearer_token_env="PROM_TOKEN"),
                       start=T0.isoformat(), end=end, env={"PROM_TOKEN": wrong})
        assert bad.status == "failed" and bad.exit_code == 2
        assert "refused the credentials (HTTP 401" in bad.error and "invalid or missing bearer token" in bad.error
        assert "train/vc6YE" in bad.error and "PROM_TOKEN" in bad.error and wrong not in bad.error
        # the CLI: exit 2, message on stderr, never the token
        p = tmp_path / "c.yaml"
        p.write_text(json.dumps({"prometheus": {"url": url, "bearer_token_env": "PROM_TOKEN", "retries": 0},
                                 "series": series, "store": "s3"}))
        monkeypatch.setenv("PROM_TOKEN", wrong)
        code, out, err = run_cli(["ingest", "--config", str(p), "--start", T0.isoformat(), "--end", end], capsys)
        assert code == 2 and "refused the credentials" in err and wrong not in out + err
        monkeypatch.delenv("PROM_TOKEN")
        code, _, err = run_cli(["ingest", "--config", str(p), "--start", T0.isoformat(), "--end", end], capsys)
        assert code == 2 and "PROM_TOKEN is not set" in err
    finally:
        stop()


def test_basic_auth_right_and_wrong(prom_factory, tmp_path):
    srv = prom_factory(pf.basic_auth_web_config(), ready_auth=(pf.BASIC_USER, pf.BASIC_PASSWORD))
    assert requests.get(f"{srv.url}/api/v1/query", params={"query": "1"}, timeout=5).status_code == 401
    series = [{"id": "train/vc6YE", **K8S}]
    auth = {"basic_auth": {"username": pf.BASIC_USER, "password_env": "PROM_PW"}}
    end = (T0 + pd.Timedelta(hours=6)).isoformat()
    [ok] = ingest(cfg_for(srv.url, series, tmp_path / "s1", **auth), start=T0.isoformat(), end=end,
                  env={"PROM_PW": pf.BASIC_PASSWORD})
    assert ok.status == "ok" and ok.new_points == 73
    wrong = "not-the-password"
    [bad] = ingest(cfg_for(srv.url, series, tmp_path / "s2", **auth), start=T0.isoformat(), end=end,
                   env={"PROM_PW": wrong})
    assert bad.status == "failed" and bad.exit_code == 2 and "HTTP 401" in bad.error
    assert f"basic auth as '{pf.BASIC_USER}'" in bad.error and "PROM_PW" in bad.error
    assert wrong not in bad.error and pf.BASIC_PASSWORD not in bad.error
    assert not (tmp_path / "s2").exists()


def test_tls_verified_by_default(prom_factory, tmp_path):
    cert, key = pf.self_signed_cert(tmp_path)
    srv = prom_factory(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n", tls_ca=str(cert))
    assert srv.url.startswith("https://")
    series = [{"id": "train/vc6YE", **K8S}]
    end = (T0 + pd.Timedelta(hours=1)).isoformat()
    [bad] = ingest(cfg_for(srv.url, series, tmp_path / "s1"), start=T0.isoformat(), end=end)
    assert bad.status == "failed" and bad.exit_code == 2 and "TLS verification failed" in bad.error
    [ok] = ingest(cfg_for(srv.url, series, tmp_path / "s2", ca_file=str(cert)), start=T0.isoformat(), end=end)
    assert ok.status == "ok" and ok.new_points == 13


def test_server_stopped_mid_pull_leaves_store_unchanged(prom_factory, prom_data, tmp_path):
    srv = prom_factory()
    store = tmp_path / "store"
    series = [{"id": "train/vc6YE", "step": "1m", **K8S}]
    cfg = cfg_for(srv.url, series, store)
    [first] = ingest(cfg, start=T0.isoformat(), end=(T0 + pd.Timedelta(days=2)).isoformat())
    assert first.status == "ok"
    before = snapshot(store)

    def stop_after_first_chunk(sid, i, n, pts):
        if i == 1:
            srv.stop()

    [r] = ingest(cfg, start=T0.isoformat(), end=T_END.isoformat(), on_chunk=stop_after_first_chunk)
    assert r.status == "failed" and r.exit_code == 1
    assert "train/vc6YE" in r.error and "cannot connect" in r.error and "2 attempt" in r.error
    assert snapshot(store) == before
    frame, _, _ = Store(store).read_series("train/vc6YE")
    assert len(frame) == 2 * 1440 + 1


def test_retries_on_5xx_then_succeeds(prom, tmp_path):
    hits = {"n": 0}

    def flaky(headers):
        hits["n"] += 1
        return (503, b'{"status":"error","errorType":"unavailable","error":"overloaded"}') if hits["n"] <= 2 else None

    url, stop = pf.start_proxy(prom.url, flaky)
    try:
        series = [{"id": "train/vc6YE", **K8S}]
        [r] = ingest(cfg_for(url, series, tmp_path / "s", retries=3), start=T0.isoformat(),
                     end=(T0 + pd.Timedelta(hours=1)).isoformat())
        assert r.status == "ok" and r.new_points == 13 and hits["n"] == 3
        hits["n"] = -100  # always fail now: the error names the status and Prometheus' text
        [r] = ingest(cfg_for(url, series, tmp_path / "s2", retries=1), start=T0.isoformat(),
                     end=(T0 + pd.Timedelta(hours=1)).isoformat())
        assert r.status == "failed" and r.exit_code == 1 and "HTTP 503" in r.error and "overloaded" in r.error
    finally:
        stop()


@pytest.mark.slow
def test_plan_from_store_after_ingest(prom, tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({
        "prometheus": {"url": prom.url}, "store": "store",
        "series": [{"id": "train/vc6YE", "kind": "training", "unit": "gpu", "gpu_model": "V100-32GB", **K8S}],
        "plan": {"n_calls": 6, "tune_days": 3, "eval_days": 3},
        "forecast": {"lstm_epochs": 1, "lstm_max_windows": 200, "prophet_samples": 50}}))
    start = (T_END - pd.Timedelta(days=22)).isoformat()
    code, _, err = run_cli(["ingest", "--config", str(cfg), "--start", start, "--end", T_END.isoformat(), "-q"], capsys)
    assert code == 0, err
    out = tmp_path / "out"
    code, stdout, err = run_cli(["plan", "--config", str(cfg), "--out", str(out), "--format", "json", "-q"], capsys)
    assert code == 0, err
    report = json.loads(stdout)
    assert report["run"]["source"] == "store" and list(report["series"]) == ["train/vc6YE"]
    assert (out / "policy.yaml").is_file() and (out / "report.json").is_file()
    hist = pd.read_parquet(out / "history.parquet")
    assert hist["timestamp"].min() == pd.Timestamp(start).ceil("5min")  # the first step-grid point
