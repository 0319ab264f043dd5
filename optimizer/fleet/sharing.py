"""Packing of fractional GPU requests onto the GPUs of a node inventory, and the stranded GPUs a packing leaves.

Two placements of one pod list on one node inventory (:func:`place`):

* **whole-GPU** (``mode="whole"``): a pod that asks for a share below one GPU holds a whole GPU, as it does
  with the NVIDIA device plugin and no sharing; the rest of that GPU is stranded.
* **shared** (``mode="shared"``): fractional pods share GPUs by time-slicing or MPS, on models without MIG
  (MIG layouts are :mod:`.mig`'s). A GPU takes pods while the sum of their shares stays within one GPU
  (1,000 milli-GPU), and, per model, at most ``replicas`` pods (:class:`SharingSetting`). A pod's share on a
  model is its ``gpu_milli``, raised to its GPU memory need (``gpu_memory_gb`` over the model's memory, when
  both are known), so memory and compute are both within the GPU's. Unequal shares need an allocator that
  enforces them per pod (MPS with per-client limits ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` /
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``, as HAMi and Volcano vGPU set them); plain time-slicing shares without
  isolation.

In both modes a pod that asks for one or more whole GPUs takes GPUs nobody holds, a pod goes only to a model its
``gpu_spec`` lists (empty: any), and the node's CPU (``cpu_milli``) and memory (``memory_mib``) bound it too.

**Node and GPU choice**: fragmentation gradient descent (FGD; Weng et al., "Beware of Fragmentation: Scheduling
GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23). The workload is the pod list's
distinct request shapes ``m`` (CPU, memory, GPUs, share, allowed models) with popularity ``p_m`` (their share of
the pods). A node's fragmentation for shape ``m`` is all its free GPU share when ``m`` cannot run there (CPU,
memory, model or GPUs), else the free share of the GPUs too small for ``m`` (below its share; below a whole GPU
for a whole-GPU shape); its expected fragmentation is the ``p_m``-weighted sum. Each pod goes to the node and GPU
whose placement raises that node's expected fragmentation the least (ties: the GPU with the least free share,
then the first node in inventory order). In whole-GPU mode a fractional shape counts as one whole GPU.

**Protocol** (the FGD paper's, on a snapshot; the Alibaba GPU trace v2023 ``openb`` pod list is a placement
snapshot, not a load trace): pods are tried once each in arrival order (``creation_time``, then input order); a
pod that fits nowhere stays pending (counted in ``unplaced_pods``) and later pods are still tried, as
kube-scheduler does with a pending pod. Deletion times are not replayed: no pod leaves. After the last pod the
cluster is full (some pod failed) or every pod is placed.

**Stranded GPUs** (capacity no request can use), per model, in GPUs (:class:`Placement`):

* ``idle_exclusive_gpus``: 1 - share of each GPU a fractional pod holds whole (whole-GPU mode only);
* ``fragmented_gpus``: the free share of each GPU that no request shape of the workload can use on its node
  (the shape cannot run on the node, or the GPU's free share is below its need, or the GPU already holds
  ``replicas`` pods). It is FGD's fragment taken over every shape (the least over shapes), not its mean;
* ``stranded_gpus`` = the sum of the two.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

MILLI = 1000  #: milli-GPU in one GPU
NODE_COLUMNS = ("node", "model", "gpus", "cpu_milli", "memory_mib")
POD_COLUMNS = ("pod", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time")


class SharingSetting(BaseModel):
    """How GPUs of one model without MIG are shared: ``mode`` (``mps`` or ``time-slicing``, the NVIDIA device
    plugin's ``sharing`` strategies) and ``replicas`` (the most pods one GPU holds; the device plugin's
    ``replicas``). ``why`` says how it was chosen (:func:`optimizer.fleet.mig.recommend_sharing`)."""

    model_config = ConfigDict(extra="forbid")
    model: str
    mode: Literal["mps", "time-slicing"] = "mps"
    replicas: int = Field(ge=1, le=1024)
    why: str = ""


@dataclass
class Placement:
    """The outcome of :func:`place`.

    * ``node_of``: per pod (input order), the index of its node in the inventory, -1 when unplaced;
    * ``gpus_of``: per pod, the GPU indices on its node (empty when unplaced or CPU-only);
    * ``per_model``: one row per GPU model, columns ``model, nodes, gpus, gpus_in_use`` (GPUs holding a pod),
      ``placed_gpus`` (sum of the placed pods' shares, GPUs), ``free_gpus`` (free share, GPUs),
      ``idle_exclusive_gpus``, ``fragmented_gpus``, ``stranded_gpus`` (module docstring), ``max_pods_per_gpu``;
    * ``placed_pods``, ``unplaced_pods`` (pods), ``unplaced_gpus`` (sum of the unplaced pods' GPU requests).
    """

    mode: str
    node_of: np.ndarray
    gpus_of: list[tuple[int, ...]]
    per_model: pd.DataFrame
    placed_pods: int
    unplaced_pods: int
    unplaced_gpus: float

    @property
    def stranded_gpus(self) -> float:
        """Stranded GPUs of the whole inventory."""
        return float(self.per_model["stranded_gpus"].sum())


def read_openb_nodes(path: str | Path) -> pd.DataFrame:
    """The node list of the Alibaba GPU trace v2023 (``openb_node_list_gpu_node.csv``: ``sn, cpu_milli,
    memory_mib, gpu, model``) as an inventory frame with :data:`NODE_COLUMNS` (``node`` from ``sn``, ``gpus``
    from ``gpu``). Raises ``ValueError`` naming the file and the missing column."""
    df = pd.read_csv(path)
    missing = [c for c in ("sn", "cpu_milli", "memory_mib", "gpu", "model") if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected an openb node list")
    return check_nodes(df.rename(columns={"sn": "node", "gpu": "gpus"})[list(NODE_COLUMNS)])


def read_openb_pods(path: str | Path) -> pd.DataFrame:
    """A pod list of the Alibaba GPU trace v2023 (``openb_pod_list_*.csv[.gz]``: ``name, cpu_milli,
    memory_mib, num_gpu, gpu_milli, gpu_spec, ...``) as a pod frame with :data:`POD_COLUMNS` (``pod`` from
    ``name``; ``gpu_spec`` '' when empty). Raises ``ValueError`` naming the file and the missing column."""
    df = pd.read_csv(path, dtype={"gpu_spec": str}, keep_default_na=False)
    missing = [c for c in ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time")
               if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected an openb pod list")
    return check_pods(df.rename(columns={"name": "pod"})[list(POD_COLUMNS)])


def check_nodes(nodes: pd.DataFrame) -> pd.DataFrame:
    """``nodes`` with :data:`NODE_COLUMNS` checked: ``gpus`` >= 1, CPU and memory >= 0, names unique.
    Raises ``ValueError`` naming the column and the first bad row."""
    missing = [c for c in NODE_COLUMNS if c not in nodes.columns]
    if missing:
        raise ValueError(f"node inventory: missing column(s) {missing}; needs {list(NODE_COLUMNS)}")
    out = nodes.reset_index(drop=True).copy()
    out["model"] = out["model"].astype(str)
    for col, low in (("gpus", 1), ("cpu_milli", 0), ("memory_mib", 0)):
        bad = ~(pd.to_numeric(out[col], errors="coerce") >= low)
        if bad.any():
            raise ValueError(f"node inventory: {col} must be a number >= {low} (node {out.loc[bad.idxmax(), 'node']})")
    if out["node"].duplicated().any():
        raise ValueError(f"node inventory: node {out.loc[out['node'].duplicated().idxmax(), 'node']!r} listed twice")
    return out


def check_pods(pods: pd.DataFrame) -> pd.DataFrame:
    """``pods`` with :data:`POD_COLUMNS` checked: ``num_gpu`` a whole number >= 0, ``gpu_milli`` within
    0..1000 and 1000 when ``num_gpu`` > 1 (a multi-GPU pod takes whole GPUs), CPU and memory >= 0; an optional
    ``gpu_memory_gb`` >= 0 (GB of GPU memory per GPU). Raises ``ValueError`` naming the column and the pod."""
    missing = [c for c in POD_COLUMNS if c not in pods.columns]
    if missing:
        raise ValueError(f"pod list: missing column(s) {missing}; needs {list(POD_COLUMNS)}")
    out = pods.reset_index(drop=True).copy()
    out["gpu_spec"] = out["gpu_spec"].fillna("").astype(str)

    def fail(mask, what):
        if mask.any():
            raise ValueError(f"pod list: {what} (pod {out.loc[mask.idxmax(), 'pod']})")

    num = pd.to_numeric(out["num_gpu"], errors="coerce")
    fail(~((num >= 0) & (num == num.round())), "num_gpu must be a whole number >= 0")
    milli = pd.to_numeric(out["gpu_milli"], errors="coerce")
    fail(~milli.between(0, MILLI), "gpu_milli must be within 0..1000 (a share of one GPU, per mille)")
    fail((num > 1) & (milli < MILLI), "a pod asking for more than one GPU must ask for whole GPUs (gpu_milli 1000)")
    fail((num == 1) & (milli <= 0), "a pod asking for a GPU must ask for a share > 0 (gpu_milli)")
    for col in ("cpu_milli", "memory_mib"):
        fail(~(pd.to_numeric(out[col], errors="coerce") >= 0), f"{col} must be a number >= 0")
    if "gpu_memory_gb" in out.columns:
        gm = pd.to_numeric(out["gpu_memory_gb"], errors="coerce").fillna(0.0)
        fail(gm < 0, "gpu_memory_gb must be >= 0")
        out["gpu_memory_gb"] = gm
    out["num_gpu"] = num.astype(int)
    out["gpu_milli"] = milli.astype(float)
    return out


def _models_of(spec: str, models: list[str]) -> tuple[bool, ...]:
    allowed = {m for m in spec.split("|") if m}
    return tuple(not allowed or m in allowed for m in models)


class _Workload:
    """The pod list's distinct request shapes: CPU, memory, GPUs, per-model need (milli) and popularity."""

    def __init__(self, pods: pd.DataFrame, models: list[str], mode: str, gpu_memory: dict[str, float]):
        self.models = models
        allowed = [_models_of(s, models) for s in pods["gpu_spec"]]
        frac = (pods["num_gpu"] == 1) & (pods["gpu_milli"] < MILLI)
        need = np.repeat(pods["gpu_milli"].to_numpy(float)[:, None], len(models), axis=1)
        need[(pods["num_gpu"] == 0).to_numpy()] = 0.0
        if mode == "whole":
            need[frac.to_numpy()] = MILLI
        elif "gpu_memory_gb" in pods.columns:
            for j, m in enumerate(models):
                mem = gpu_memory.get(m)
                if mem:  # the memory need as a share of this model's GPU (a need above the GPU: cannot run there)
                    by_mem = np.ceil(pods["gpu_memory_gb"].to_numpy(float) / mem * MILLI)
                    need[:, j] = np.where(frac, np.maximum(need[:, j], by_mem), need[:, j])
        over = need > MILLI
        allowed = np.array(allowed, dtype=bool) & ~over
        need = np.minimum(need, MILLI)
        keys = [(c, mm, g, tuple(n), a) for c, mm, g, n, a in zip(pods["cpu_milli"], pods["memory_mib"],
                                                                   pods["num_gpu"], need.tolist(),
                                                                   map(tuple, allowed.tolist()))]
        index: dict[tuple, int] = {}
        self.shape_of = np.array([index.setdefault(k, len(index)) for k in keys])
        shapes = list(index)
        self.cpu = np.array([s[0] for s in shapes], float)
        self.mem = np.array([s[1] for s in shapes], float)
        self.gpus = np.array([s[2] for s in shapes], int)
        self.need = np.array([s[3] for s in shapes], float).reshape(len(shapes), len(models))
        self.allowed = np.array([s[4] for s in shapes], bool).reshape(len(shapes), len(models))
        self.whole = (self.gpus >= 1) & (self.need >= MILLI).all(axis=1)
        counts = np.bincount(self.shape_of, minlength=len(shapes)).astype(float)
        self.p = counts / counts.sum()
        self._memo: dict[tuple, float] = {}

    def fragmentation(self, m: int, cpu: float, mem: float, free: tuple[float, ...]) -> float:
        """Expected fragmentation (GPUs x 1000) of a node of model index ``m`` with ``cpu``/``mem`` free and
        GPUs with ``free`` milli each (module docstring)."""
        key = (m, cpu, mem, free)
        got = self._memo.get(key)
        if got is not None:
            return got
        f = np.asarray(free, float)
        total = f.sum()
        fits = (self.cpu <= cpu) & (self.mem <= mem) & self.allowed[:, m]
        need = np.where(self.gpus == 0, 0.0, np.where(self.whole, MILLI, self.need[:, m]))
        small = f[None, :] < need[:, None]
        partial = (small * f[None, :]).sum(axis=1)
        full = int((f >= MILLI).sum())
        gpu_ok = np.where(self.gpus == 0, True,
                          np.where(self.whole, full >= self.gpus, (f.max(initial=0.0) >= need)))
        frag = np.where(fits & gpu_ok, partial, total)
        out = float(self.p @ frag)
        self._memo[key] = out
        return out


class _Cluster:
    """Free CPU, memory and per-GPU free share and pod count of every node, grouped by identical state."""

    def __init__(self, nodes: pd.DataFrame, models: list[str]):
        self.model = np.array([models.index(m) for m in nodes["model"]])
        self.cpu = nodes["cpu_milli"].to_numpy(float).copy()
        self.mem = nodes["memory_mib"].to_numpy(float).copy()
        self.free = [[float(MILLI)] * int(g) for g in nodes["gpus"]]
        self.count = [[0] * int(g) for g in nodes["gpus"]]
        self.groups: dict[tuple, list[int]] = {}
        for i in range(len(nodes)):
            self.groups.setdefault(self.key(i), []).append(i)

    def key(self, i: int) -> tuple:
        return (int(self.model[i]), self.cpu[i], self.mem[i], tuple(sorted(zip(self.free[i], self.count[i]))))

    def update(self, i: int, old: tuple) -> None:
        g = self.groups[old]
        g.pop(bisect.bisect_left(g, i))
        if not g:
            del self.groups[old]
        bisect.insort(self.groups.setdefault(self.key(i), []), i)


def _candidates(key: tuple, shape: int, wl: _Workload, replicas: list[int]):
    """``(delta, gpu choice)`` options of one shape on a node state: the fragmentation increase and the
    (free, count) entries of the sorted GPU list it takes; nothing when it does not fit."""
    m, cpu, mem, gpus = key
    c, mm, g = wl.cpu[shape], wl.mem[shape], wl.gpus[shape]
    if c > cpu or mm > mem or not wl.allowed[shape, m]:
        return []
    free = tuple(f for f, _ in gpus)
    before = wl.fragmentation(m, cpu, mem, tuple(sorted(free)))
    if g == 0:
        return [(wl.fragmentation(m, cpu - c, mem - mm, tuple(sorted(free))) - before, ())]
    if wl.whole[shape]:
        idle = [j for j, (f, n) in enumerate(gpus) if f >= MILLI and n == 0]
        if len(idle) < g:
            return []
        take = tuple(idle[:g])
        after = list(free)
        for j in take:
            after[j] = 0.0
        return [(wl.fragmentation(m, cpu - c, mem - mm, tuple(sorted(after))) - before, take)]
    need = wl.need[shape, m]
    out, seen = [], set()
    for j, (f, n) in enumerate(gpus):
        if f >= need and n < replicas[m] and (f, n) not in seen:
            seen.add((f, n))
            after = list(free)
            after[j] = f - need
            out.append((wl.fragmentation(m, cpu - c, mem - mm, tuple(sorted(after))) - before, (j,)))
    return out


def place(nodes: pd.DataFrame, pods: pd.DataFrame, mode: Literal["whole", "shared"] = "shared",
          settings: dict[str, SharingSetting] | None = None,
          gpu_memory_gb: dict[str, float] | None = None) -> Placement:
    """Place ``pods`` on ``nodes`` in arrival order by FGD (module docstring) and count the stranded GPUs.

    ``nodes``: :data:`NODE_COLUMNS` (``gpus`` per node, ``cpu_milli``, ``memory_mib``, ``model`` as the pods'
    ``gpu_spec`` names it). ``pods``: :data:`POD_COLUMNS` (``gpu_spec``: allowed models joined by ``|``, '' for
    any), optional ``gpu_memory_gb``. ``mode``: ``whole`` or ``shared``. ``settings``: per model, the sharing
    setting whose ``replicas`` bounds the pods on one GPU in shared mode (default: no bound beyond the shares).
    ``gpu_memory_gb``: per model, GB of memory per GPU (the catalogue's), used with the pods' ``gpu_memory_gb``.

    Raises ``ValueError`` on a bad frame (:func:`check_nodes`, :func:`check_pods`), a ``gpu_spec`` naming a model
    no node has, or an unknown ``mode``.
    """
    if mode not in ("whole", "shared"):
        raise ValueError(f"mode must be 'whole' or 'shared', got {mode!r}")
    nodes, pods = check_nodes(nodes), check_pods(pods)
    models = sorted(nodes["model"].unique())
    for pod, spec in zip(pods["pod"], pods["gpu_spec"]):
        unknown = sorted({m for m in spec.split("|") if m} - set(models))
        if unknown:
            raise ValueError(f"pod {pod}: gpu_spec names GPU model(s) {unknown} that no node has; the inventory's "
                             f"models: {', '.join(models)}")
    settings = settings or {}
    replicas = [settings[m].replicas if (mode == "shared" and m in settings) else (1 if mode == "whole" else 10**6)
                for m in models]
    wl = _Workload(pods, models, mode, gpu_memory_gb or {})
    cl = _Cluster(nodes, models)
    order = np.lexsort((np.arange(len(pods)), pods["creation_time"].to_numpy()))
    node_of = np.full(len(pods), -1)
    gpus_of: list[tuple[int, ...]] = [()] * len(pods)
    idle_exclusive = np.zeros(len(models))
    milli = pods["gpu_milli"].to_numpy(float)
    frac = ((pods["num_gpu"] == 1) & (pods["gpu_milli"] < MILLI)).to_numpy()
    memo: dict[tuple, list] = {}
    for k in order:
        s = int(wl.shape_of[k])
        best = None
        for key, members in cl.groups.items():
            opts = memo.get((key, s))
            if opts is None:
                opts = memo[(key, s)] = _candidates(key, s, wl, replicas)
            for delta, take in opts:
                free_taken = sum(key[3][j][0] for j in take)
                rank = (round(delta, 9), free_taken, members[0])
                if best is None or rank < best[0]:
                    best = (rank, key, take)
        if best is None:
            continue
        _, key, take = best
        i = cl.groups[key][0]
        m = key[0]
        # the sorted GPU entries taken -> this node's GPU indices holding those (free, count) values
        order_i = sorted(range(len(cl.free[i])), key=lambda j: (cl.free[i][j], cl.count[i][j]))
        chosen = tuple(order_i[j] for j in take)
        cl.cpu[i] -= wl.cpu[s]
        cl.mem[i] -= wl.mem[s]
        for j in chosen:
            if wl.whole[s]:
                cl.free[i][j] = 0.0
                if frac[k]:
                    idle_exclusive[m] += MILLI - milli[k]
            else:
                cl.free[i][j] -= wl.need[s, m]
            cl.count[i][j] += 1
        cl.update(i, key)
        node_of[k] = i
        gpus_of[k] = chosen
    per_model = _per_model(nodes, models, cl, wl, replicas, pods, node_of, idle_exclusive)
    placed = node_of >= 0
    req = pods["num_gpu"].to_numpy(float) * np.where(frac, milli / MILLI, 1.0)
    return Placement(mode, node_of, gpus_of, per_model, int(placed.sum()), int((~placed).sum()),
                     float(req[~placed].sum()))


def _usable(wl: _Workload, m: int, cpu: float, mem: float, free: list[float], count: list[int],
            replicas: int) -> np.ndarray:
    """Per GPU of a node: True when some GPU-asking shape of the workload can use its free share."""
    f = np.asarray(free, float)
    n = np.asarray(count)
    gshape = (wl.gpus >= 1) & (wl.cpu <= cpu) & (wl.mem <= mem) & wl.allowed[:, m]
    full = (f >= MILLI) & (n == 0)
    out = np.zeros(len(f), bool)
    whole = gshape & wl.whole & (wl.gpus <= full.sum())
    if whole.any():
        out |= full
    fr = gshape & ~wl.whole
    if fr.any():
        least = wl.need[fr, m].min()
        out |= (f >= least) & (n < replicas) & (f > 0)
    return out


def _per_model(nodes, models, cl, wl, replicas, pods, node_of, idle_exclusive) -> pd.DataFrame:
    rows = []
    milli = pods["gpu_milli"].to_numpy(float)
    num = pods["num_gpu"].to_numpy(float)
    for m, name in enumerate(models):
        idx = np.flatnonzero(cl.model == m)
        free = sum(sum(cl.free[i]) for i in idx)
        in_use = sum(sum(1 for n in cl.count[i] if n > 0) for i in idx)
        frag = 0.0
        for i in idx:
            ok = _usable(wl, m, cl.cpu[i], cl.mem[i], cl.free[i], cl.count[i], replicas[m])
            frag += float(np.asarray(cl.free[i])[~ok].sum())
        on = np.isin(node_of, idx)
        placed = float((num[on] * np.minimum(milli[on], MILLI)).sum())
        most = max((max(cl.count[i]) for i in idx), default=0)
        rows.append({"model": name, "nodes": len(idx), "gpus": int(nodes["gpus"].to_numpy()[idx].sum()),
                     "gpus_in_use": in_use, "placed_gpus": placed / MILLI, "free_gpus": free / MILLI,
                     "idle_exclusive_gpus": idle_exclusive[m] / MILLI, "fragmented_gpus": frag / MILLI,
                     "stranded_gpus": (idle_exclusive[m] + frag) / MILLI, "max_pods_per_gpu": most})
    return pd.DataFrame(rows)


def shares_by_model(pods: pd.DataFrame, models: list[str]) -> dict[str, np.ndarray]:
    """Per model, the shares (fraction of one GPU, 0..1) of the fractional pods (one GPU, ``gpu_milli`` < 1000)
    that may run on it by their ``gpu_spec``: the fractional demand a sharing setting is chosen from
    (:func:`optimizer.fleet.mig.recommend_sharing`)."""
    pods = check_pods(pods)
    frac = pods[(pods["num_gpu"] == 1) & (pods["gpu_milli"] < MILLI)]
    allowed = np.array([_models_of(s, models) for s in frac["gpu_spec"]], bool).reshape(len(frac), len(models))
    share = frac["gpu_milli"].to_numpy(float) / MILLI
    return {m: share[allowed[:, j]] for j, m in enumerate(models)}


__all__ = ["SharingSetting", "Placement", "place", "read_openb_nodes", "read_openb_pods", "check_nodes",
           "check_pods", "shares_by_model", "MILLI", "NODE_COLUMNS", "POD_COLUMNS"]
