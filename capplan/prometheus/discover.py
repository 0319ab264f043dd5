"""Find what to plan in a Prometheus-compatible store: GPU namespaces, Volcano queues and Kueue
ClusterQueues with recent demand, and a starter ``capplan.yaml`` for them.

Each kind is found with one query over ``lookback`` ending at ``at`` (the peak of the
deduplicated demand, :mod:`capplan.promql.templates`):

* **namespaces**: ``kube_pod_container_resource_requests`` of ``nvidia_com_gpu`` and
  MIG resources (``nvidia_com_mig_*``), per namespace and resource;
* **Volcano queues**: ``volcano_queue_request_scalar_resources`` of ``nvidia.com/*``
  per ``queue_name`` (milli-units / 1000);
* **Kueue ClusterQueues**: ``kueue_cluster_queue_resource_usage`` of ``nvidia.com/*``
  per ``cluster_queue``, and every ClusterQueue ``kueue_pending_workloads`` names
  (a queue whose work never got admitted has no usage yet).

GPU models, MIG resources and Kueue flavors come from :mod:`capplan.prometheus.gpu_inventory`.

The starter config has one series per namespace (``k8s_gpus_requested``, MIG resources
as GPU shares), a whole-cluster series, per queue its allocated/admitted and
pending GPUs, and per GPU model its capacity and requests (and per Kueue flavor that
names a model its admitted GPUs), those with ``gpu_model`` set; header values are referred to by environment variable
(``CAPPLAN_HEADER_<NAME>``), never written.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import yaml

from capplan.errors import InputError
from capplan.prometheus.client import PrometheusClient
from capplan.prometheus.gpu_inventory import GpuInventory, inventory, set_namespace_models, starter_series
from capplan.prometheus.parse import instant
from capplan.promql.render import mig_share

_NS_Q = ('max_over_time((sum by (namespace, resource) (max by (namespace, pod, container, resource) '
         '(last_over_time(kube_pod_container_resource_requests{{resource=~"nvidia_com_gpu|nvidia_com_mig_.+"}}'
         '[{w}])) * on(namespace, pod) group_left() max by (namespace, pod) '
         '(last_over_time(kube_pod_status_phase{{phase=~"Running|Pending"}}[{w}]) == 1)))[{lb}:{w}])')
_VQ = ('max_over_time((max by (queue_name, resource) (last_over_time(volcano_queue_request_scalar_resources'
       '{{resource=~"nvidia[.]com/.+"}}[{w}])))[{lb}:{w}]) / 1000')
_KQ = ('max_over_time((max by (cluster_queue, resource) (last_over_time(kueue_cluster_queue_resource_usage'
       '{{resource=~"nvidia[.]com/.+"}}[{w}])))[{lb}:{w}])')
_KP = 'max_over_time((max by (cluster_queue) (last_over_time(kueue_pending_workloads[{w}])))[{lb}:{w}])'


@dataclass
class Found:
    """What :func:`discover` found: ``namespaces`` {namespace: {resource: peak GPUs (MIG: GPU
    shares)}}, ``volcano`` {queue: peak requested GPUs}, ``kueue`` {ClusterQueue: peak admitted
    GPUs, or 0 when only pending workloads were seen}, ``gpus``: GPU models, MIG resources and Kueue
    flavors (:mod:`capplan.prometheus.gpu_inventory`)."""

    namespaces: dict[str, dict[str, float]] = field(default_factory=dict)
    volcano: dict[str, float] = field(default_factory=dict)
    kueue: dict[str, float] = field(default_factory=dict)
    gpus: GpuInventory = field(default_factory=GpuInventory)


def discover(client: PrometheusClient, at: int, lookback_s: int, scrape_s: int = 60,
             progress: Callable[[str], None] | None = None) -> Found:
    """Namespaces, Volcano queues and Kueue ClusterQueues with GPU demand in ``(at - lookback_s, at]``
    (epoch seconds); ``progress(line)`` is told before each query. Raises PrometheusError when the
    store refuses a query or does not answer (after the client's retries)."""
    w, lb = f"{scrape_s}s", f"{lookback_s}s"
    found = Found()
    told = progress or (lambda line: None)
    for lab, v in instant(client, _NS_Q.format(w=w, lb=lb), at, "namespaces", told):
        if v > 0 and lab.get("namespace"):
            found.namespaces.setdefault(lab["namespace"], {})[lab.get("resource", "nvidia_com_gpu")] = \
                v * mig_share(lab.get("resource", ""), 7)
    for lab, v in instant(client, _VQ.format(w=w, lb=lb), at, "volcano queues", told):
        if v > 0 and lab.get("queue_name"):
            found.volcano[lab["queue_name"]] = max(v, found.volcano.get(lab["queue_name"], 0.0))
    for lab, v in instant(client, _KQ.format(w=w, lb=lb), at, "kueue clusterqueues", told):
        if lab.get("cluster_queue"):
            found.kueue[lab["cluster_queue"]] = max(v, found.kueue.get(lab["cluster_queue"], 0.0))
    for lab, v in instant(client, _KP.format(w=w, lb=lb), at, "kueue pending workloads", told):
        if v > 0 and lab.get("cluster_queue"):
            found.kueue.setdefault(lab["cluster_queue"], 0.0)
    found.gpus = inventory(client, at, lookback_s, scrape_s, told)
    return found


def _kube_resource(ksm: str) -> str:
    """kube-state-metrics' ``nvidia_com_mig_1g_10gb`` -> the Kubernetes name ``nvidia.com/mig-1g.10gb``."""
    m = re.fullmatch(r"nvidia_com_mig_(\d+g)_(\d+gb)", ksm)
    return f"nvidia.com/mig-{m.group(1)}.{m.group(2)}" if m else "nvidia.com/gpu"


_RFC1123 = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


_ID_SAFE = re.compile(r"[A-Za-z0-9_.-]{1,63}")


def _slug(text: str) -> str:
    """An id part for a label value: itself when it holds only letters, digits and ``_.-`` (every Kubernetes
    namespace, every resource name such as ``mig_1g_10gb``), at most 63 characters; else those characters with
    a 6-hex-digit hash of the whole value after it, so two values never share an id (``team a`` and
    ``team%a``)."""
    if _ID_SAFE.fullmatch(text):
        return text
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:50] or "x"
    return f"{base}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:6]}"


