"""The lookahead family's exported PromQL computes what the replay replays, on a real Prometheus.

:func:`optimizer.inference.lookahead.promql` is what the KEDA trigger (and the prometheus-adapter rule)
asks a cluster's Prometheus for; :func:`optimizer.inference.lookahead.lookahead_target` is what the replay,
the search and every reported figure use. Here both see the same real demand: five hours of one
Helios team's running GPUs per minute, scaled to percent, written as dcgm-exporter's
``DCGM_FI_DEV_GPU_UTIL`` of two GPUs scraped every 15 s, with short bursts between the 1-minute
steps (a 15-s sample above the minute's level every few minutes), backfilled with ``promtool`` and
served by a real ``prometheus`` on 127.0.0.1. The replay's demand at a step is the peak of the
summed utilisation over ``(t - step, t]`` (what a pull stores, ``capplan.promql.steps``). At every
tested instant the query must equal the replay's target.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import requests

from optimizer.book.prices import GpuPrice
from optimizer.engine.replay_core import ReplayInput
from optimizer.inference.lookahead import cold_steps, lead_steps, lookahead_target, observed_lag_steps, promql
from optimizer.plan.policy import InferenceParams
from tests.prom_fixture import create_blocks, helios, require_prometheus, start_prometheus
from tests.vm_fixture import require_victoria_metrics, start_vm

STEP = 60
SCRAPE = 15
MINUTES = 300
START = 600  # minutes into the trace: a stretch where the team's demand moves
SERIES = 'sum(DCGM_FI_DEV_GPU_UTIL{namespace="infer"})'


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(url, per-minute peak of the summed utilisation, step timestamps in epoch seconds) of a real Prometheus."""
    prom, tool = require_prometheus()
    root = tmp_path_factory.mktemp("lookahead-promql")
    h = helios().iloc[START:START + MINUTES].reset_index(drop=True)
    ts = (h["timestamp"].astype("int64") // 10**9).to_numpy()
    assert (np.diff(ts) == STEP).all() and ts[0] % STEP == 0  # PromQL subqueries align to multiples of the step
    run = h["running"].to_numpy()
    per_gpu = [np.clip(np.round(run * (0.45 + 0.05 * g)), 0, 100) for g in range(2)]  # percent, the trace's variation
    # 15-s scrapes inside each minute (t - 45 .. t); every 7th minute one GPU bursts 10-25 points for one scrape
    # between two steps (t - 30), which a query reading the sum only at step boundaries would never see
    sub = np.arange(-(STEP - SCRAPE), 1, SCRAPE)
    bursts = np.zeros((len(ts), len(sub)))
    bursts[::7, 1] = 10 + 15 * (np.arange(len(ts))[::7] % 2)
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for g, v in enumerate(per_gpu):
        lab = f'gpu="{g}",modelName="NVIDIA A10G",namespace="infer",pod="model-server-7d9f-{g}"'
        vals = np.minimum(v[:, None] + (bursts if g == 0 else np.zeros_like(bursts)), 100)
        lines += [f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} {vals[i, k]:g} {t + o}"
                  for i, t in enumerate(ts) for k, o in enumerate(sub)]
    peak = (np.minimum(per_gpu[0][:, None] + bursts, 100) + per_gpu[1][:, None]).max(axis=1)  # (t - step, t]
    assert (peak > per_gpu[0] + per_gpu[1]).sum() > 10  # the bursts lie between steps
    lines.append("# EOF")
    om = root / "dcgm.om"
    om.write_text("\n".join(lines) + "\n")
    create_blocks(tool, om, root / "tsdb")
    srv = start_prometheus(prom, root / "tsdb", root / "prom")
    # the 7-day error window at the 15-s scrape resolution holds ~40,000 points of one inner series: above
    # VictoriaMetrics' default -search.maxPointsPerTimeseries (30,000), so a VictoriaMetrics serving KEDA needs it
    # raised (docs/prometheus.md)
    vm = start_vm(require_victoria_metrics(), root / "vm", extra=("-search.maxPointsPerTimeseries=100000",))
    try:  # the same samples in VictoriaMetrics (its import takes millisecond timestamps)
        vm.load("\n".join(f"{ln.rsplit(' ', 1)[0]} {int(ln.rsplit(' ', 1)[1]) * 1000}"
                          for ln in lines if not ln.startswith("#")).encode() + b"\n")
        yield {"prometheus": srv.url, "victoriametrics": vm.url}, peak, ts
    finally:
        srv.stop()
        vm.stop()


@pytest.mark.parametrize("engine", ["prometheus", "victoriametrics"])
@pytest.mark.parametrize("level_window_s,quantile", [(0, 0.85), (900, 0.9), (1800, 0.7)])
def test_promql_equals_replay_target(served, level_window_s, quantile, engine):
    """The same exported query gives the replay's target on both engines (closed and left-open ranges)."""
    urls, demand, ts = served
    url = urls[engine]
    cold_s, lag_s = 90, 60
    g, d = observed_lag_steps(STEP, lag_s), cold_steps(STEP, cold_s)
    p = InferenceParams(target_utilization=0.95, family="lookahead", level_window_s=level_window_s,
                        headroom_quantile=quantile,
                        data_step_s=STEP, lookahead_lead_s=lead_steps(STEP, cold_s, lag_s) * STEP,
                        lookahead_cover_s=(d + 1) * STEP)
    inp = ReplayInput(times=pd.to_datetime(ts, unit="s", utc=True), demand=demand.astype(float), step_s=STEP,
                      price=GpuPrice(on_demand=1.0, spot=0.5, reserved=0.6))
    target = lookahead_target(inp, p, cold_s, lag_s)  # step i holds the value computed at step i - g
    query = promql(SERIES, p, SCRAPE)
    checked = 0
    for j in range(10, MINUTES - g, 23):
        r = requests.get(f"{url}/api/v1/query", params={"query": query, "time": int(ts[j])}, timeout=10)
        r.raise_for_status()
        result = r.json()["data"]["result"]
        assert len(result) == 1, (j, result)
        got = float(result[0]["value"][1])
        assert got == pytest.approx(target[j + g], rel=1e-9, abs=1e-9), (j, query)
        checked += 1
    assert checked >= 10
    # the margin matters here: a query without it would not pass
    assert np.nanmax(target - pd.Series(demand).rolling(max(1, level_window_s // STEP), min_periods=1)
                     .mean().shift(g).to_numpy()) >= 1
