"""The named PromQL templates (the registry :func:`capplan.promql.render.render` renders).

Every demand template is built so that the stored number is exact whatever
repeats in the exporters' series:

* **One value per entity before summing.** kube-state-metrics requests are
  reduced with ``max by (namespace, pod, container)`` and pod phases with
  ``max by (namespace, pod)``, so a pod whose request series gains a ``node``
  label when it is scheduled, a pod recreated under the same name (new
  ``uid``) and two kube-state-metrics replicas (two ``instance`` labels) each
  count once. dcgm-exporter series are reduced per GPU entity
  (``max by (UUID, GPU_I_ID)``), so a GPU reported under two label sets for a
  while (dcgm-exporter's label-set flap) counts once. Volcano and Kueue
  gauges are reduced per queue (and flavor) the same way (HA replicas).
* **0 when idle, missing when the selection is gone.** Each demand template
  ends in ``or 0 * group(<the exporter's own series of the same selection>)``
  (:data:`ALIVE`): when the selected GPUs, queue, flavor, namespace or model
  report but nothing is requested the step is 0; when they report nothing (a
  node drained, its exporter dead, a label renamed, a queue deleted) the step
  has no value, whatever the rest of the cluster reports, and a later pull of
  nothing says ``stopped`` (:mod:`capplan.prometheus.coverage`,
  :mod:`capplan.sources.prometheus`). The alive term carries the selector's
  matchers: for dcgm-exporter all of them (its series carry the workload
  labels only while a pod holds the GPU, so an idle *namespace* selection of a
  dcgm template is missing, not 0: dcgm-exporter cannot tell idle from gone);
  for kube-state-metrics the namespace (``kube_namespace_status_phase`` or any
  pod of it), the node (``kube_node_info``/``kube_node_labels``) and the GPU
  model (``kube_node_labels`` of its product); for Volcano every
  ``volcano_queue_*`` series of the queue; for Kueue the ClusterQueue's status,
  nominal quota or usage with the selector's labels (a ``flavor`` selection is
  alive while the flavor has quota or usage).
* **GPU models.** The ``*_by_model`` templates and the ``dcgm_*`` templates take
  ``selector.gpu_product`` (GFD product labels, ``|``-separated, e.g.
  ``NVIDIA-A100-SXM4-80GB``), matched with GFD's ``-SHARED``/``-MIG-<profile>``
  suffixes and as dcgm-exporter's ``modelName`` (:mod:`capplan.promql.models`).
  Kueue models are flavors: select them with ``selector.flavor``.
* **MIG.** ``resource`` (default ``nvidia.com/gpu``) selects what is counted;
  a MIG resource ``nvidia.com/mig-<N>g.<M>gb`` counts ``N / slices_per_gpu``
  GPU-equivalents per instance (``slices_per_gpu`` 7: A100, H100, H200, B200;
  4: A30; NVIDIA MIG User Guide, "Supported MIG Profiles"). The busy-GPU
  template weighs each MIG instance's utilisation by its slices the same way,
  read from dcgm-exporter's ``GPU_I_PROFILE`` label.

Metric names and labels, with the versions they are documented for:

* kube-state-metrics v2 (``docs/metrics/workload/pod-metrics.md``):
  ``kube_pod_container_resource_requests{namespace, pod, container, node,
  resource, unit}`` (resource ``nvidia_com_gpu``: the Kubernetes name with
  ``.``/``/``/``-`` turned into ``_``) and ``kube_pod_status_phase{namespace,
  pod, uid, phase}``.
* dcgm-exporter (``DCGM_FI_DEV_GPU_UTIL`` percent, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
  ratio, labels ``gpu, UUID, device, modelName, Hostname`` and for MIG
  ``GPU_I_ID, GPU_I_PROFILE``; NVIDIA dcgm-exporter README).
* Volcano scheduler (``pkg/scheduler/metrics/queue.go``, v1.7 and later):
  ``volcano_queue_allocated_scalar_resources{queue_name, resource}`` and
  ``volcano_queue_request_scalar_resources{queue_name, resource}``, in
  milli-units (Volcano keeps scalar resources as ``Quantity.MilliValue()``:
  1 GPU = 1000); resource is the Kubernetes name (``nvidia.com/gpu``).
* Kueue (``pkg/metrics/metrics.go``; site page "Prometheus Metrics"):
  ``kueue_cluster_queue_resource_usage`` and
  ``kueue_cluster_queue_resource_reservation{cohort, cluster_queue, flavor,
  resource}`` (v0.5 and later, only with ``metrics.enableClusterQueueResources:
  true``), ``kueue_local_queue_resource_usage{name, namespace, flavor,
  resource}`` (v0.10 and later, alpha, feature gate ``LocalQueueMetrics``),
  ``kueue_pending_workloads{cluster_queue, status}`` (a count of workloads,
  all versions) and ``kueue_cluster_queue_resource_pending`` (the pending
  requests as resources; added by kubernetes-sigs/kueue#10485, releases after
  v0.15 only). Resource values are in the resource's own unit (GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Template:
    """A named query: ``promql`` is a ``str.format`` pattern with ``{sel}`` (matchers,
    possibly empty), ``{sel_c}`` (``, `` + matchers, or empty), ``{ns_c}`` (the
    selector's namespace matcher only), the template's ``params`` and the derived
    fields of :func:`capplan.promql.render.render` (``{ksm_resource}``, ``{share}``,
    ``{shares}``, ``{alive_*}``)."""

    name: str
    unit: str
    description: str
    promql: str
    params: dict[str, str] = field(default_factory=dict)
    source: str = ""


_GPU = {"resource": "nvidia.com/gpu", "slices_per_gpu": "7"}

# the exporter's own series of the selection: present whenever the selection reports, whatever is requested.
# ``str.format`` patterns: {sel} the selector's matchers, {sel_c} the same after ", ", {ns} the namespace matcher,
# {node} the node matcher, {model} the node-label matcher of the GPU model (capplan.promql.render.alive_terms).
ALIVE = {
    "ksm": "kube_namespace_status_phase{{{ns}}} or kube_pod_status_phase{{{ns}}}",
    "ksm_node": "kube_node_info{{{node}}} or kube_node_labels{{{node}}}",
    "model": "kube_node_labels{{{model}}}",
    "dcgm": "DCGM_FI_DEV_GPU_UTIL{{{sel}}} or DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel}}}",
    "volcano": '{{__name__=~"volcano_queue_.+"{sel_c}}}',
    "kueue": "kueue_cluster_queue_status{{{sel}}} or kueue_cluster_queue_nominal_quota{{{sel}}} or "
             "kueue_cluster_queue_resource_usage{{{sel}}}",
    "kueue_pw": "kueue_cluster_queue_status{{{sel}}} or kueue_pending_workloads{{{sel}}}",
    "kueue_lq": "kueue_local_queue_status{{{sel}}} or kueue_local_queue_resource_usage{{{sel}}}",
}

_UTIL_PER_ENTITY = ('max by (UUID, GPU_I_ID, GPU_I_PROFILE) '
                    '(DCGM_FI_DEV_GPU_UTIL{{{sel}}} or (DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel}}} * 100))')
_REQ = ('max by (namespace, pod, container) (kube_pod_container_resource_requests{{resource="{ksm_resource}"{sel_c}}})'
        ' * on(namespace, pod) group_left() '
        'max by (namespace, pod) (kube_pod_status_phase{{phase=~"Running|Pending"{ns_c}}} == 1)')
_VQ = 'max by (queue_name) (volcano_queue_{kind}_scalar_resources{{resource="{resource}"{sel_c}}})'
_KQ = 'max by (cluster_queue, flavor) (kueue_cluster_queue_{kind}{{resource="{resource}"{sel_c}}})'

TEMPLATES: dict[str, Template] = {t.name: t for t in [
    Template("dcgm_gpu_util", "percent",
             "mean GPU utilisation per GPU entity (DCGM_FI_DEV_GPU_UTIL; MIG: DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100)",
             "avg(" + _UTIL_PER_ENTITY + ")"),
    Template("dcgm_gpus_busy", "gpu",
             "busy GPU-equivalents: per-entity utilisation / 100, a MIG instance weighted by its share of a GPU",
             "sum({busy_terms}) or {alive_dcgm}", dict(slices_per_gpu="7")),
    Template("dcgm_fb_used_mib", "MiB", "framebuffer used (DCGM_FI_DEV_FB_USED) per GPU entity, summed",
             "sum(max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED{{{sel}}}))"),
    Template("dcgm_power_w", "W", "board power (DCGM_FI_DEV_POWER_USAGE) per GPU, summed",
             "sum(max by (UUID) (DCGM_FI_DEV_POWER_USAGE{{{sel}}}))"),
    Template("k8s_gpus_requested", "gpu",
             "GPUs (resource) requested by Running and Pending pods, each pod/container once (kube-state-metrics)",
             "sum(" + _REQ + "){share} or {alive_ksm}", dict(_GPU)),
    Template("k8s_deployment_replicas", "replica", "desired replicas of Deployments (kube-state-metrics)",
             "sum(max by (namespace, deployment) (kube_deployment_spec_replicas{{{sel}}}))"),
    Template("service_request_rate", "requests/s", "request rate of a service: sum(rate(metric[window]))",
             "sum(rate({metric}{{{sel}}}[{window}]))", {"metric": "http_requests_total", "window": "5m"}),
    Template("volcano_queue_allocated_gpus", "gpu", "GPUs allocated to a Volcano queue (milli-units / 1000)",
             "sum(" + _VQ.replace("{kind}", "allocated") + ") / 1000{share} or {alive_volcano}", dict(_GPU)),
    Template("volcano_queue_requested_gpus", "gpu",
             "GPUs the jobs of a Volcano queue request, allocated and waiting (milli-units / 1000)",
             "sum(" + _VQ.replace("{kind}", "request") + ") / 1000{share} or {alive_volcano}", dict(_GPU)),
    Template("volcano_queue_pending_gpus", "gpu",
             "GPUs a Volcano queue waits for: requested less allocated (milli-units / 1000)",
             "sum(clamp_min(" + _VQ.replace("{kind}", "request") + " - (" + _VQ.replace("{kind}", "allocated")
             + " or " + _VQ.replace("{kind}", "request") + " * 0), 0)) / 1000{share} or {alive_volcano}", dict(_GPU)),
    Template("kueue_admitted_gpus", "gpu", "GPUs in use by admitted workloads of a Kueue ClusterQueue",
             "sum(" + _KQ.replace("{kind}", "resource_usage") + "){share} or {alive_kueue}", dict(_GPU)),
    Template("kueue_reserved_gpus", "gpu", "GPUs of quota reserved by workloads of a Kueue ClusterQueue",
             "sum(" + _KQ.replace("{kind}", "resource_reservation") + "){share} or {alive_kueue}", dict(_GPU)),
    Template("kueue_pending_gpus", "gpu",
             "GPUs requested by pending workloads of a Kueue ClusterQueue (kueue_cluster_queue_resource_pending)",
             "sum(" + _KQ.replace("{kind}", "resource_pending") + "){share} or {alive_kueue}", dict(_GPU)),
    Template("kueue_pending_workloads_gpus", "gpu",
             "pending workloads of a Kueue ClusterQueue x gpus_per_workload: an estimate for Kueue releases "
             "without kueue_cluster_queue_resource_pending (it misses workloads of other sizes)",
             "sum(max by (cluster_queue, status) (kueue_pending_workloads{{{sel}}})) * {gpus_per_workload} "
             "or {alive_kueue_pw}", {"gpus_per_workload": "1"}),
    Template("kueue_local_queue_gpus", "gpu",
             "GPUs in use by admitted workloads of a Kueue LocalQueue (selector name, namespace; feature gate "
             "LocalQueueMetrics)",
             'sum(max by (namespace, name, flavor) (kueue_local_queue_resource_usage{{resource="{resource}"{sel_c}}}))'
             "{share} or {alive_kueue_lq}", dict(_GPU)),
    Template("kueue_nominal_quota_gpus", "gpu",
             "GPUs of nominalQuota of Kueue ClusterQueues per flavor (selector cluster_queue, cohort, flavor: a "
             "flavor is a GPU model's capacity in Kueue)",
             "sum(" + _KQ.replace("{kind}", "nominal_quota") + "){share} or {alive_kueue}", dict(_GPU)),
    Template("k8s_gpus_allocatable_by_model", "gpu",
             "allocatable GPU-equivalents of the nodes of a GPU model (selector gpu_product; kube_node_status_"
             "allocatable joined with GFD's nvidia.com/gpu.product through kube_node_labels; MIG and shared GPUs "
             "as shares of a GPU)",
             "{model_capacity} or {alive_model}", {"slices_per_gpu": "7", "shared_replicas": "1"}),
    Template("k8s_gpus_requested_by_model", "gpu",
             "GPU-equivalents requested on a GPU model (selector gpu_product, optionally namespace): Running and "
             "Pending pods on its nodes (kube_pod_info node) and unscheduled Pending pods whose nodeSelector names "
             "it (kube_pod_nodeselectors)",
             "{model_requests} or {alive_model}", {"slices_per_gpu": "7", "shared_replicas": "1"}),
    Template("dcgm_gpus_reporting", "gpu",
             "physical GPUs dcgm-exporter reports (one per UUID; selector e.g. gpu_product, Hostname): a model's "
             "GPUs as the exporter sees them; missing when none reports",
             "count(max by (UUID) (DCGM_FI_DEV_GPU_UTIL{{{sel}}} or DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel}}}))"),
]}
