"""A real Prometheus server for tests and benchmarks, loaded with real history.

* History comes from the Helios traces in ``../shared/data/helios/`` (see its
  README): one team's running and pending GPUs per minute, May 2020. It is
  written as kube-state-metrics series (``kube_pod_container_resource_requests``
  and ``kube_pod_status_phase``; pods are renamed every UTC day, as restarts
  do) and, for two days, as dcgm-exporter series (``DCGM_FI_DEV_GPU_UTIL``,
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``DCGM_FI_DEV_FB_USED``,
  ``DCGM_FI_DEV_POWER_USAGE``) with the labels dcgm-exporter sets (``gpu``,
  ``UUID``, ``device``, ``modelName``, ``Hostname``, ``namespace``, ``pod``,
  ``container``; MIG instances add ``GPU_I_ID`` and ``GPU_I_PROFILE`` and emit
  no GPU_UTIL).
* The OpenMetrics text is turned into TSDB blocks with
  ``promtool tsdb create-blocks-from openmetrics`` and served by
  ``prometheus`` on 127.0.0.1, on a free port, from a temporary folder, with
  ``--storage.tsdb.retention.time=100y`` so the 2020 blocks are not deleted.
* ``prometheus``/``promtool`` come from the Debian package ``prometheus``.
  When missing, tests are skipped locally but FAIL under ``CI=true``.
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import requests

from tests.ci import unavailable

REPO = Path(__file__).resolve().parents[1]
# the shared traces beside the checkout when present, else the copy shipped with the tests
_SHARED = REPO.parent / "shared" / "data"
DATA = Path(os.environ.get("CAPPLAN_SHARED_DATA",
                           _SHARED if (_SHARED / "helios").is_dir() else REPO / "tests" / "data"))
HELIOS = DATA / "helios"

K8S_VC = "vc6YE"
NAMESPACE = "helios-vc6ye"
DCGM_DAYS = 2
HOST = "dgx-a100-01"
MODEL = "NVIDIA A100-SXM4-80GB"
MIG_PROFILE = "3g.40gb"

# Basic auth: the password and its bcrypt hash (cost 4) for Prometheus' web config.
BASIC_USER = "capplan"
BASIC_PASSWORD = "s3cret-basic"
BASIC_HASH = "$2b$04$uva/CYKTIY7SZT.Hh7yZd.eJKWzAfgWL7g0wbCoWqKXbZSuV/YgGG"
BEARER_TOKEN = "t0ken-for-tests-only"


def require_prometheus() -> tuple[str, str]:
    """Paths of ``prometheus`` and ``promtool``; skip (locally) or fail (``CI=true``) when absent."""
    prom, tool = shutil.which("prometheus"), shutil.which("promtool")
    if prom and tool:
        return prom, tool
    unavailable("prometheus/promtool not found: install the Debian package `prometheus`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- data ---------------------------------------------------------------------------
def helios(vc: str = K8S_VC) -> pd.DataFrame:
    """One VC's minutes: columns timestamp (UTC), running, pending, quota, util (0-1).

    Helios times are local to a cluster in China (Asia/Shanghai).
    """
    f = pd.read_csv(HELIOS / f"{vc}_cluster_sequence_vc.csv.gz",
                    usecols=["time", "running_gpu_num", "pending_gpu_num", "total_gpu_num", "gpu_utilization"])
    ts = pd.to_datetime(f["time"]).dt.tz_localize("Asia/Shanghai").dt.tz_convert("UTC")
    return pd.DataFrame({"timestamp": ts.astype("datetime64[ns, UTC]"), "running": f["running_gpu_num"].astype(float),
                         "pending": f["pending_gpu_num"].astype(float), "quota": f["total_gpu_num"].astype(float),
                         "util": f["gpu_utilization"].astype(float)})


def dcgm_values(h: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-GPU DCGM values derived from the VC's utilisation (deterministic).

    Keys: ``util{g}`` (percent, GPUs 0-2), ``prof{g}`` (ratio, GPUs 0-2, not
    equal to util/100 so a test can tell which one was used), ``mig{i}``
    (ratio, MIG instances 1-2 on GPU 3), ``fb{g}`` (MiB), ``power{g}`` (W).
    """
    u = np.clip(h["util"].to_numpy(), 0, 1)
    minute = np.arange(len(u))
    out = {}
    for g in range(3):
        out[f"util{g}"] = np.clip(np.round(100 * u * (0.85 + 0.05 * g) + 3 * np.sin(minute / (30 + g))), 0, 100)
        out[f"prof{g}"] = np.round(out[f"util{g}"] / 100 * 0.9, 4)
    for i in (1, 2):
        out[f"mig{i}"] = np.round(np.clip(0.2 * i + 0.5 * u * np.cos(minute / (45 * i)) ** 2, 0, 1), 4)
    for g in range(4):
        out[f"fb{g}"] = np.round(20000 + 40000 * u * (g + 1) / 4)
        out[f"power{g}"] = np.round(90 + 300 * u * (0.9 + 0.03 * g), 1)
    return out


def _fmt_labels(d: dict) -> str:
    return ",".join(f'{k}="{v}"' for k, v in d.items())