def header_env(name: str) -> str:
    """The environment variable a starter config names for header ``name`` (``CAPPLAN_HEADER_X_SCOPE_ORGID``)."""
    return "CAPPLAN_HEADER_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def starter_config(found: Found, url: str, header_names: list[str], store: str = "store",
                   scrape_interval: str = "1m") -> dict:
    """A ``capplan.yaml`` document for ``found``: ``prometheus`` (url, scrape interval, headers by
    environment variable), ``store`` and one series per namespace/resource, the whole cluster and
    each queue (allocated or admitted, and pending), all ``step: 5m``."""
    series = []
    for ns in sorted(found.namespaces):
        for res in sorted(found.namespaces[ns]):
            mig = res != "nvidia_com_gpu"
            s = {"id": f"pool/{_slug(ns)}" + (f"/{_slug(res.replace('nvidia_com_', ''))}" if mig else ""),
                 "template": "k8s_gpus_requested", "selector": {"namespace": ns}}
            if _RFC1123.fullmatch(ns):  # where its KEDA/HPA objects go; another value is no namespace
                s["namespace"] = ns
            if mig:
                s["params"] = {"resource": _kube_resource(res)}
            series.append(s)
    if found.namespaces:
        series.append({"id": "cluster/gpus", "template": "k8s_gpus_requested"})
    for q in sorted(found.volcano):
        series.append({"id": f"volcano/{_slug(q)}", "template": "volcano_queue_allocated_gpus",
                       "selector": {"queue_name": q}})
        series.append({"id": f"volcano/{_slug(q)}/pending", "template": "volcano_queue_pending_gpus",
                       "selector": {"queue_name": q}})
    for q in sorted(found.kueue):
        series.append({"id": f"kueue/{_slug(q)}", "template": "kueue_admitted_gpus", "selector": {"cluster_queue": q}})
        series.append({"id": f"kueue/{_slug(q)}/pending", "template": "kueue_pending_gpus",
                       "selector": {"cluster_queue": q}})
    set_namespace_models(series, found.gpus)  # a namespace that ran on one GPU model only
    series += starter_series(found.gpus)  # per GPU model and Kueue flavor, with gpu_model
    for s in series:
        s.update(kind="training", unit="gpu", step="5m", timezone="UTC")
    prom = {"url": url, "scrape_interval": scrape_interval}
    if header_names:
        prom["headers"] = {h: {"env": header_env(h)} for h in header_names}
    return {"store": store, "prometheus": prom, "series": series}


