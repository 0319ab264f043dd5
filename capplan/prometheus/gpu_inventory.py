"""What a heterogeneous cluster reports about its GPUs: the GPU models (GFD node labels through
kube-state-metrics, and dcgm-exporter's ``modelName``), the MIG resources and the Kueue ResourceFlavors,
found by ``capplan discover``, and the per-model series of the starter ``capplan.yaml``.

Each kind is one query over ``lookback`` ending at ``at`` (nodes and quotas as last seen in it):

* **GPU models**: ``kube_node_labels{label_nvidia_com_gpu_product!=""}`` (GFD's ``nvidia.com/gpu.product``,
  ``.memory``, ``.replicas``; kube-state-metrics exports them when ``--metric-labels-allowlist`` lists
  them) and ``kube_node_status_allocatable`` of ``nvidia_com_gpu``, ``nvidia_com_gpu_shared`` and
  ``nvidia_com_mig_*`` per node. A product is normalised to its catalogue name with
  :func:`optimizer.book.gpus.normalise_model_name` (``NVIDIA-A100-SXM4-80GB-MIG-1g.10gb`` -> ``A100-80GB``).
  GPUs are GPU-equivalents, as :mod:`capplan.promql.models` counts them: a single-strategy MIG device
  ``k / 7``, a time-sliced unit ``1 / nvidia.com/gpu.replicas``, a mixed-strategy ``nvidia.com/mig-<k>g.*``
  unit ``k / 7``.
* **dcgm-exporter**: physical GPUs per ``modelName`` (one per ``UUID``).
* **Namespaces' models**: the products of the nodes (as labelled above) that the namespace's GPU
  pods ran on in the lookback (``kube_pod_info`` node); a namespace that used one model only gets that
  ``gpu_model`` in the starter config.
* **Kueue flavors**: ``kueue_cluster_queue_nominal_quota`` (cohort, ClusterQueues, nominalQuota) and
  the peak of ``kueue_cluster_queue_resource_usage`` per flavor (both need Kueue's
  ``metrics.enableClusterQueueResources``). A flavor whose name normalises to a catalogue model found
  in the cluster (``a100-80gb`` -> ``A100-80GB``) is taken to be that model; ResourceFlavor node labels
  are not in Kueue's metrics, so other names stay unmapped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from capplan.prometheus.client import PrometheusClient
from capplan.prometheus.parse import instant
from capplan.promql.models import SUFFIX_RE
from capplan.promql.render import mig_share
from optimizer.book.gpus import normalise_model_name

SLICES = 7
_MIG_PRODUCT = re.compile(r"-MIG-((\d+)g\.\d+gb)")
_NODES = ('max by (node, label_nvidia_com_gpu_product, label_nvidia_com_gpu_replicas, label_nvidia_com_gpu_memory) '
          '(last_over_time(kube_node_labels{{label_nvidia_com_gpu_product!=""}}[{lb}]))')
_ALLOC = ('max by (node, resource) (last_over_time(kube_node_status_allocatable'
          '{{resource=~"nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.+"}}[{lb}]))')
_DCGM = ('count by (modelName) (max by (UUID, modelName) (last_over_time(DCGM_FI_DEV_GPU_UTIL[{lb}]) or '
         'last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[{lb}])))')
_NS_NODES = ('max by (namespace, node) (last_over_time(kube_pod_info{{node!=""}}[{lb}]) * on(namespace, pod) '
             'group_left() max by (namespace, pod) (last_over_time(kube_pod_container_resource_requests'
             '{{resource=~"nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.+"}}[{lb}])))')
_QUOTA = ('max by (cohort, cluster_queue, flavor, resource) (last_over_time(kueue_cluster_queue_nominal_quota'
          '{{resource=~"nvidia[.]com/.+"}}[{lb}]))')
_USAGE = ('max_over_time((sum by (flavor, resource) (max by (cluster_queue, flavor, resource) (last_over_time('
          'kueue_cluster_queue_resource_usage{{resource=~"nvidia[.]com/.+"}}[{w}]))))[{lb}:{w}])')


@dataclass
class GpuInventory:
    """``models`` {catalogue model: {products (raw GFD labels), nodes, gpus (GPU-equivalents allocatable),
    memory_mib, shared_replicas (when time-sliced nodes say), model_names, dcgm_gpus}};
    ``mig`` [{resource, profile, strategy (single/mixed), units, gpu_models}]; ``flavors`` {flavor:
    {cluster_queues, cohorts, nominal_quota (GPU-equivalents), peak_usage, gpu_model or None}};
    ``namespaces`` {namespace: [models its GPU pods ran on]}; ``notes``: what could not be read exactly."""

    models: dict[str, dict] = field(default_factory=dict)
    mig: list[dict] = field(default_factory=list)
    flavors: dict[str, dict] = field(default_factory=dict)
    namespaces: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.models or self.flavors)


def _model(raw: str) -> str:
    return normalise_model_name(raw)


def inventory(client: PrometheusClient, at: int, lookback_s: int, scrape_s: int = 60,
              progress: Callable[[str], None] | None = None) -> GpuInventory:
    """GPU models, MIG resources and Kueue flavors seen in ``(at - lookback_s, at]`` (epoch seconds; see
    the module docstring). Raises PrometheusError when the store refuses a query."""
    told = progress or (lambda line: None)
    w, lb = f"{scrape_s}s", f"{lookback_s}s"
    inv = GpuInventory()
    node_labels: dict[str, dict] = {}
    for lab, _ in instant(client, _NODES.format(lb=lb), at, "GPU node labels", told):
        node = lab.get("node", "")
        if node in node_labels and node_labels[node] != lab:
            inv.notes.append(f"node {node}: more than one GPU product in the lookback; counted as "
                             f"{node_labels[node].get('label_nvidia_com_gpu_product')}")
            continue
        node_labels.setdefault(node, lab)
    alloc: dict[str, dict[str, float]] = {}
    for lab, v in instant(client, _ALLOC.format(lb=lb), at, "allocatable GPUs", told):
        alloc.setdefault(lab.get("node", ""), {})[lab.get("resource", "")] = v
    mig: dict[tuple, dict] = {}
    unlabelled = sorted(n for n, lab in node_labels.items() if not lab.get("label_nvidia_com_gpu_product"))
    if unlabelled:  # GPU Feature Discovery's product label missing (not deployed, or not in ksm's allowlist)
        inv.notes.append(f"{len(unlabelled)} GPU node(s) without the nvidia.com/gpu.product label ({unlabelled[0]}"
                         f"{', ...' if len(unlabelled) > 1 else ''}): not counted in any GPU model; deploy GPU Feature "
                         "Discovery and add nvidia.com/gpu.product to kube-state-metrics' --metric-labels-allowlist")
    for node, lab in sorted(node_labels.items()):
        if lab.get("label_nvidia_com_gpu_product"):
            _add_node(inv, mig, node, lab, alloc.get(node, {}))
    inv.mig = [mig[k] for k in sorted(mig)]
    for lab, v in instant(client, _DCGM.format(lb=lb), at, "dcgm-exporter GPU models", told):
        if lab.get("modelName"):
            m = _entry(inv, _model(lab["modelName"]))
            m["model_names"].append(lab["modelName"])
            m["dcgm_gpus"] += int(v)
    if node_labels:
        for lab, _ in instant(client, _NS_NODES.format(lb=lb), at, "namespaces' GPU nodes", told):
            product = node_labels.get(lab.get("node", ""), {}).get("label_nvidia_com_gpu_product")
            if lab.get("namespace") and product:
                models = inv.namespaces.setdefault(lab["namespace"], [])
                if _model(product) not in models:
                    models.append(_model(product))
                    models.sort()
    for lab, v in instant(client, _QUOTA.format(lb=lb), at, "Kueue flavor quotas", told):
        f = _flavor(inv, lab.get("flavor", ""))
        if f is not None:
            f["nominal_quota"] += v * mig_share(lab.get("resource", ""), SLICES)
            for key, name in (("cluster_queues", "cluster_queue"), ("cohorts", "cohort")):
                if lab.get(name) and lab[name] not in f[key]:
                    f[key] = sorted([*f[key], lab[name]])
    for lab, v in instant(client, _USAGE.format(w=w, lb=lb), at, "Kueue flavor usage", told):
        f = _flavor(inv, lab.get("flavor", ""))
        if f is not None:
            f["peak_usage"] += v * mig_share(lab.get("resource", ""), SLICES)
    return inv


def _entry(inv: GpuInventory, model: str) -> dict:
    return inv.models.setdefault(model, {"products": [], "nodes": 0, "gpus": 0.0, "memory_mib": [],
                                         "model_names": [], "dcgm_gpus": 0})


def _add_node(inv: GpuInventory, mig: dict[tuple, dict], node: str, lab: dict, alloc: dict[str, float]) -> None:
    """Count one node (its GFD labels ``lab``, allocatable ``alloc`` {ksm resource: units}) in its model
    and its MIG units in ``mig`` {(resource, profile, strategy): entry}."""
    product = lab["label_nvidia_com_gpu_product"]
    model = _model(product)
    m = _entry(inv, model)
    if product not in m["products"]:
        m["products"].append(product)
    m["nodes"] += 1
    single = _MIG_PRODUCT.search(product)
    share = min(int(single.group(2)) / SLICES, 1.0) if single else 1.0
    replicas = lab.get("label_nvidia_com_gpu_replicas", "")
    if not single and product.endswith("-SHARED"):
        if replicas.isdigit() and int(replicas) > 0:
            share = 1 / int(replicas)
            if m.setdefault("shared_replicas", int(replicas)) != int(replicas):
                inv.notes.append(f"{model}: time-sliced nodes with different nvidia.com/gpu.replicas; the starter "
                                 "config's shared_replicas is the first one's")
        else:
            inv.notes.append(f"node {node}: {product} without nvidia.com/gpu.replicas (add it to kube-state-"
                             "metrics' --metric-labels-allowlist); its units counted as whole GPUs")
    elif not single and lab.get("label_nvidia_com_gpu_memory", "").isdigit():
        if int(lab["label_nvidia_com_gpu_memory"]) not in m["memory_mib"]:
            m["memory_mib"].append(int(lab["label_nvidia_com_gpu_memory"]))
    for res, units in sorted(alloc.items()):
        if res.startswith("nvidia_com_mig_"):
            m["gpus"] += units * mig_share(res, SLICES)
            k8s = re.sub(r"^nvidia_com_mig_(\d+g)_(\d+gb)$", r"nvidia.com/mig-\1.\2", res)
            key = (k8s, k8s.rsplit("mig-", 1)[-1], "mixed")
        else:
            m["gpus"] += units * share
            if not single:
                continue
            key = ("nvidia.com/gpu", single.group(1), "single")
        e = mig.setdefault(key, {"resource": key[0], "profile": key[1], "strategy": key[2], "units": 0.0,
                                 "gpu_models": []})
        e["units"] += units
        if model not in e["gpu_models"]:
            e["gpu_models"].append(model)


def _flavor(inv: GpuInventory, name: str) -> dict | None:
    if not name:
        return None
    if name not in inv.flavors:
        model = _model(name)
        inv.flavors[name] = {"cluster_queues": [], "cohorts": [], "nominal_quota": 0.0, "peak_usage": 0.0,
                             "gpu_model": model if model in inv.models else None}
    return inv.flavors[name]


def starter_series(inv: GpuInventory) -> list[dict]:
    """Series for a starter config, each with ``gpu_model``: per GPU model with GFD products, its capacity
    (``k8s_gpus_allocatable_by_model``) and requests (``k8s_gpus_requested_by_model``), selected by its
    base products; per Kueue flavor mapped to a model, its admitted GPUs (``kueue_admitted_gpus``)."""
    out = []
    for model in sorted(inv.models):
        m = inv.models[model]
        bases = []
        for p in m["products"]:
            b = SUFFIX_RE.sub("", p) or p
            if b not in bases:
                bases.append(b)
        if not bases:
            continue
        params = {"shared_replicas": str(m["shared_replicas"])} if m.get("shared_replicas", 1) != 1 else {}
        for kind, template in (("capacity", "k8s_gpus_allocatable_by_model"),
                               ("requested", "k8s_gpus_requested_by_model")):
            s = {"id": f"gpu/{_slug(model)}/{kind}", "template": template,
                 "selector": {"gpu_product": "|".join(sorted(bases))}, "gpu_model": model}
            if params:
                s["params"] = dict(params)
            out.append(s)
    for name in sorted(inv.flavors):
        f = inv.flavors[name]
        if f["gpu_model"]:
            out.append({"id": f"kueue/flavor/{_slug(name)}", "template": "kueue_admitted_gpus",
                        "selector": {"flavor": name}, "gpu_model": f["gpu_model"]})
    return out


def set_namespace_models(series: list[dict], inv: GpuInventory) -> None:
    """Set ``gpu_model`` on each series selected by namespace alone (``k8s_gpus_requested``) whose
    namespace ran on one GPU model only in the lookback; others are left as they are (in place)."""
    for s in series:
        ns = s.get("selector", {}).get("namespace")
        models = inv.namespaces.get(ns, []) if s.get("template") == "k8s_gpus_requested" else []
        if len(models) == 1 and "gpu_model" not in s:
            s["gpu_model"] = models[0]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


def as_dict(inv: GpuInventory) -> dict:
    """The JSON keys ``capplan discover`` prints: ``gpu_models``, ``mig_resources``, ``kueue_flavors``,
    ``namespace_gpu_models`` (and ``gpu_notes`` when there are notes)."""
    doc = {"gpu_models": inv.models, "mig_resources": inv.mig, "kueue_flavors": inv.flavors,
           "namespace_gpu_models": inv.namespaces}
    if inv.notes:
        doc["gpu_notes"] = inv.notes
    return doc
