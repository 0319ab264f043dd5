"""MIG layouts and sharing settings recommended from the history of fractional demand.

Input: per series its fractional need (:class:`FractionalSeries`: ``share`` of one GPU, GPU ``memory_gb``, or a
MIG ``profile`` by name) and a history of how many instances of it ran at once (a tidy frame ``series_id,
timestamp, value``; ``value`` = concurrent instances, e.g. replicas or pods, rounded up).

**On a model with MIG** (the catalogue's ``mig_profiles``, :mod:`optimizer.book.gpus`), per node group:

1. each series takes the smallest profile that holds it: compute slices / 7 >= ``share`` and profile memory >=
   ``memory_gb`` (MIG splits a GPU into 7 compute slices and 8 memory slices; NVIDIA MIG user guide,
   "Supported MIG Profiles", docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html);
2. the peak concurrent demand per profile is the maximum over timestamps of the instances of that profile
   (series summed per timestamp): a static layout must hold each profile's own peak, since a Kubernetes pod asks
   for one profile's resource (``nvidia.com/mig-1g.10gb``, the device plugin's mixed strategy) and instances
   do not move between profiles;
3. the valid geometries of one GPU are enumerated (:func:`geometries`): sets of instances that can be placed
   together, by the placements the user guide lists per profile (``nvidia-smi mig -lgipp``): a profile of ``s``
   memory slices starts at a multiple of ``s``, and its compute slices end by the 7th (so on an A100-40GB
   ``2g.10gb`` starts at 0, 2 or 4, ``3g.20gb`` at 0 or 4, ``4g.20gb`` and ``7g.40gb`` at 0), and instances never
   share a memory slice (NVML ``nvmlDeviceGetGpuInstancePossiblePlacements``: creation fails on an overlap);
4. an integer program (``scipy.optimize.milp``, HiGHS) chooses how many GPUs take each geometry: fewest GPUs
   covering every profile's peak, then, at that count, the fewest distinct geometries (simpler operations).

The layout is named as NVIDIA's MIG manager names its built-in ones (``NVIDIA/mig-parted``
``config-default.yaml``): ``all-<profile>`` (each GPU holds the most instances of one profile),
``all-balanced`` (two of the smallest 1g profile, one 2g and one 3g), else ``custom``
(:meth:`MigLayout.mig_parted_config` writes the config for it).

**Stranded slices**: the GPUs' compute slices (7 per GPU) less the slices the peak demand uses. Of those,
``unpartitioned_slices`` belong to no instance of the geometry and ``idle_instance_slices`` to instances beyond
the peak.

**On a model without MIG**, :func:`recommend_sharing` gives a time-slicing/MPS setting instead
(:class:`optimizer.fleet.sharing.SharingSetting`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy.optimize import Bounds, LinearConstraint, milp

from optimizer.book.gpus import GpuModelSpec, MigProfile
from optimizer.fleet.sharing import SharingSetting

#: Most MPS clients per GPU on Volta and newer (NVIDIA "Multi-Process Service" documentation: Volta MPS supports
#: up to 48 client CUDA contexts per device; 16 before Volta).
MAX_MPS_CLIENTS = 48


class FractionalSeries(BaseModel):
    """What one series' instance needs of a GPU: ``share`` (fraction of one GPU's compute, 0 < share <= 1),
    ``memory_gb`` (GB of GPU memory), or a MIG ``profile`` by name (which overrides both on a MIG model)."""

    model_config = ConfigDict(extra="forbid")
    series_id: str
    share: float | None = Field(default=None, gt=0, le=1)
    memory_gb: float | None = Field(default=None, ge=0)
    profile: str | None = None

    @model_validator(mode="after")
    def _something(self):
        if self.share is None and self.memory_gb is None and self.profile is None:
            raise ValueError(f"series {self.series_id!r}: give share, memory_gb or profile")
        return self


def compute_slices(spec: GpuModelSpec) -> int:
    """Compute slices of one GPU of ``spec`` (7 on A100/H100/H200: its full profile's)."""
    return max(p.slices for p in spec.mig_profiles)


def _memory_slices(spec: GpuModelSpec) -> tuple[int, float]:
    c = compute_slices(spec)
    n = 8 if c == 7 else c  # 7-slice GPUs have 8 memory slices (MIG user guide); A30-like 4/4
    return n, spec.memory_gb / n


def _placements(spec: GpuModelSpec, p: MigProfile) -> tuple[int, list[int]]:
    """Memory slices a profile spans and its allowed start slices (module docstring, rule 3)."""
    n, per = _memory_slices(spec)
    size = min(n, max(1, round(p.memory_gb / per)))
    if p.slices == compute_slices(spec):
        size = n
    starts = [s for s in range(0, n, size) if s + p.slices <= compute_slices(spec) and s + size <= n]
    return size, starts


def _placeable(spec: GpuModelSpec, counts: dict[str, int]) -> bool:
    items = sorted(((_placements(spec, spec.profile(name)), name) for name, k in counts.items() for _ in range(k)),
                   key=lambda x: -x[0][0])
    n, _ = _memory_slices(spec)

    def fit(i: int, used: int) -> bool:
        if i == len(items):
            return True
        (size, starts), _ = items[i]
        for s in starts:
            mask = ((1 << size) - 1) << s
            if not used & mask and fit(i + 1, used | mask):
                return True
        return False

    return fit(0, 0)


def geometries(spec: GpuModelSpec) -> list[dict[str, int]]:
    """Every valid non-empty geometry of one GPU of ``spec``: ``{profile name: instances}`` within each
    profile's ``max_count``, the GPU's compute slices and memory, and placeable by the MIG placement rule
    (module docstring). Raises ``ValueError`` when the model has no MIG profiles."""
    if not spec.mig_profiles:
        raise ValueError(f"GPU model {spec.name!r} has no MIG profiles; use recommend_sharing for it")
    profs = spec.mig_profiles
    c = compute_slices(spec)
    out = []
    for ks in product(*(range(p.max_count + 1) for p in profs)):
        if not any(ks):
            continue
        if sum(k * p.slices for k, p in zip(ks, profs)) > c:
            continue
        if sum(k * p.memory_gb for k, p in zip(ks, profs)) > spec.memory_gb + 1e-9:
            continue
        g = {p.name: k for k, p in zip(ks, profs) if k}
        if _placeable(spec, g):
            out.append(g)
    return out


def profile_for(spec: GpuModelSpec, s: FractionalSeries) -> MigProfile:
    """The smallest profile of ``spec`` (fewest slices, then least memory) that holds one instance of ``s``
    (module docstring, rule 1). Raises ``ValueError`` naming the series when none does, and the catalogue's
    ``UnknownGpuModel`` for an unknown ``profile``."""
    if s.profile:
        return spec.profile(s.profile)
    c = compute_slices(spec)
    fits = [p for p in spec.mig_profiles
            if p.slices >= math.ceil((s.share or 0.0) * c - 1e-9) and p.memory_gb >= (s.memory_gb or 0.0) - 1e-9]
    if not fits:
        raise ValueError(f"series {s.series_id!r}: no MIG profile of {spec.name} holds share {s.share} and "
                         f"memory_gb {s.memory_gb} (largest: {spec.mig_profiles[-1].name})")
    return min(fits, key=lambda p: (p.slices, p.memory_gb))


def peak_demand(history: pd.DataFrame, series: list[FractionalSeries], spec: GpuModelSpec) -> dict[str, int]:
    """Per profile of ``spec``, the peak over timestamps of the concurrent instances of the series that take it
    (``history``: ``series_id, timestamp, value``, value = concurrent instances, rounded up). Raises
    ``ValueError`` for a history series with no :class:`FractionalSeries` entry or a negative value."""
    by_id = {s.series_id: s for s in series}
    unknown = sorted(set(history["series_id"]) - set(by_id))
    if unknown:
        raise ValueError(f"history series {unknown[:5]} have no fractional need (share/memory_gb/profile)")
    if (history["value"] < 0).any():
        raise ValueError("history: value (concurrent instances) must be >= 0")
    prof = {sid: profile_for(spec, s).name for sid, s in by_id.items()}
    h = history.assign(profile=history["series_id"].map(prof), n=np.ceil(history["value"].to_numpy(float) - 1e-9))
    per_t = h.groupby(["profile", "timestamp"])["n"].sum()
    peak = per_t.groupby(level="profile").max()
    return {p.name: int(peak.get(p.name, 0)) for p in spec.mig_profiles if int(peak.get(p.name, 0)) > 0}


@dataclass
class MigLayout:
    """A recommended MIG layout for one node group of one model.

    ``layout``: ``[(geometry {profile: instances}, GPUs)]``; ``name``: ``all-<profile>``, ``all-balanced`` or
    ``custom``; ``gpus`` and ``nodes`` (``ceil(gpus / gpus_per_node)``); ``demand`` and ``instances``: peak
    instances asked and held per profile; ``stranded_slices`` = ``unpartitioned_slices`` +
    ``idle_instance_slices`` (compute slices, module docstring)."""

    model: str
    node_group: str
    layout: list[tuple[dict[str, int], int]]
    name: str
    gpus: int
    nodes: int
    demand: dict[str, int]
    instances: dict[str, int]
    stranded_slices: int
    unpartitioned_slices: int
    idle_instance_slices: int
    gpus_per_node: int = 1

    def mig_parted_config(self) -> dict:
        """The layout as an NVIDIA mig-parted config (``version: v1``, ``mig-configs``): one entry per geometry;
        a layout with several geometries gets one config per distinct node (``capplan-<group>-<i>``), GPUs
        filled in layout order and listed by index within the node, the node's unneeded GPUs left without MIG.
        A node label ``nvidia.com/mig.config`` selects the config."""
        if len(self.layout) == 1:
            key = self.name if self.name != "custom" else f"capplan-{self.node_group}".lower()
            return {"version": "v1", "mig-configs": {key: [
                {"devices": "all", "mig-enabled": True, "mig-devices": dict(self.layout[0][0])}]}}
        per_gpu = [g for g, n in self.layout for _ in range(n)]
        configs: dict[str, list] = {}
        for k in range(self.nodes):
            chunk = per_gpu[k * self.gpus_per_node:(k + 1) * self.gpus_per_node]
            entries: list[dict] = []
            for idx, g in enumerate(chunk):
                if entries and entries[-1]["mig-devices"] == g:
                    entries[-1]["devices"].append(idx)
                else:
                    entries.append({"devices": [idx], "mig-enabled": True, "mig-devices": dict(g)})
            if len(chunk) < self.gpus_per_node:  # the node's GPUs the layout does not need stay whole
                entries.append({"devices": list(range(len(chunk), self.gpus_per_node)), "mig-enabled": False})
            if entries not in configs.values():
                configs[f"capplan-{self.node_group}-{len(configs)}".lower()] = entries
        return {"version": "v1", "mig-configs": configs}


def named_layout(spec: GpuModelSpec, geometry: dict[str, int]) -> str:
    """The MIG manager's name of a one-geometry layout (module docstring), else ``custom``."""
    if len(geometry) == 1:
        (name, k), = geometry.items()
        if k == spec.profile(name).max_count:
            return f"all-{name}"
    by_slices = {}
    for p in spec.mig_profiles:
        by_slices.setdefault(p.slices, p.name)  # the first listed (the smallest memory) of each slice count
    if all(s in by_slices for s in (1, 2, 3)) and geometry == {by_slices[1]: 2, by_slices[2]: 1, by_slices[3]: 1}:
        return "all-balanced"
    return "custom"


def recommend_layout(spec: GpuModelSpec, demand: dict[str, int], node_group: str | None = None) -> MigLayout:
    """The layout of fewest GPUs covering ``demand`` (peak instances per profile name) on ``spec``, then the
    fewest distinct geometries (module docstring, rule 4; ``scipy.optimize.milp``). Raises ``ValueError`` for an
    empty or negative demand or a model without MIG, ``UnknownGpuModel`` for an unknown profile, and
    ``RuntimeError`` when the solver fails."""
    for name, k in demand.items():
        spec.profile(name)
        if k < 0:
            raise ValueError(f"demand for {name} must be >= 0, got {k}")
    demand = {k: int(v) for k, v in demand.items() if v > 0}
    if not demand:
        raise ValueError(f"no fractional demand to lay out on {spec.name}")
    geos = geometries(spec)
    names = list(demand)
    a = np.array([[g.get(p, 0) for g in geos] for p in names], float)
    d = np.array([demand[p] for p in names], float)
    n = len(geos)
    ub = float(sum(demand.values()))
    first = milp(np.ones(n), integrality=np.ones(n), bounds=Bounds(0, ub),
                 constraints=[LinearConstraint(a, d, np.inf)])
    if not first.success:
        raise RuntimeError(f"MIG layout for {spec.name}: solver failed ({first.message})")
    gpus = int(round(first.fun))
    # stage 2: at that GPU count, fewest distinct geometries (binary y_g >= x_g / gpus); below one geometry's
    # worth, fewest slices in instances of profiles nobody asked for
    spare = np.array([sum(k * spec.profile(p).slices for p, k in g.items() if p not in demand) for g in geos], float)
    c = np.concatenate([spare / (compute_slices(spec) * gpus + 1), np.ones(n)])
    cons = [LinearConstraint(np.hstack([a, np.zeros_like(a)]), d, np.inf),
            LinearConstraint(np.concatenate([np.ones(n), np.zeros(n)])[None, :], gpus, gpus),
            LinearConstraint(np.hstack([np.eye(n), -gpus * np.eye(n)]), -np.inf, 0)]
    second = milp(c, integrality=np.ones(2 * n), bounds=Bounds(0, np.concatenate([np.full(n, gpus), np.ones(n)])),
                  constraints=cons)
    x = np.round((second.x if second.success else first.x)[:n]).astype(int)
    layout = [(geos[i], int(x[i])) for i in np.flatnonzero(x)]
    layout.sort(key=lambda gn: (-gn[1], sorted(gn[0].items())))
    held = {p.name: sum(g.get(p.name, 0) * k for g, k in layout) for p in spec.mig_profiles}
    held = {k: v for k, v in held.items() if v}
    slices = {p.name: p.slices for p in spec.mig_profiles}
    total = compute_slices(spec) * gpus
    partitioned = sum(slices[p] * k for p, k in held.items())
    used = sum(slices[p] * k for p, k in demand.items())
    name = named_layout(spec, layout[0][0]) if len(layout) == 1 else "custom"
    group = node_group or spec.name
    return MigLayout(model=spec.name, node_group=group, layout=layout, name=name, gpus=gpus,
                     nodes=math.ceil(gpus / spec.gpus_per_node), demand=demand, instances=held,
                     stranded_slices=total - used, unpartitioned_slices=total - partitioned,
                     idle_instance_slices=partitioned - used, gpus_per_node=spec.gpus_per_node)


def recommend_sharing(model: str, shares, mode: str = "mps") -> SharingSetting:
    """A time-slicing/MPS setting for a model without MIG from the shares (fractions of one GPU, 0 < s <= 1) of
    the fractional requests that may run on it: ``replicas`` = the most requests of the smallest share one GPU
    holds, ``floor(1 / min share)``, at most :data:`MAX_MPS_CLIENTS` under MPS; 1 (no sharing) when there is
    no fractional request. So the pod count per GPU never binds before the shares do. Raises ``ValueError`` for a
    share outside (0, 1]."""
    s = np.asarray(list(shares), float)
    if s.size and ((s <= 0) | (s > 1)).any():
        raise ValueError(f"{model}: shares must be within (0, 1], got {s[(s <= 0) | (s > 1)][:3].tolist()}")
    s = s[s < 1]
    if not s.size:
        return SharingSetting(model=model, mode=mode, replicas=1, why="no fractional request: no sharing")
    k = int(math.floor(1 / s.min() + 1e-9))
    cap = MAX_MPS_CLIENTS if mode == "mps" else 1024
    return SharingSetting(model=model, mode=mode, replicas=min(k, cap),
                          why=f"floor(1 / smallest share {s.min():g})" + (f", capped at {cap}" if k > cap else ""))


def recommend(history: pd.DataFrame, series: list[FractionalSeries], spec: GpuModelSpec,
              node_group: str | None = None) -> MigLayout | SharingSetting:
    """A MIG layout for ``spec`` when it has MIG profiles (:func:`peak_demand`, :func:`recommend_layout`),
    else a sharing setting (:func:`recommend_sharing`) from the series' shares (``memory_gb`` as a share of
    the model's memory when larger). Raises as those do."""
    if spec.mig_profiles:
        return recommend_layout(spec, peak_demand(history, series, spec), node_group)
    shares = [max(s.share or 0.0, (s.memory_gb or 0.0) / spec.memory_gb) for s in series
              if s.series_id in set(history["series_id"])]
    return recommend_sharing(spec.name, [min(x, 1.0) for x in shares if x > 0])


__all__ = ["FractionalSeries", "MigLayout", "geometries", "profile_for", "peak_demand", "recommend_layout",
           "recommend_sharing", "recommend", "named_layout", "compute_slices", "MAX_MPS_CLIENTS"]
