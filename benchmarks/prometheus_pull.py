"""Benchmark: capplan's Prometheus pull vs a plain HTTP query_range of the same data.

Loads 30 days of 5-minute data for 20 series (the running and pending GPUs of
the Helios teams in ../shared/data/helios, May 2020, as kube-state-metrics
``kube_pod_container_resource_requests``) into a real Prometheus (promtool
backfill, 127.0.0.1, free port, temporary folder), then pulls every series:

* plain: ``requests.get(/api/v1/query_range)`` + ``.json()``, nothing else, sending
  the same PromQL capplan sends (:meth:`SeriesConfig.pull_query`: per-step peak,
  stale samples missing), so both sides ask Prometheus for the same work;
* capplan pull: :func:`capplan.sources.prometheus.pull` (prometheus-api-client,
  tenacity, string -> float64 parsing, UTC timestamps, history frame);
* capplan ingest: :func:`capplan.sources.prometheus.ingest` (the above plus the
  atomic per-series Parquet write into a store).

Prints samples per second for each (best of ``--repeat`` rounds) and the ratio
to plain HTTP; the target is a ratio of at least 0.5.

Usage: ``python -m benchmarks prometheus [--repeat 5]`` (needs the
Debian package ``prometheus``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd
import requests

from benchmarks import common
from capplan.config.prometheus import PrometheusConfig
from capplan.config.settings import CapplanConfig, SeriesConfig
from capplan.prometheus.client import PrometheusClient
from capplan.sources.prometheus import ingest, pull
from capplan.store.local import Store
from tests import prom_fixture as pf

DAYS, STEP_S, N_SERIES = 30, 300, 20


def build(root: Path) -> tuple[list[tuple[str, str]], int, int]:
    """Write the OpenMetrics file and TSDB blocks; return [(series_id, query)], start, end."""
    vcs = sorted(p.name.split("_")[0] for p in pf.HELIOS.glob("*_cluster_sequence_vc.csv.gz"))
    lines = ["# TYPE kube_pod_container_resource_requests gauge"]
    series = []
    for vc in vcs:
        h = pf.helios(vc)
        h = h[h["timestamp"].dt.minute % 5 == 0].iloc[: DAYS * 288]
        ts = (h["timestamp"].astype("int64") // 10**9).to_numpy()
        for kind in ("running", "pending"):
            if len(series) == N_SERIES:
                break
            ns, pod = f"helios-{vc.lower()}", f"{vc.lower()}-{kind}"
            lab = f'namespace="{ns}",pod="{pod}",container="worker",resource="nvidia_com_gpu",unit="integer"'
            vals = h[kind].to_numpy()
            lines += [f"kube_pod_container_resource_requests{{{lab}}} {v:g} {t}" for v, t in zip(vals, ts)]
            series.append((f"bench/{vc}-{kind}", f'sum(kube_pod_container_resource_requests{{namespace="{ns}", '
                                                 f'pod="{pod}"}})'))
    lines.append("# EOF")
    om = root / "bench.om"
    om.write_text("\n".join(lines) + "\n")
    pf.create_blocks("promtool", om, root / "tsdb")
    start = int(pd.Timestamp("2020-04-30T16:00:00Z").value // 10**9)
    return series, start, start + (DAYS * 288 - 1) * STEP_S


def plain(url: str, series, start: int, end: int) -> int:
    n = 0
    with requests.Session() as s:
        for sid, q in series:
            sent = SeriesConfig(id=sid, query=q, step=f"{STEP_S}s").pull_query(PrometheusConfig(url=url))
            r = s.get(f"{url}/api/v1/query_range", params={"query": sent, "start": start, "end": end, "step": STEP_S},
                      timeout=60)
            r.raise_for_status()
            n += sum(len(x["values"]) for x in r.json()["data"]["result"])
    return n


def capplan_pull(url: str, series, start: int, end: int) -> int:
    client = PrometheusClient(PrometheusConfig(url=url))
    try:
        return sum(len(pull(client, SeriesConfig(id=sid, query=q, step=f"{STEP_S}s"), start, end)[0])
                   for sid, q in series)
    finally:
        client.close()


def capplan_ingest(url: str, series, start: int, end: int, store_root: Path) -> int:
    cfg = CapplanConfig.model_validate({"prometheus": {"url": url}, "store": str(store_root),
                                        "series": [{"id": sid, "query": q, "step": f"{STEP_S}s"} for sid, q in series]})
    res = ingest(cfg, Store(store_root), start=pd.Timestamp(start, unit="s", tz="UTC").isoformat(),
                 end=pd.Timestamp(end, unit="s", tz="UTC").isoformat())
    bad = [r for r in res if r.status != "ok"]
    if bad:
        raise SystemExit(f"ingest failed: {bad[0].error}")
    return sum(r.new_points for r in res)


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "prometheus")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        raise SystemExit("needs prometheus and promtool (Debian package `prometheus`)")
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        t = time.perf_counter()
        series, start, end = build(root)
        srv = pf.start_prometheus("prometheus", root / "tsdb", root / "prom")
        print(f"setup: {len(series)} series x {DAYS} days at {STEP_S // 60}-minute steps "
              f"({time.perf_counter() - t:.1f} s); Prometheus {srv.url}")
        try:
            expected = len(series) * DAYS * 288
            plain(srv.url, series, start, end)  # warm the server's caches for everyone alike
            best: dict[str, float] = {}
            for i in range(args.repeat):
                for name, fn in (("plain HTTP query_range", lambda: plain(srv.url, series, start, end)),
                                 ("capplan pull", lambda: capplan_pull(srv.url, series, start, end)),
                                 ("capplan ingest (+store)",
                                  lambda: capplan_ingest(srv.url, series, start, end, root / f"store{i}"))):
                    t0 = time.perf_counter()
                    n = fn()
                    dt = time.perf_counter() - t0
                    if n != expected:
                        raise SystemExit(f"{name}: {n} samples, expected {expected}")
                    best[name] = max(best.get(name, 0.0), n / dt)
        finally:
            srv.stop()
    base = best["plain HTTP query_range"]
    print(f"{'method':<26}{'samples/s':>14}{'ratio':>8}")
    for name, sps in best.items():
        print(f"{name:<26}{sps:>14,.0f}{sps / base:>8.2f}")
    r = best["capplan pull"] / base
    print(f"capplan pull / plain HTTP = {r:.2f} (target >= 0.50: {'met' if r >= 0.5 else 'NOT met'})")

