"""A deterministic synthetic heterogeneous GPU cluster, its exporters' series and its true demand and
capacity per GPU model.

Nodes carry the labels NVIDIA GPU Feature Discovery sets (``nvidia.com/gpu.product``, ``.memory``,
``.count``, ``.replicas``, ``nvidia.com/mig.strategy``), exported by kube-state-metrics as
``kube_node_labels{label_nvidia_com_gpu_product=...}``:

==============  ====================================  ================================================
node            gpu.product                           GPUs (allocatable)
==============  ====================================  ================================================
a100-1, a100-2  NVIDIA-A100-SXM4-80GB                 8 each (``nvidia.com/gpu`` 8)
a100-mig        NVIDIA-A100-SXM4-80GB-MIG-1g.10gb     1 GPU, single MIG strategy: ``nvidia.com/gpu`` 7
                                                      (each a 1g.10gb slice, 1/7 GPU)
h100-1          NVIDIA-H100-80GB-HBM3                 8, joins the cluster at 06:00
h100-mixed      NVIDIA-H100-80GB-HBM3                 2 GPUs, mixed MIG strategy: ``nvidia.com/gpu`` 1
                                                      and ``nvidia.com/mig-3g.40gb`` 2 (3/7 GPU each)
l4-1            NVIDIA-L4                             4, drained and deleted at 20:00
l4-shared       NVIDIA-L4-SHARED                      2 GPUs time-sliced 4 ways: ``nvidia.com/gpu`` 8
                                                      (1/4 GPU each)
==============  ====================================  ================================================

Workloads, scraped every minute for one day:

* **team-train** and **team-research** submit Jobs to the Kueue ClusterQueues ``cq-train`` and
  ``cq-research`` of the cohort ``fleet`` (ResourceFlavors ``a100-80gb`` and ``h100-80gb``, nominal quota
  per flavor, borrowing within the cohort). A team-train Job may use one flavor or try two in order (flavor
  fungibility), a team-research Job runs on A100s only; Kueue admits a Job to the first flavor with room
  in the cohort and injects that flavor's ``nodeSelector`` (``nvidia.com/gpu.product``). A suspended Job
  has no pod; an admitted one's pod is Pending (no node) until a node of its model has room, then Running.
  Before 06:00 H100 has one whole GPU, so admitted H100 Jobs wait as Pending pods with a nodeSelector on
  the model.
* **team-serve** runs pods (no Kueue) with a nodeSelector: whole L4s, time-sliced L4 replicas
  (``NVIDIA-L4-SHARED``), 1g.10gb slices on ``a100-mig`` (``nvidia.com/gpu`` there) and
  ``nvidia.com/mig-3g.40gb`` slices on the H100s. After 20:00 its whole-L4 pods wait Pending.
* **team-misc** runs 1-2 GPU pods with no nodeSelector, placed on the first node with room (whole, MIG or
  shared); while unscheduled they are no model's demand.
* Pods restart (recreated under the same name with a new ``uid``, Pending with no node for a minute);
  a finished pod lingers a minute as Succeeded. No team-serve arrivals 02:00-04:00.
* Faults: two kube-state-metrics replicas (``instance`` ksm-0 and ksm-1) 10:00-11:00; a
  kube-state-metrics outage 15:00-15:30 (the kube-state-metrics columns are NaN there).
* dcgm-exporter reports every physical GPU of a present node with its ``modelName`` (NVML's name, with
  spaces): whole GPUs ``DCGM_FI_DEV_GPU_UTIL``, MIG instances ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` with
  ``GPU_I_PROFILE``/``GPU_I_ID``; a time-sliced GPU is 30 % busy per pod on it (at most 100 %).

Ground truth per minute (:func:`generate`, columns :data:`TRUTH_COLUMNS`), per model ``M`` in
:data:`MODELS`: ``capacity/M`` (allocatable GPU-equivalents), ``requested/M`` (GPU-equivalents requested
by Running and Pending pods on M's nodes and by unscheduled Pending pods whose nodeSelector names M),
``busy/M`` (dcgm busy GPU-equivalents), ``reporting/M`` (physical GPUs dcgm reports),
``requested/A100-80GB/team-train``; per flavor ``F``: ``admitted/F`` and ``quota/F`` (Kueue, summed over
the cohort's ClusterQueues). :func:`tests.synth_cluster.truth_per_step` turns it into per-step peaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tests.synth_cluster import Cluster

START = pd.Timestamp("2024-07-01T00:00:00Z")
MINUTES = 1440
SLICES = 7
REPLICAS = 4
GPU, MIG3 = "nvidia.com/gpu", "nvidia.com/mig-3g.40gb"
KSM_REPLICAS = (600, 660)
KSM_OUTAGE = (900, 930)
SERVE_QUIET = (120, 240)
PRODUCT = {"A100-80GB": "NVIDIA-A100-SXM4-80GB", "H100-80GB": "NVIDIA-H100-80GB-HBM3", "L4": "NVIDIA-L4"}
MODEL_NAME = {"A100-80GB": "NVIDIA A100-SXM4-80GB", "H100-80GB": "NVIDIA H100 80GB HBM3", "L4": "NVIDIA L4"}
MODELS = tuple(PRODUCT)
MEMORY_MIB = {"A100-80GB": "81920", "H100-80GB": "81559", "L4": "23034"}  # GFD's nvidia.com/gpu.memory (MiB)
FLAVORS = {"a100-80gb": "A100-80GB", "h100-80gb": "H100-80GB"}
QUOTA = {"cq-train": {"a100-80gb": 8, "h100-80gb": 6}, "cq-research": {"a100-80gb": 8, "h100-80gb": 2}}
CQ_OF = {"team-train": "cq-train", "team-research": "cq-research"}
NAMESPACES = ("team-train", "team-research", "team-serve", "team-misc", "monitoring")
TRUTH_COLUMNS = ([f"{k}/{m}" for m in MODELS for k in ("capacity", "requested", "busy", "reporting")]
                 + ["requested/A100-80GB/team-train"]
                 + [f"{k}/{f}" for f in FLAVORS for k in ("admitted", "quota")])


@dataclass
class Node:
    """A GPU node: ``product`` (GFD label), ``model`` (catalogue name), ``resources`` {resource: units},
    ``share`` {resource: GPU-equivalents per unit}, ``gpu_of`` {resource: GPU index of each unit},
    present in minutes ``[since, until)``."""

    name: str
    product: str
    model: str
    gpus: int
    resources: dict[str, int]
    share: dict[str, float]
    gpu_of: dict[str, list[int]]
    labels: dict[str, str]
    since: int = 0
    until: int = MINUTES
    mig: dict[int, str] = field(default_factory=dict)  # GPU index -> MIG profile of its instances

    def present(self, m: int) -> bool:
        return self.since <= m < self.until


def nodes() -> dict[str, Node]:
    """The cluster's nodes (see the module docstring)."""
    def whole(name, model, n, since=0, until=MINUTES):
        return Node(name, PRODUCT[model], model, n, {GPU: n}, {GPU: 1.0}, {GPU: list(range(n))},
                    {"nvidia.com/gpu.count": str(n), "nvidia.com/mig.strategy": "none"}, since, until)

    out = [whole("a100-1", "A100-80GB", 8), whole("a100-2", "A100-80GB", 8),
           Node("a100-mig", PRODUCT["A100-80GB"] + "-MIG-1g.10gb", "A100-80GB", 1, {GPU: SLICES}, {GPU: 1 / SLICES},
                {GPU: [0] * SLICES}, {"nvidia.com/gpu.count": "7", "nvidia.com/mig.strategy": "single",
                                      "nvidia.com/mig.config": "all-1g.10gb"}, mig={0: "1g.10gb"}),
           whole("h100-1", "H100-80GB", 8, since=360),
           Node("h100-mixed", PRODUCT["H100-80GB"], "H100-80GB", 2, {GPU: 1, MIG3: 2}, {GPU: 1.0, MIG3: 3 / SLICES},
                {GPU: [0], MIG3: [1, 1]}, {"nvidia.com/gpu.count": "2", "nvidia.com/mig.strategy": "mixed"},
                mig={1: "3g.40gb"}),
           whole("l4-1", "L4", 4, until=1200),
           Node("l4-shared", PRODUCT["L4"] + "-SHARED", "L4", 2, {GPU: 2 * REPLICAS}, {GPU: 1 / REPLICAS},
                {GPU: [i // REPLICAS for i in range(2 * REPLICAS)]},
                {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": str(REPLICAS),
                 "nvidia.com/mig.strategy": "none", "nvidia.com/gpu.sharing-strategy": "time-slicing"})]
    return {n.name: n for n in out}


def share_of_product(product: str, resource: str) -> float:
    """GPU-equivalents of one unit of ``resource`` on a node labelled ``product`` (the truth's own rule)."""
    if resource == MIG3:
        return 3 / SLICES
    if "-MIG-1g." in product:
        return 1 / SLICES
    if product.endswith("-SHARED"):
        return 1 / REPLICAS
    return 1.0


def model_of_product(product: str) -> str:
    return {p: m for m, p in PRODUCT.items()}[product.split("-MIG-")[0].removesuffix("-SHARED")]


@dataclass
class Pod:
    name: str
    ns: str
    resource: str
    count: int
    arrive: int
    duration: int
    util: float
    selector: str | None = None  # nvidia.com/gpu.product the pod's nodeSelector names
    flavors: tuple = ()  # Kueue flavors a Job may use, in order
    admitted: int | None = None
    flavor: str | None = None
    node: str | None = None
    slots: list = field(default_factory=list)
    pending_since: int | None = None
    ran: int = 0
    uid_n: int = 0
    done: int | None = None


def _arrivals(rng: np.random.Generator) -> list[Pod]:
    pods, n = [], 0
    serve_kinds = [(PRODUCT["L4"], GPU, 1 / 40), (PRODUCT["L4"] + "-SHARED", GPU, 1 / 25),
                   (PRODUCT["A100-80GB"] + "-MIG-1g.10gb", GPU, 1 / 30), (PRODUCT["H100-80GB"], MIG3, 1 / 60)]
    for m in range(MINUTES - 30):
        for ns, rate in (("team-train", 1 / 18), ("team-research", 1 / 30)):
            if rng.random() < rate:
                n += 1
                flv = [("a100-80gb",), ("h100-80gb",), ("a100-80gb", "h100-80gb"), ("h100-80gb", "a100-80gb")]
                pick = flv[int(rng.integers(0, 4))]
                pods.append(Pod(f"{ns}-job-{n:03d}", ns, GPU, int(rng.choice([1, 1, 2, 4, 8])), m,
                                int(rng.integers(20, 120)), float(rng.choice([40, 60, 90, 100])),
                                flavors=pick if ns == "team-train" else ("a100-80gb",)))
        for product, res, rate in serve_kinds:
            if not SERVE_QUIET[0] <= m < SERVE_QUIET[1] and rng.random() < rate:
                n += 1
                pods.append(Pod(f"team-serve-{n:03d}", "team-serve", res, 1, m, int(rng.integers(40, 200)),
                                float(rng.choice([30, 50, 70])), selector=product))
        if rng.random() < 1 / 70:
            n += 1
            pods.append(Pod(f"team-misc-{n:03d}", "team-misc", GPU, int(rng.integers(1, 3)), m,
                            int(rng.integers(20, 90)), 55.0))
    return pods


def generate(seed: int = 11) -> Cluster:  # noqa: C901 (one simulation loop, read top to bottom)
    """Simulate :data:`MINUTES` minutes (see the module docstring)."""
    rng = np.random.default_rng(seed)
    pods = _arrivals(rng)
    ns_nodes = nodes()
    free = {name: {r: list(range(k)) for r, k in nd.resources.items()} for name, nd in ns_nodes.items()}
    series: dict = {}
    truth = np.full((MINUTES, len(TRUTH_COLUMNS)), np.nan)
    col = {c: i for i, c in enumerate(TRUTH_COLUMNS)}
    order = list(ns_nodes)

    def emit(name, labels, ts, v):
        series.setdefault((name, tuple(labels.items())), []).append((ts, float(v)))

    def release(p: Pod):
        free[p.node][p.resource] += p.slots
        p.slots = []

    for m in range(MINUTES):
        t = START + pd.Timedelta(minutes=m)
        ts = int(t.value // 10**9)
        # 0. a deleted node's pods are evicted: recreated Pending with no node
        for p in pods:
            if p.node and not ns_nodes[p.node].present(m) and p.done is None:
                p.slots, p.node, p.pending_since, p.uid_n = [], None, m, p.uid_n + 1
        # 1. running pods progress; finished ones release their slots and linger one minute as Succeeded
        for p in pods:
            if p.done is None and p.node and p.pending_since is None:
                p.ran += 1
                if p.ran >= p.duration:
                    p.done = m
                    release(p)
        # 2. Kueue admission (BestEffortFIFO per ClusterQueue, borrowing within the cohort); other pods at once
        used = {f: sum(p.count for p in pods if p.flavor == f and p.done is None) for f in FLAVORS}
        cohort = {f: sum(q[f] for q in QUOTA.values()) for f in FLAVORS}
        for p in pods:
            if p.admitted is None and p.arrive <= m:
                if p.flavors:
                    for f in p.flavors:
                        if used[f] + p.count <= cohort[f]:
                            p.admitted, p.flavor, p.pending_since = m, f, m
                            p.selector = PRODUCT[FLAVORS[f]]
                            used[f] += p.count
                            break
                else:
                    p.admitted, p.pending_since = m, m
        # 3. restarts: a running pod is recreated (new uid), Pending with no node for a minute
        for p in pods:
            if p.done is None and p.node and p.pending_since is None and p.ran > 3 and rng.random() < 0.005:
                release(p)
                p.node, p.pending_since, p.uid_n = None, m, p.uid_n + 1
        # 4. scheduling: a pod Pending since an earlier minute gets the first node with room
        for p in pods:
            if p.pending_since is not None and p.pending_since < m and p.done is None:
                for name in order:
                    nd = ns_nodes[name]
                    if not nd.present(m) or (p.selector and nd.product != p.selector):
                        continue
                    room = free[name].get(p.resource, [])
                    if len(room) >= p.count:
                        room.sort()
                        p.slots, room[:] = room[:p.count], room[p.count:]
                        p.node, p.pending_since = name, None
                        break
        # 5. kube-state-metrics
        ksm_up = not KSM_OUTAGE[0] <= m < KSM_OUTAGE[1]
        replicas = ("ksm-0", "ksm-1") if KSM_REPLICAS[0] <= m < KSM_REPLICAS[1] else ("ksm-0",)
        live = []
        for p in pods:
            if p.admitted is None or (p.done is not None and m > p.done + 1):
                continue
            phase = "Succeeded" if p.done is not None else ("Pending" if p.pending_since is not None else "Running")
            live.append((p, phase))
        if ksm_up:
            for inst in replicas:
                base = {"job": "kube-state-metrics", "instance": inst}
                for name, nd in ns_nodes.items():
                    if not nd.present(m):
                        continue
                    emit("kube_node_info", {**base, "node": name, "kubelet_version": "v1.30.2"}, ts, 1)
                    gfd = {"nvidia.com/gpu.product": nd.product, "nvidia.com/gpu.memory":
                           "9728" if "-MIG-" in nd.product else MEMORY_MIB[nd.model], **nd.labels}
                    emit("kube_node_labels", {**base, "node": name, **{
                        "label_" + k.replace(".", "_").replace("/", "_").replace("-", "_"): v
                        for k, v in sorted(gfd.items())}}, ts, 1)
                    for r, k in nd.resources.items():
                        emit("kube_node_status_allocatable", {**base, "node": name, "resource":
                                                              r.replace(".", "_").replace("/", "_").replace("-", "_"),
                                                              "unit": "integer"}, ts, k)
                for ns in NAMESPACES:
                    emit("kube_namespace_status_phase", {**base, "namespace": ns, "phase": "Active"}, ts, 1)
                for p, phase in live:
                    pod = {"namespace": p.ns, "pod": f"{p.name}-0"}
                    uid = {"uid": f"{p.name}-uid-{p.uid_n}"}
                    node = {"node": p.node} if p.node else {}
                    res = p.resource.replace(".", "_").replace("/", "_").replace("-", "_")
                    emit("kube_pod_container_resource_requests", {**base, **pod, "container": "main", **node,
                                                                  "resource": res, "unit": "integer"}, ts, p.count)
                    emit("kube_pod_info", {**base, **pod, **uid, **node, "created_by_kind": "Job"}, ts, 1)
                    if p.selector:
                        emit("kube_pod_nodeselectors", {**base, **pod, **uid,
                                                        "nodeselector_nvidia_com_gpu_product": p.selector}, ts, 1)
                    for ph in ("Pending", "Running", "Succeeded"):
                        emit("kube_pod_status_phase", {**base, **pod, **uid, "phase": ph}, ts, int(ph == phase))
            cap = {mo: 0.0 for mo in MODELS}
            for nd in ns_nodes.values():
                if nd.present(m):
                    cap[nd.model] += sum(k * nd.share[r] for r, k in nd.resources.items())
            req = {mo: 0.0 for mo in MODELS}
            team_train_a100 = 0.0
            for p, phase in live:
                if phase == "Succeeded":
                    continue
                if p.node:
                    nd = ns_nodes[p.node]
                    mo, v = nd.model, p.count * share_of_product(nd.product, p.resource)
                elif p.selector:
                    mo, v = model_of_product(p.selector), p.count * share_of_product(p.selector, p.resource)
                else:
                    continue
                req[mo] += v
                if p.ns == "team-train" and mo == "A100-80GB":
                    team_train_a100 += v
            for mo in MODELS:
                truth[m, col[f"capacity/{mo}"]] = cap[mo]
                truth[m, col[f"requested/{mo}"]] = req[mo]
            truth[m, col["requested/A100-80GB/team-train"]] = team_train_a100
        # 6. Kueue: per ClusterQueue and flavor usage and nominal quota; ClusterQueue status; pending workloads
        for cq, quota in QUOTA.items():
            for f in FLAVORS:
                lab = {"job": "kueue", "instance": "kueue-0", "cohort": "fleet", "cluster_queue": cq, "flavor": f,
                       "resource": GPU}
                emit("kueue_cluster_queue_resource_usage", lab, ts, sum(
                    p.count for p in pods if p.flavor == f and p.done is None and CQ_OF.get(p.ns) == cq))
                emit("kueue_cluster_queue_nominal_quota", lab, ts, quota[f])
            emit("kueue_cluster_queue_status", {"job": "kueue", "instance": "kueue-0", "cluster_queue": cq,
                                                "status": "active"}, ts, 1)
            emit("kueue_pending_workloads", {"job": "kueue", "instance": "kueue-0", "cluster_queue": cq,
                                             "status": "active"}, ts,
                 sum(1 for p in pods if CQ_OF.get(p.ns) == cq and p.arrive <= m and p.admitted is None))
        for f in FLAVORS:
            truth[m, col[f"admitted/{f}"]] = sum(p.count for p in pods if p.flavor == f and p.done is None)
            truth[m, col[f"quota/{f}"]] = sum(q[f] for q in QUOTA.values())
        # 7. dcgm-exporter: every physical GPU of a present node
        held: dict[tuple[str, int], list[Pod]] = {}
        slot_of: dict[tuple[str, str, int], Pod] = {}
        for p, phase in live:
            if phase == "Running":
                for s in p.slots:
                    held.setdefault((p.node, ns_nodes[p.node].gpu_of[p.resource][s]), []).append(p)
                    slot_of[(p.node, p.resource, s)] = p
        busy = {mo: 0.0 for mo in MODELS}
        reporting = {mo: 0.0 for mo in MODELS}
        for name, nd in ns_nodes.items():
            if not nd.present(m):
                continue
            reporting[nd.model] += nd.gpus
            for g in range(nd.gpus):
                gl = {"job": "dcgm-exporter", "instance": f"dcgm-{name}", "gpu": str(g),
                      "UUID": f"GPU-{name}-{g:04d}", "device": f"nvidia{g}", "modelName": MODEL_NAME[nd.model],
                      "Hostname": name}
                if g in nd.mig:
                    res = GPU if "-MIG-" in nd.product else MIG3
                    k = 1 if nd.mig[g] == "1g.10gb" else 3
                    units = [s for s, gg in enumerate(nd.gpu_of[res]) if gg == g]
                    for i, s in enumerate(units, 1):
                        p = slot_of.get((name, res, s))
                        ratio = p.util / 100 if p else 0.0
                        busy[nd.model] += ratio * k / SLICES
                        lab = {**gl, "GPU_I_PROFILE": nd.mig[g], "GPU_I_ID": str(i)}
                        if p:
                            lab.update(namespace=p.ns, pod=f"{p.name}-0", container="main")
                        emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", lab, ts, ratio)
                    continue
                on = held.get((name, g), [])
                if nd.product.endswith("-SHARED"):
                    util = min(100.0, 30.0 * len(on))
                else:
                    util = on[0].util if on else 0.0
                    if on:
                        gl.update(namespace=on[0].ns, pod=f"{on[0].name}-0", container="main")
                busy[nd.model] += util / 100
                emit("DCGM_FI_DEV_GPU_UTIL", gl, ts, util)
        for mo in MODELS:
            truth[m, col[f"busy/{mo}"]] = busy[mo]
            truth[m, col[f"reporting/{mo}"]] = reporting[mo]
    idx = pd.date_range(START, periods=MINUTES, freq="1min", tz="UTC")
    return Cluster(series, pd.DataFrame(truth, index=idx, columns=TRUTH_COLUMNS))
