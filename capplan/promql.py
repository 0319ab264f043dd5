"""Named PromQL templates for DCGM and Kubernetes demand, with safe label matchers.

A series in ``capplan.yaml`` may say ``template: dcgm_gpu_util`` with
``selector: {namespace: team-a}`` instead of writing PromQL. The selector
becomes label matchers; every value is escaped as a PromQL string literal
(:func:`escape_label_value`), so a quote, backslash or newline in a value
cannot end the string and change the query. Label names are checked against
the Prometheus label-name grammar ``[a-zA-Z_][a-zA-Z0-9_]*``.

Templates and their units (metric names are NVIDIA dcgm-exporter's
``DCGM_FI_*`` fields and kube-state-metrics v2 names):

=====================  ===========  ==========================================================
template               unit         what it measures
=====================  ===========  ==========================================================
dcgm_gpu_util          percent      mean GPU utilisation, ``DCGM_FI_DEV_GPU_UTIL`` (0-100);
                                    where a GPU (e.g. a MIG instance) emits no GPU_UTIL, its
                                    ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio 0-1) x 100
dcgm_gpus_busy         gpu          busy GPU-equivalents: the same per-GPU utilisation summed
                                    and divided by 100 (a demand in GPUs)
dcgm_fb_used_mib       MiB          framebuffer memory used, ``DCGM_FI_DEV_FB_USED`` summed
dcgm_power_w           W            board power, ``DCGM_FI_DEV_POWER_USAGE`` summed
k8s_gpus_requested     gpu          ``nvidia.com/gpu`` requested by Running and Pending pods
                                    (``kube_pod_container_resource_requests`` joined with
                                    ``kube_pod_status_phase``): running + pending demand
k8s_deployment_replicas replica     ``kube_deployment_spec_replicas`` summed
service_request_rate   requests/s   ``sum(rate(<metric>[<window>]))``; params ``metric``
                                    (default ``http_requests_total``) and ``window``
                                    (default ``5m``)
=====================  ===========  ==========================================================

Every template aggregates to one series with ``sum`` or ``avg`` at the top,
so pod restarts and renamed labels (label-set changes) are combined by
Prometheus itself, never dropped or double counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from capplan.errors import InputError

LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
DURATION_RE = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")


def escape_label_value(value: str) -> str:
    """Escape ``value`` for use inside a double-quoted PromQL string.

    Backslash, double quote and newline are escaped (PromQL strings follow Go's
    escaping rules), so the value always stays one string literal.
    """
    return (str(value).replace("\\", "\\\\").replace('"', '\\"')
            .replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t"))


def matchers(selector: dict[str, str], fixed: dict[str, str] | None = None) -> str:
    """Comma-separated equality matchers ``k="v"`` (``fixed`` first, then ``selector``).

    Raises InputError for a label name that is not a valid Prometheus label name.
    """
    parts = []
    for k, v in {**(fixed or {}), **selector}.items():
        if not LABEL_NAME_RE.match(str(k)):
            raise InputError(f"selector: {k!r} is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")
        parts.append(f'{k}="{escape_label_value(v)}"')
    return ", ".join(parts)


@dataclass(frozen=True)
class Template:
    """A named query: ``promql`` is a ``str.format`` pattern with ``{sel}`` (matchers,
    possibly empty), ``{sel_c}`` (``, `` + matchers, or empty), ``{ns_c}`` (the
    selector's namespace matcher only) and the template's ``params``."""

    name: str
    unit: str
    description: str
    promql: str
    params: dict[str, str] = field(default_factory=dict)


_GPU_UTIL_PER_GPU = ("(DCGM_FI_DEV_GPU_UTIL{{{sel}}} or (DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel}}} * 100))")

TEMPLATES: dict[str, Template] = {t.name: t for t in [
    Template("dcgm_gpu_util", "percent",
             "mean GPU utilisation (DCGM_FI_DEV_GPU_UTIL; MIG fallback DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100)",
             "avg(" + _GPU_UTIL_PER_GPU + ")"),
    Template("dcgm_gpus_busy", "gpu",
             "busy GPU-equivalents: per-GPU utilisation (as dcgm_gpu_util) summed / 100",
             "sum(" + _GPU_UTIL_PER_GPU + ") / 100"),
    Template("dcgm_fb_used_mib", "MiB", "framebuffer used (DCGM_FI_DEV_FB_USED)",
             "sum(DCGM_FI_DEV_FB_USED{{{sel}}})"),
    Template("dcgm_power_w", "W", "board power (DCGM_FI_DEV_POWER_USAGE)",
             "sum(DCGM_FI_DEV_POWER_USAGE{{{sel}}})"),
    Template("k8s_gpus_requested", "gpu",
             "nvidia.com/gpu requested by Running and Pending pods (kube-state-metrics)",
             'sum(kube_pod_container_resource_requests{{resource="nvidia_com_gpu"{sel_c}}} '
             '* on(namespace, pod) group_left() '
             'max by (namespace, pod) (kube_pod_status_phase{{phase=~"Running|Pending"{ns_c}}} == 1))'),
    Template("k8s_deployment_replicas", "replica", "desired replicas of Deployments (kube-state-metrics)",
             "sum(kube_deployment_spec_replicas{{{sel}}})"),
    Template("service_request_rate", "requests/s", "request rate of a service: sum(rate(metric[window]))",
             "sum(rate({metric}{{{sel}}}[{window}]))", {"metric": "http_requests_total", "window": "5m"}),
]}


#: dcgm-exporter's workload labels; scraped without ``honorLabels`` they arrive with an ``exported_`` prefix
#: (the plain names then hold the exporter pod's own namespace and pod).
WORKLOAD_LABELS = ("namespace", "pod", "container")


def render(template: str, selector: dict[str, str] | None = None, params: dict[str, str] | None = None,
           exported_labels: bool = False) -> str:
    """PromQL of a named template for a selector.

    With ``exported_labels`` the ``dcgm_*`` templates match the selector's
    ``namespace``/``pod``/``container`` on ``exported_namespace``/``exported_pod``/
    ``exported_container`` (dcgm-exporter scraped without ``honorLabels``).

    Raises InputError for an unknown template (listing the known ones), an
    invalid label name, an unknown parameter, or a parameter that is not a
    metric name (``metric``) or duration (``window``).
    """
    if template not in TEMPLATES:
        raise InputError(f"template {template!r}: unknown; known: {', '.join(sorted(TEMPLATES))}")
    t = TEMPLATES[template]
    given = dict(params or {})
    unknown = sorted(set(given) - set(t.params))
    if unknown:
        allowed = ", ".join(sorted(t.params)) or "none"
        raise InputError(f"template {template!r}: unknown params {unknown}; allowed: {allowed}")
    p = {**t.params, **given}
    if "metric" in p and not METRIC_NAME_RE.match(p["metric"]):
        raise InputError(f"template {template!r}: params.metric {p['metric']!r} is not a metric name")
    if "window" in p and not DURATION_RE.match(p["window"]):
        raise InputError(f"template {template!r}: params.window {p['window']!r} is not a duration such as 5m")
    if exported_labels and template.startswith("dcgm_") and selector:
        selector = {(f"exported_{k}" if k in WORKLOAD_LABELS else k): v for k, v in selector.items()}
    sel = matchers(selector or {})
    ns = matchers({"namespace": selector["namespace"]}) if selector and "namespace" in selector else ""
    return t.promql.format(sel=sel, sel_c=(", " + sel) if sel else "", ns_c=(", " + ns) if ns else "", **p)


_AGG_RE = re.compile(r"^\s*(sum|avg|min|max|count|group)\b\s*(?:(by|without)\s*\([^)]*\)\s*)?\(", re.I)


def outer_aggregation(query: str) -> str | None:
    """The aggregation operator that wraps the whole query, or None.

    ``sum by (pod) (x)`` -> ``"sum"``; ``sum(x) / 100`` -> None (the outermost
    operation is the division). Only the outermost call counts: the result
    says how per-label-set series returned by the query combine into one.
    """
    m = _AGG_RE.match(query)
    if not m:
        return None
    # the aggregation must span the whole expression: find its closing bracket
    depth, i, s = 0, m.end() - 1, query
    in_str: str | None = None
    while i < len(s):
        c = s[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == in_str:
                in_str = None
        elif c in "\"'`":
            in_str = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                rest = s[i + 1:].strip()
                if rest.startswith("by") or rest.startswith("without"):
                    rest = re.sub(r"^(by|without)\s*\([^)]*\)", "", rest).strip()
                return m.group(1).lower() if not rest else None
        i += 1
    return None