def write_openmetrics(path: Path, h: pd.DataFrame, namespace: str = NAMESPACE, vc: str = K8S_VC,
                      dcgm_days: int = DCGM_DAYS) -> None:
    """Write kube-state-metrics (all of ``h``) and DCGM (first ``dcgm_days`` days) series as OpenMetrics."""
    ts = (h["timestamp"].astype("int64") // 10**9).to_numpy()
    day = ((ts - ts[0]) // 86400).astype(int)
    run, pend = h["running"].to_numpy(), h["pending"].to_numpy()
    lines: list[str] = []
    # kube-state-metrics: a training pod holds the running GPUs, a queued pod asks for the pending ones;
    # both are replaced by new pods every day; an old pod lingers 10 min as Succeeded (phase filter drops it).
    req: list[str] = []
    phase: list[str] = []
    for d in np.unique(day):
        idx = np.flatnonzero(day == d)
        tail = np.arange(idx[-1] + 1, min(idx[-1] + 11, len(ts)))
        for kind, vals, ph in (("train", run, "Running"), ("queue", pend, "Pending")):
            pod = f"{vc.lower()}-{kind}-{d:02d}"
            base = {"namespace": namespace, "pod": pod, "uid": f"uid-{vc.lower()}-{kind}-{d:02d}",
                    "container": "worker", "node": HOST if kind == "train" else ""}
            rl = _fmt_labels({**base, "resource": "nvidia_com_gpu", "unit": "integer"})
            last = vals[idx[-1]]
            req += [f"kube_pod_container_resource_requests{{{rl}}} {vals[i]:g} {ts[i]}" for i in idx]
            req += [f"kube_pod_container_resource_requests{{{rl}}} {last:g} {ts[i]}" for i in tail]
            pl = {"namespace": namespace, "pod": pod, "uid": base["uid"]}
            for p in ("Pending", "Running", "Succeeded"):
                lab = _fmt_labels({**pl, "phase": p})
                on = 1 if p == ph else 0
                phase += [f"kube_pod_status_phase{{{lab}}} {on} {ts[i]}" for i in idx]
                phase += [f"kube_pod_status_phase{{{lab}}} {1 if p == 'Succeeded' else 0} {ts[i]}" for i in tail]
    lines.append("# TYPE kube_pod_container_resource_requests gauge")
    lines += req
    lines.append("# TYPE kube_pod_status_phase gauge")
    lines += phase
    # dcgm-exporter: GPUs 0-2 whole, GPU 3 split into two MIG instances (PROF_GR_ENGINE_ACTIVE only).
    n = int(np.searchsorted(day, dcgm_days))
    v = dcgm_values(h.iloc[:n])
    gl = {}
    for g in range(4):
        gl[g] = {"gpu": str(g), "UUID": f"GPU-5fd4a2c3-0000-4000-8000-00000000000{g}", "device": f"nvidia{g}",
                 "modelName": MODEL, "Hostname": HOST, "DCGM_FI_DRIVER_VERSION": "535.104.12",
                 "container": "worker", "namespace": namespace}
    # one long-lived pod on GPUs 0-2: backfilled blocks carry no staleness markers, so a label change here
    # would show both series for the 5-minute lookback (a live Prometheus marks the old one stale at once)
    pod_of = lambda i: f"{vc.lower()}-train-00"  # noqa: E731
    fams = {"DCGM_FI_DEV_GPU_UTIL": [], "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [], "DCGM_FI_DEV_FB_USED": [],
            "DCGM_FI_DEV_POWER_USAGE": []}
    for g in range(3):
        for i in range(n):
            lab = _fmt_labels({**gl[g], "pod": pod_of(i)})
            fams["DCGM_FI_DEV_GPU_UTIL"].append(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} {v[f'util{g}'][i]:g} {ts[i]}")
            fams["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append(
                f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{lab}}} {v[f'prof{g}'][i]:g} {ts[i]}")
    for mi in (1, 2):
        lab = _fmt_labels({**gl[3], "pod": f"infer-{mi - 1}", "GPU_I_ID": str(mi), "GPU_I_PROFILE": MIG_PROFILE})
        fams["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] += [
            f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{lab}}} {v[f'mig{mi}'][i]:g} {ts[i]}" for i in range(n)]
    for g in range(4):
        lab = _fmt_labels({**gl[g], "pod": "infer-0" if g == 3 else f"{vc.lower()}-train-00"})
        fams["DCGM_FI_DEV_FB_USED"] += [f"DCGM_FI_DEV_FB_USED{{{lab}}} {v[f'fb{g}'][i]:g} {ts[i]}" for i in range(n)]
        fams["DCGM_FI_DEV_POWER_USAGE"] += [
            f"DCGM_FI_DEV_POWER_USAGE{{{lab}}} {v[f'power{g}'][i]:g} {ts[i]}" for i in range(n)]
    for name, fl in fams.items():
        lines.append(f"# TYPE {name} gauge")
        lines += fl
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")