#: the first line of every config :func:`dump` writes; ``capplan discover`` replaces only files that start with it
MARKER = "# Written by `capplan discover`"
#: the last line of every config :func:`dump` writes, with the SHA-256 of the text above it: a file whose text no
#: longer matches it was edited by hand, and is not replaced
DIGEST = "# capplan discover digest: sha256:"
#: the most bytes of an existing ``--out`` read to check it (capplan's configs are far smaller)
CHECK_BYTES = 4 * 1024 * 1024


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def edited(text: str) -> bool:
    """True when ``text`` (a file that starts with :data:`MARKER`) is not exactly what :func:`dump` wrote: its
    :data:`DIGEST` line is missing or does not match the text above it."""
    body, sep, tail = text.rstrip("\n").rpartition("\n" + DIGEST)
    return not sep or "\n" in tail or _digest(body + "\n") != tail.strip()


def check_out(path: Path, force: bool = False) -> None:
    """Refuse to replace ``path`` (``capplan discover --out``) unless it is absent, ``force`` is set, or
    it is a regular file (not a symlink) whose first line is :data:`MARKER` and whose text is still what discover
    wrote (its :data:`DIGEST` line matches: a hand edit is never overwritten).

    Raises InputError naming the file and the options to use (``--out other.yaml`` or ``--force``)."""
    if force or not (path.exists() or path.is_symlink()):
        return
    why = None
    if path.is_symlink():
        why = "is a symlink"
    elif not path.is_file():
        why = "is not a regular file"
    else:
        try:
            with path.open("rb") as f:
                data = f.read(CHECK_BYTES + 1)
        except OSError as exc:
            raise InputError(f"--out {path}: cannot read it to check who wrote it ({exc.strerror or exc})") from None
        if not data.startswith(MARKER.encode()):
            why = "exists and was not written by capplan discover"
        elif len(data) > CHECK_BYTES or edited(data.decode("utf-8", "replace")):
            why = "was edited since capplan discover wrote it"
    if why:
        raise InputError(f"--out {path}: {why}; it is left as it is: name another file (--out other.yaml) or "
                         "pass --force to replace it")


def fitted(found: Found, fits: Callable[[Found], bool]) -> tuple[Found, list[str]]:
    """The largest part of ``found`` whose starter config ``fits`` (e.g. its text within capplan's config
    size limit, :data:`capplan.config.yaml_bounds.MAX_BYTES`) and the names left out (``namespace <name>``,
    ``volcano queue <name>``, ``kueue clusterqueue <name>``): the namespaces and queues with the largest
    peak demand are kept (ties by kind and name). All of ``found`` when it fits."""
    items = ([(max(per.values()), "namespace", n) for n, per in found.namespaces.items()]
             + [(v, "volcano queue", n) for n, v in found.volcano.items()]
             + [(v, "kueue clusterqueue", n) for n, v in found.kueue.items()])
    items.sort(key=lambda t: (-t[0], t[1], t[2]))

    def keep(k: int) -> Found:
        kept = {(kind, n) for _, kind, n in items[:k]}
        return replace(found, namespaces={n: per for n, per in found.namespaces.items() if ("namespace", n) in kept},
                       volcano={n: v for n, v in found.volcano.items() if ("volcano queue", n) in kept},
                       kueue={n: v for n, v in found.kueue.items() if ("kueue clusterqueue", n) in kept})

    if fits(found):
        return found, []
    lo, hi = 0, len(items) - 1  # the most items whose config fits: binary search on the count
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(keep(mid)):
            lo = mid
        else:
            hi = mid - 1
    return keep(lo), [f"{kind} {n}" for _, kind, n in items[lo:]]


def dump(doc: dict) -> str:
    """YAML text of a starter config, with a header comment (its first line is :data:`MARKER`) and a last line
    :data:`DIGEST` of the text above it."""
    head = (f"{MARKER}: GPU namespaces, Volcano queues and Kueue ClusterQueues with recent\n"
            "# demand. Pull history with `capplan ingest --config <this file>`, then `capplan plan --config ...`.\n")
    text = head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    return f"{text}{DIGEST}{_digest(text)}\n"
