"""GPU-model selection in PromQL: the ``gpu_product`` selector of a template turned into label matchers
on the node labels of NVIDIA GPU Feature Discovery (GFD) and on dcgm-exporter's ``modelName``, and the
per-model queries of kube-state-metrics (capacity and requests in GPU-equivalents).

**Why node labels.** Every NVIDIA GPU model is advertised under the same resource name
(``nvidia.com/gpu``); only GFD's node label ``nvidia.com/gpu.product`` tells them apart
(NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery/README.md, "Generated Labels").
kube-state-metrics exports it as ``label_nvidia_com_gpu_product`` on ``kube_node_labels`` when
``--metric-labels-allowlist=nodes=[nvidia.com/gpu.product,...]`` lists it, and a pod's
``nodeSelector`` as ``nodeselector_nvidia_com_gpu_product`` on ``kube_pod_nodeselectors`` (opt-in
family; kube-state-metrics docs/metrics/workload/pod-metrics.md).

**One model, several spellings.** GFD appends ``-SHARED`` to the product when time-slicing or MPS is
on and, under the single MIG strategy, ``-MIG-<profile>`` (``NVIDIA-A100-SXM4-80GB-MIG-1g.10gb``;
``internal/lm/resource.go``). A ``gpu_product`` selector names base products (``|``-separated, suffixes
stripped) and matches them exactly, with either suffix. A ``gpu_model`` selector names a catalogue entry
(``A100-80GB``; :data:`optimizer.book.gpus.BUILTIN_CATALOGUE`) and matches its ``product_labels``
case-insensitively, with or without the ``NVIDIA-``/``Tesla-`` prefix (a model added or relabelled in the
config's catalogue is selected with ``gpu_product``). dcgm-exporter names the same GPU with spaces
(``modelName="NVIDIA A100-SXM4-80GB"``, NVML's name) where GFD has hyphens, so its matcher accepts
either.

**GPU-equivalents.** A unit of ``nvidia.com/gpu`` counts 1 on a whole-GPU node, ``k / slices_per_gpu``
on a single-strategy MIG node whose product ends in ``-MIG-<k>g.<m>gb`` (there ``nvidia.com/gpu`` is a
MIG device), and ``1 / shared_replicas`` on a ``-SHARED`` node (the device plugin's
``sharing.timeSlicing.resources[].replicas``: ``replicas`` units per physical GPU; GFD's
``nvidia.com/gpu.replicas``). A mixed-strategy MIG resource ``nvidia.com/mig-<k>g.<m>gb`` counts
``k / slices_per_gpu``. Compute-slice counts of MIG profiles are 1, 2, 3, 4 and 7 (NVIDIA MIG User
Guide, "Supported MIG Profiles").
"""

from __future__ import annotations

import re

from capplan.errors import InputError
from optimizer.book.gpus import BUILTIN_CATALOGUE, normalise_model_name

#: a Kubernetes label value (RFC 1123-like, at most 63 characters): what GFD writes in gpu.product
LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
SUFFIX_RE = re.compile(r"(-MIG-\d+g\.\d+gb)?(-SHARED)?$")
MIG_SLICES = (1, 2, 3, 4, 7)
NODE_LABEL = "label_nvidia_com_gpu_product"
SELECTOR_LABEL = "nodeselector_nvidia_com_gpu_product"
GPU_RESOURCES = 'resource=~"nvidia_com_gpu|nvidia_com_gpu_shared"'
SUFFIXES = "(-MIG-[0-9]+g[.][0-9]+gb)?(-SHARED)?"


def base_products(spec: str, template: str) -> list[str]:
    """The base GFD products of a ``gpu_product`` selector value (``|``-separated; each one's
    ``-SHARED`` / ``-MIG-<profile>`` suffix stripped), in order, without repeats.

    Raises InputError naming the template when a value is empty or not a Kubernetes label value
    (so nothing in it can change the query)."""
    out: list[str] = []
    for raw in str(spec).split("|"):
        p = raw.strip()
        if not LABEL_VALUE_RE.match(p):
            raise InputError(f"template {template!r}: selector.gpu_product {raw!r} is not a GPU product label value "
                             "such as NVIDIA-A100-SXM4-80GB (several separated by |)")
        base = SUFFIX_RE.sub("", p) or p
        if base not in out:
            out.append(base)
    return out


def model_products(name: str, template: str) -> list[str]:
    """The product spellings (upper-case, no vendor prefix) of catalogue model ``name`` (in any spelling
    :func:`optimizer.book.gpus.normalise_model_name` reads). Raises InputError naming the template when
    the model is not in the built-in catalogue."""
    model = normalise_model_name(str(name))
    if model not in BUILTIN_CATALOGUE:
        raise InputError(f"template {template!r}: selector.gpu_model {name!r} is not a catalogue GPU model; known: "
                         f"{', '.join(BUILTIN_CATALOGUE)} (or select the GFD product with selector.gpu_product)")
    out = [model.upper()]
    for label in BUILTIN_CATALOGUE[model].product_labels:
        if label not in out:
            out.append(label)
    for p in out:
        if not LABEL_VALUE_RE.match(p):
            raise InputError(f"template {template!r}: catalogue model {model!r} has product label {p!r}, which is not "
                             "a label value; select the model with selector.gpu_product")
    return out


def patterns(key: str, value: str, template: str) -> tuple[str, str]:
    """(GFD base-product pattern, dcgm-exporter ``modelName`` pattern) of a model selector: ``key``
    ``gpu_product`` (exact base products) or ``gpu_model`` (a catalogue model, case-insensitive,
    optional vendor prefix). The product pattern has no suffix: :func:`product_regex` adds them.
    Raises InputError as :func:`base_products` / :func:`model_products`."""
    if key == "gpu_product":
        bases = base_products(value, template)
        return base_regex(bases), model_name_regex(bases)
    names = model_products(value, template)
    return f"(?i)((NVIDIA|TESLA)-)?{base_regex(names)}", f"(?i)((NVIDIA|TESLA)[- ])?{model_name_regex(names)}"