def create_blocks(promtool: str, om_file: Path, data_dir: Path, max_block: str = "744h") -> None:
    """``promtool tsdb create-blocks-from openmetrics`` into ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", f"--max-block-duration={max_block}",
                        str(om_file), str(data_dir)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"promtool failed: {r.stderr[-2000:]}")


# -- servers ---------------------------------------------------------------------------
@dataclass
class PromServer:
    """A running Prometheus (``url``); ``stop()`` ends it."""

    proc: subprocess.Popen
    url: str
    workdir: Path
    log: Path
    extra: list = field(default_factory=list)

    def stop(self) -> None:
        for x in self.extra:
            x()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_prometheus(prom: str, data_dir: Path, workdir: Path, web_config: str | None = None,
                     ready_auth: tuple | None = None, timeout: float = 30, tls_ca: str | None = None) -> PromServer:
    """Start ``prometheus`` on 127.0.0.1:<free port> serving ``data_dir`` and wait until ready.

    ``web_config``: content of ``--web.config.file`` (basic auth, TLS); ``ready_auth``
    and ``tls_ca`` are what the readiness probe needs to get through it.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = free_port()
    args = [prom, f"--config.file={cfg}", f"--storage.tsdb.path={data_dir}", "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    if web_config:
        wc = workdir / "web.yml"
        wc.write_text(web_config)
        args.append(f"--web.config.file={wc}")
    log = workdir / "prometheus.log"
    proc = subprocess.Popen(args, stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=workdir)
    url = f"{'https' if tls_ca else 'http'}://127.0.0.1:{port}"
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            if requests.get(f"{url}/-/ready", timeout=1, auth=ready_auth, verify=tls_ca or True).status_code == 200:
                return PromServer(proc, url, workdir, log)
        except requests.RequestException:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"prometheus not ready after {timeout} s: {log.read_text()[-2000:]}")


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (``openssl``): (cert.pem, key.pem); it is its own CA."""
    if not shutil.which("openssl"):
        unavailable("openssl not found (Debian package `openssl`)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def basic_auth_web_config(user: str = BASIC_USER, hash_: str = BASIC_HASH) -> str:
    """Prometheus ``--web.config.file`` content enabling basic auth for ``user``."""
    return f"basic_auth_users:\n  {user}: {hash_}\n"


def start_proxy(upstream: str, intercept) -> tuple[str, callable]:
    """A forwarding HTTP proxy on 127.0.0.1 in front of ``upstream`` (GET only).

    ``intercept(headers)`` returns ``(status, body)`` to answer a request itself,
    or None to forward it. Returns (url, stop).
    """

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            answer = intercept(self.headers)
            if answer is None:
                r = requests.get(upstream + self.path, timeout=30)
                answer = (r.status_code, r.content)
            code, body = answer
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def stop():
        srv.shutdown()
        srv.server_close()

    return f"http://127.0.0.1:{srv.server_address[1]}", stop


def start_bearer_proxy(upstream: str, token: str) -> tuple[str, callable]:
    """An auth proxy on 127.0.0.1 that requires ``Authorization: Bearer <token>`` and forwards GETs.

    Prometheus' web config knows only basic auth; bearer tokens are checked in
    front of it (as kube-rbac-proxy or oauth2-proxy do). Returns (url, stop).
    """
    refused = (401, b'{"status":"error","errorType":"unauthorized","error":"invalid or missing bearer token"}')
    return start_proxy(upstream, lambda h: None if h.get("Authorization") == f"Bearer {token}" else refused)


# -- pytest fixtures ---------------------------------------------------------------------
@dataclass
class PromData:
    """The backfilled TSDB (``data_dir``) and the source it was built from (``helios``)."""

    data_dir: Path
    helios: pd.DataFrame
    prometheus: str
    promtool: str

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.data_dir, dest)
        return dest


@pytest.fixture(scope="session")
def prom_data(tmp_path_factory) -> PromData:
    """TSDB blocks built once per session from the Helios trace (see the module docstring)."""
    prom, tool = require_prometheus()
    root = tmp_path_factory.mktemp("promdata")
    h = helios()
    om = root / "history.om"
    write_openmetrics(om, h)
    create_blocks(tool, om, root / "tsdb")
    om.unlink()
    return PromData(root / "tsdb", h, prom, tool)


@pytest.fixture(scope="session")
def prom(prom_data, tmp_path_factory):
    """A real Prometheus (no auth) serving :func:`prom_data` for the whole session."""
    srv = start_prometheus(prom_data.prometheus, prom_data.data_dir, tmp_path_factory.mktemp("prom"))
    yield srv
    srv.stop()


@pytest.fixture
def prom_factory(prom_data, tmp_path):
    """Start extra servers on copies of the data: ``prom_factory(web_config=None, ready_auth=None, tls_ca=None)``."""
    servers = []

    def make(web_config: str | None = None, ready_auth: tuple | None = None, tls_ca: str | None = None) -> PromServer:
        i = len(servers)
        d = prom_data.copy(tmp_path / f"tsdb{i}")
        srv = start_prometheus(prom_data.prometheus, d, tmp_path / f"prom{i}", web_config, ready_auth, tls_ca=tls_ca)
        servers.append(srv)
        return srv

    yield make
    for s in servers:
        s.stop()


