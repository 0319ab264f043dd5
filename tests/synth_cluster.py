"""A deterministic synthetic GPU cluster, its exporters' series and its true demand.

Two nodes of 8 GPUs (``node-1``, ``node-2``) and one GPU split into seven
``1g.10gb`` MIG instances (``node-mig``), scraped every minute for two days:

* **team-a** submits jobs to the Volcano queue ``q-a`` (quota 8 GPUs); a job
  waits in the queue with no pod until the quota has room (Volcano creates
  pods once the PodGroup is Inqueue), then its pod is Pending for a minute
  (no ``node`` label) and Running once scheduled (``node`` label added: a new
  request series).
* **team-b** submits to the Kueue ClusterQueue ``cq-b`` / LocalQueue ``lq-b``
  (quota 8 GPUs); a suspended Job has no pod until its Workload is admitted.
* **team-c** runs inference pods on MIG instances (``nvidia.com/mig-1g.10gb``).
* Some pods restart (recreated under the same name, new ``uid``, Pending for
  a minute); a finished pod lingers a minute as Succeeded.
* Faults: two kube-state-metrics replicas (``instance`` ksm-0 and ksm-1) from
  10:00 to 12:00 of day 1; a kube-state-metrics outage 16:00-18:00 of day 1; a
  dcgm-exporter label-set flap (node-2's GPUs also under a second
  ``Hostname``) 08:00-09:00 of day 1; a 2-minute 4-GPU burst at 14:06-14:07 of
  day 1, between two 5-minute steps; no arrivals from 22:00 of day 1 to 07:00
  of day 2 (an idle night).

:func:`generate` returns the series (for ``promtool`` as OpenMetrics and for
VictoriaMetrics' ``/api/v1/import/prometheus``) and the ground truth per
minute; :func:`truth_per_step` turns it into the per-step peaks a pull must
store (``(t - step, t]``, missing where the exporter sent nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

START = pd.Timestamp("2024-06-03T00:00:00Z")
DAYS = 2
NODES = {"node-1": 8, "node-2": 8}
QUOTA = {"team-a": 8, "team-b": 8}
MIG_SLICES = 7
MIG_PROFILE = "1g.10gb"
MODEL = "NVIDIA H100 80GB HBM3"
KSM_REPLICAS = (START + pd.Timedelta("10h"), START + pd.Timedelta("12h"))
KSM_OUTAGE = (START + pd.Timedelta("16h"), START + pd.Timedelta("18h"))
DCGM_FLAP = (START + pd.Timedelta("8h"), START + pd.Timedelta("9h"))
BURST = (START + pd.Timedelta("14h6m"), START + pd.Timedelta("14h8m"))
QUIET = (START + pd.Timedelta("22h"), START + pd.Timedelta("31h"))
TRUTH_COLUMNS = ["team-a", "team-b", "team-c", "cluster", "q-a_allocated", "q-a_pending", "cq-b_admitted",
                 "cq-b_pending", "lq-b_admitted", "busy"]


@dataclass
class Job:
    name: str
    ns: str
    gpus: int
    arrive: int
    duration: int
    util: float
    admitted: int | None = None
    ran: int = 0
    uid_n: int = 0
    node: str | None = None
    devices: list = field(default_factory=list)
    pending_since: int | None = None
    done: int | None = None


@dataclass
class Cluster:
    """``series``: {(metric, ((label, value), ...)): [(epoch_s, value), ...]};
    ``truth``: per-minute ground truth (columns :data:`TRUTH_COLUMNS`, NaN where the
    exporter behind the column sent nothing)."""

    series: dict
    truth: pd.DataFrame

    def write_openmetrics(self, path: Path) -> None:
        """OpenMetrics text (timestamps in seconds) for ``promtool tsdb create-blocks-from openmetrics``."""
        by_name: dict[str, list[str]] = {}
        for (name, labels), pts in self.series.items():
            lab = ",".join(f'{k}="{v}"' for k, v in labels)
            by_name.setdefault(name, []).extend(f"{name}{{{lab}}} {v:g} {t}" for t, v in pts)
        lines = []
        for name, ls in by_name.items():
            lines.append(f"# TYPE {name} gauge")
            lines += ls
        lines.append("# EOF")
        path.write_text("\n".join(lines) + "\n")

    def prometheus_text(self) -> bytes:
        """Prometheus exposition lines with millisecond timestamps (VictoriaMetrics' import format)."""
        out = []
        for (name, labels), pts in self.series.items():
            lab = ",".join(f'{k}="{v}"' for k, v in labels)
            out += [f"{name}{{{lab}}} {v:g} {t * 1000}" for t, v in pts]
        return ("\n".join(out) + "\n").encode()


def _in(t: pd.Timestamp, span) -> bool:
    return span[0] <= t < span[1]


def generate(seed: int = 7) -> Cluster:  # noqa: C901 (one simulation loop, read top to bottom)
    """Simulate :data:`DAYS` days minute by minute (see the module docstring)."""
    rng = np.random.default_rng(seed)
    minutes = DAYS * 1440
    jobs: list[Job] = []
    n = 0
    for m in range(minutes):
        t = START + pd.Timedelta(minutes=m)
        if _in(t, QUIET):
            continue
        for ns, rate in (("team-a", 1 / 25), ("team-b", 1 / 30), ("team-c", 1 / 60)):
            if rng.random() < rate:
                n += 1
                gpus = int(rng.choice([1, 1, 2, 4, 8])) if ns != "team-c" else int(rng.integers(1, 4))
                dur = int(rng.integers(10, 80)) if ns != "team-c" else int(rng.integers(30, 120))
                jobs.append(Job(f"{ns}-job-{n:03d}", ns, gpus, m, dur, float(rng.choice([35, 50, 80, 100]))))
    free = {node: list(range(k)) for node, k in NODES.items()}
    mig_free = list(range(1, MIG_SLICES + 1))
    series: dict = {}
    truth = np.full((minutes, len(TRUTH_COLUMNS)), np.nan)

    def emit(name, labels, ts, v):
        series.setdefault((name, tuple(labels.items())), []).append((ts, float(v)))

    for m in range(minutes):
        t = START + pd.Timedelta(minutes=m)
        ts = int(t.value // 10**9)
        # 1. running jobs progress; finished ones release their devices and linger one minute as Succeeded
        for j in jobs:
            if j.done is None and j.node and j.pending_since is None:
                j.ran += 1
                if j.ran >= j.duration:
                    j.done = m
                    if j.ns == "team-c":
                        mig_free += j.devices
                    else:
                        free[j.node] += j.devices
                    j.devices = []
        # 2. admission (FIFO per queue, quota); team-c pods are created at once
        for ns in ("team-a", "team-b"):
            used = sum(j.gpus for j in jobs if j.ns == ns and j.admitted is not None and j.done is None)
            for j in jobs:
                if j.ns == ns and j.admitted is None and j.arrive <= m:
                    if used + j.gpus > QUOTA[ns]:
                        break
                    j.admitted, j.pending_since = m, m
                    used += j.gpus
        for j in jobs:
            if j.ns == "team-c" and j.admitted is None and j.arrive <= m:
                j.admitted, j.pending_since = m, m
        # 3. restarts: a running pod is recreated (new uid), Pending for a minute
        for j in jobs:
            if j.done is None and j.node and j.pending_since is None and j.ran > 3 and rng.random() < 0.01:
                if j.ns == "team-c":
                    mig_free += j.devices
                else:
                    free[j.node] += j.devices
                j.devices, j.node, j.pending_since, j.uid_n = [], None, m, j.uid_n + 1
        # 4. scheduling: a pod Pending since an earlier minute gets a node (first fit)
        for j in jobs:
            if j.pending_since is not None and j.pending_since < m and j.done is None:
                if j.ns == "team-c":
                    if len(mig_free) >= j.gpus:
                        mig_free.sort()
                        j.devices, mig_free[:] = mig_free[:j.gpus], mig_free[j.gpus:]
                        j.node, j.pending_since = "node-mig", None
                else:
                    for node in NODES:
                        if len(free[node]) >= j.gpus:
                            free[node].sort()
                            j.devices, free[node][:] = free[node][:j.gpus], free[node][j.gpus:]
                            j.node, j.pending_since = node, None
                            break
        # 5. kube-state-metrics
        ksm_up = not _in(t, KSM_OUTAGE)
        replicas = ("ksm-0", "ksm-1") if _in(t, KSM_REPLICAS) else ("ksm-0",)
        pods = []
        for j in jobs:
            if j.admitted is None or j.admitted > m or (j.done is not None and m > j.done + 1):
                continue
            phase = "Succeeded" if j.done is not None else ("Pending" if j.pending_since is not None else "Running")
            pods.append((j, phase))
        burst = _in(t, BURST)
        req = {ns: 0.0 for ns in ("team-a", "team-b", "team-c")}
        if ksm_up:
            for inst in replicas:
                base = {"job": "kube-state-metrics", "instance": inst}
                for j, phase in pods:
                    pod = {"namespace": j.ns, "pod": f"{j.name}-0"}
                    res = "nvidia_com_mig_1g_10gb" if j.ns == "team-c" else "nvidia_com_gpu"
                    lab = {**base, **pod, "container": "main", **({"node": j.node} if j.node else {}),
                           "resource": res, "unit": "integer"}
                    emit("kube_pod_container_resource_requests", lab, ts, j.gpus)
                    for p in ("Pending", "Running", "Succeeded"):
                        emit("kube_pod_status_phase", {**base, **pod, "uid": f"{j.name}-uid-{j.uid_n}", "phase": p},
                             ts, int(p == phase))
                # an unrelated pod (kube-state-metrics itself), always there
                emit("kube_pod_status_phase", {**base, "namespace": "monitoring", "pod": "ksm-0", "uid": "ksm-uid",
                                               "phase": "Running"}, ts, 1)
                # every namespace exists all along (an empty one is idle, not gone)
                for ns in ("team-a", "team-b", "team-c", "monitoring"):
                    emit("kube_namespace_status_phase", {**base, "namespace": ns, "phase": "Active"}, ts, 1)
                if burst:
                    lab = {**base, "namespace": "team-b", "pod": "burst-0", "container": "main", "node": "node-2",
                           "resource": "nvidia_com_gpu", "unit": "integer"}
                    emit("kube_pod_container_resource_requests", lab, ts, 4)
                    emit("kube_pod_status_phase", {**base, "namespace": "team-b", "pod": "burst-0", "uid": "b",
                                                   "phase": "Running"}, ts, 1)
            for j, phase in pods:
                if phase != "Succeeded":
                    req[j.ns] += j.gpus / (MIG_SLICES if j.ns == "team-c" else 1)
            req["team-b"] += 4 if burst else 0
        # 6. Volcano (q-a) and Kueue (cq-b, lq-b)
        adm = {ns: sum(j.gpus for j in jobs if j.ns == ns and j.admitted is not None and j.admitted <= m
                       and j.done is None) for ns in QUOTA}
        queued = {ns: [j for j in jobs if j.ns == ns and j.arrive <= m and j.admitted is None] for ns in QUOTA}
        qg = {ns: sum(j.gpus for j in queued[ns]) for ns in QUOTA}
        vb = {"job": "volcano-scheduler", "instance": "volcano-0", "queue_name": "q-a"}
        emit("volcano_queue_allocated_scalar_resources", {**vb, "resource": "nvidia.com/gpu"}, ts, 1000 * adm["team-a"])
        emit("volcano_queue_request_scalar_resources", {**vb, "resource": "nvidia.com/gpu"}, ts,
             1000 * (adm["team-a"] + qg["team-a"]))
        emit("volcano_queue_weight", vb, ts, 1)
        kb = {"job": "kueue", "instance": "kueue-0", "cohort": "", "cluster_queue": "cq-b"}
        fl = {"flavor": "default-flavor", "resource": "nvidia.com/gpu"}
        emit("kueue_cluster_queue_resource_usage", {**kb, **fl}, ts, adm["team-b"])
        emit("kueue_cluster_queue_resource_reservation", {**kb, **fl}, ts, adm["team-b"])
        emit("kueue_cluster_queue_resource_pending", {**kb, **fl}, ts, qg["team-b"])
        emit("kueue_local_queue_resource_usage", {"job": "kueue", "instance": "kueue-0", "name": "lq-b",
                                                  "namespace": "team-b", **fl}, ts, adm["team-b"])
        for st in ("active", "inadmissible"):
            emit("kueue_pending_workloads", {"job": "kueue", "instance": "kueue-0", "cluster_queue": "cq-b",
                                             "status": st}, ts, len(queued["team-b"]) if st == "active" else 0)
        emit("kueue_cluster_queue_status", {"job": "kueue", "instance": "kueue-0", "cluster_queue": "cq-b",
                                            "status": "active"}, ts, 1)
        # 7. dcgm-exporter: per GPU (pod labels while a pod holds it) and per MIG instance
        holder = {}
        for j, phase in pods:
            if phase == "Running":
                for d in j.devices:
                    holder[(j.node, d)] = j
        busy = 0.0
        for node, k in NODES.items():
            hosts = [node, f"{node}.cluster.local"] if node == "node-2" and _in(t, DCGM_FLAP) else [node]
            for g in range(k):
                j = holder.get((node, g))
                util = j.util if j else 0.0
                busy += util / 100
                for host in hosts:
                    lab = {"job": "dcgm-exporter", "instance": f"dcgm-{node}", "gpu": str(g),
                           "UUID": f"GPU-{node}-{g:04d}", "device": f"nvidia{g}", "modelName": MODEL, "Hostname": host}
                    if j:
                        lab.update(namespace=j.ns, pod=f"{j.name}-0", container="main")
                    emit("DCGM_FI_DEV_GPU_UTIL", lab, ts, util)
        for gi in range(1, MIG_SLICES + 1):
            j = holder.get(("node-mig", gi))
            ratio = j.util / 100 if j else 0.0
            busy += ratio / MIG_SLICES
            lab = {"job": "dcgm-exporter", "instance": "dcgm-node-mig", "gpu": "0", "UUID": "GPU-node-mig-0000",
                   "device": "nvidia0", "modelName": MODEL, "Hostname": "node-mig", "GPU_I_PROFILE": MIG_PROFILE,
                   "GPU_I_ID": str(gi)}
            if j:
                lab.update(namespace=j.ns, pod=f"{j.name}-0", container="main")
            emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", lab, ts, ratio)
        row = truth[m]
        if ksm_up:
            row[0:4] = [req["team-a"], req["team-b"], req["team-c"], req["team-a"] + req["team-b"]]
        row[4:10] = [adm["team-a"], qg["team-a"], adm["team-b"], qg["team-b"], adm["team-b"], busy]
    idx = pd.date_range(START, periods=minutes, freq="1min", tz="UTC")
    return Cluster(series, pd.DataFrame(truth, index=idx, columns=TRUTH_COLUMNS))


def truth_per_step(truth: pd.DataFrame, step: str = "5min") -> pd.DataFrame:
    """Per-step peaks of the per-minute truth: the point at ``t`` is the max over minutes in
    ``(t - step, t]``; NaN where every minute of the step is NaN (exporter down)."""
    return truth.resample(step, label="right", closed="right").max()