def base_regex(bases: list[str]) -> str:
    """RE2 pattern (PromQL anchors it) of the GFD base products ``bases``, without suffixes."""
    return "(" + "|".join(b.replace(".", "[.]") for b in bases) + ")"


def product_regex(core: str) -> str:
    """The GFD product values of base pattern ``core``, with either suffix."""
    return core + SUFFIXES


def model_name_regex(bases: list[str]) -> str:
    """RE2 pattern of dcgm-exporter's ``modelName`` for ``bases``: each hyphen a hyphen or a space."""
    return "(" + "|".join(b.replace(".", "[.]").replace("-", "[- ]") for b in bases) + ")"


def share_vector(metric: str, by: str, label: str, core: str, slices: int, replicas: int, extra: str = "") -> str:
    """Per-entity (``by``) GPU-equivalents of one ``nvidia.com/gpu`` unit on the entities of ``metric``
    (value 1 each) whose ``label`` is base product ``core``: whole (no suffix), ``-MIG-<k>g...``
    (k / slices) or ``-SHARED`` (1 / replicas). ``extra``: more matchers, starting with ``, ``."""
    terms = [f'max by ({by}) ({metric}{{{label}=~"{core}"{extra}}})']
    terms += [f'max by ({by}) ({metric}{{{label}=~"{core}-MIG-{k}g[.].+"{extra}}}) * {k} / {slices}'
              for k in MIG_SLICES if k <= slices]
    terms.append(f'max by ({by}) ({metric}{{{label}=~"{core}-SHARED"{extra}}}) / {replicas}')
    return "(" + " or ".join(terms) + ")"


def any_vector(metric: str, by: str, label: str, core: str, extra: str = "") -> str:
    """1 per entity (``by``) of ``metric`` whose ``label`` is base product ``core``, whatever its suffix."""
    return f'max by ({by}) ({metric}{{{label}=~"{product_regex(core)}"{extra}}})'


def _mig(k: int) -> str:
    return f'resource=~"nvidia_com_mig_{k}g_.+"'


def capacity(core: str, slices: int, replicas: int) -> str:
    """Allocatable GPU-equivalents of the nodes of base product ``core`` (before the alive term):
    ``kube_node_status_allocatable`` of ``nvidia_com_gpu`` / ``nvidia_com_gpu_shared`` times the node's
    share, plus each mixed-strategy MIG resource times its slices / ``slices``. One value per node and
    resource (``max by``), so two kube-state-metrics replicas count once."""
    share = share_vector("kube_node_labels", "node", NODE_LABEL, core, slices, replicas)
    anyn = any_vector("kube_node_labels", "node", NODE_LABEL, core)
    terms = [f"max by (node, resource) (kube_node_status_allocatable{{{GPU_RESOURCES}}}) * on(node) group_left() "
             f"{share}"]
    terms += [f"max by (node, resource) (kube_node_status_allocatable{{{_mig(k)}}}) * on(node) group_left() {anyn}"
              f" * {k} / {slices}" for k in MIG_SLICES if k <= slices]
    return "sum(" + " or ".join(terms) + ")"


def requests(core: str, slices: int, replicas: int, sel_c: str, ns_c: str) -> str:
    """GPU-equivalents requested on base product ``core`` (before the alive term): Running and Pending pods
    placed on a node of the model (``kube_pod_info`` node, its ``kube_node_labels`` product), and
    Pending pods with no node whose ``nodeSelector`` names the model (``kube_pod_nodeselectors``).
    A pending pod that names no model is no model's demand. Requests are reduced per
    (namespace, pod, container, resource) and pod state per (namespace, pod), as in
    ``k8s_gpus_requested``. ``sel_c``/``ns_c``: the other selector matchers (``, `` first)."""
    share_n = share_vector("kube_node_labels", "node", NODE_LABEL, core, slices, replicas)
    any_n = any_vector("kube_node_labels", "node", NODE_LABEL, core)
    share_p = share_vector("kube_pod_nodeselectors", "namespace, pod", SELECTOR_LABEL, core, slices, replicas, ns_c)
    any_p = any_vector("kube_pod_nodeselectors", "namespace, pod", SELECTOR_LABEL, core, ns_c)
    placed = f'kube_pod_info{{node!=""{ns_c}}}'
    active = f'max by (namespace, pod) (kube_pod_status_phase{{phase=~"Running|Pending"{ns_c}}} == 1)'
    waiting = (f'(max by (namespace, pod) (kube_pod_status_phase{{phase="Pending"{ns_c}}} == 1) '
               f"unless on(namespace, pod) {placed})")

    def req(res: str) -> str:
        return f"max by (namespace, pod, container, resource) (kube_pod_container_resource_requests{{{res}{sel_c}}})"

    on_pod = "* on(namespace, pod) group_left()"
    terms = [f"{req(GPU_RESOURCES)} {on_pod} ({active} * max by (namespace, pod) ({placed} * on(node) group_left() "
             f"{share_n}))",
             f"{req(GPU_RESOURCES)} {on_pod} ({waiting} * {share_p})"]
    for k in (k for k in MIG_SLICES if k <= slices):
        terms.append(f"{req(_mig(k))} {on_pod} ({active} * max by (namespace, pod) ({placed} * on(node) "
                     f"group_left() {any_n})) * {k} / {slices}")
        terms.append(f"{req(_mig(k))} {on_pod} ({waiting} * {any_p}) * {k} / {slices}")
    return "sum(" + " or ".join(terms) + ")"
