"""Named PromQL templates for DCGM and Kubernetes demand, with safe label matchers.

A series in ``capplan.yaml`` may say ``template: dcgm_gpu_util`` with
``selector: {namespace: team-a}`` instead of writing PromQL. The selector
becomes label matchers; every value is escaped as a PromQL string literal
(:func:`escape_label_value`), so a quote, backslash or newline in a value
cannot end the string and change the query. Label names are checked against
the Prometheus label-name grammar ``[a-zA-Z_][a-zA-Z0-9_]*``.

The templates, their units and the metrics they read are in
:mod:`capplan.promql.templates` (and docs/prometheus.md): DCGM utilisation and
busy GPUs, kube-state-metrics requested GPUs, Volcano queue and Kueue
ClusterQueue/LocalQueue GPUs, deployment replicas and request rates, and per
GPU model (``selector.gpu_product``, :mod:`capplan.promql.models`) capacity and
requests. Each reduces repeated series per entity before summing and answers 0
(not nothing) while its selection reports (:func:`alive_terms`).
"""

from __future__ import annotations

import re

from capplan.errors import InputError
from capplan.promql import models
from capplan.promql.templates import ALIVE, TEMPLATES

LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
DURATION_RE = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")
RESOURCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,252}$")
"""A Kubernetes extended-resource name such as ``nvidia.com/gpu`` or ``nvidia.com/mig-1g.10gb``."""
MIG_RE = re.compile(r"mig[-_](\d+)g[._]")


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


#: dcgm-exporter's workload labels; scraped without ``honorLabels`` they arrive with an ``exported_`` prefix
#: (the plain names then hold the exporter pod's own namespace and pod).
WORKLOAD_LABELS = ("namespace", "pod", "container")


def render(template: str, selector: dict[str, str] | None = None, params: dict[str, str] | None = None,
           exported_labels: bool = False) -> str:
    """PromQL of a named template for a selector.

    With ``exported_labels`` the ``dcgm_*`` templates match the selector's
    ``namespace``/``pod``/``container`` on ``exported_namespace``/``exported_pod``/
    ``exported_container`` (dcgm-exporter scraped without ``honorLabels``).

    ``selector.gpu_product`` (GFD product labels, ``|``-separated) or ``selector.gpu_model`` (a
    catalogue model) selects a GPU model in the ``*_by_model`` templates (where one is required) and
    the ``dcgm_*`` templates (as ``modelName``); :mod:`capplan.promql.models`.

    Raises InputError for an unknown template (listing the known ones), an
    invalid label name, an unknown parameter, a parameter that is not a
    metric name (``metric``) or duration (``window``), a ``gpu_product`` that is
    not a label value, a ``gpu_model`` not in the catalogue, or a model selector
    missing from a ``*_by_model`` template or given to one that cannot select a
    model.
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
    extra = _derived(template, p)
    if "metric" in p and not METRIC_NAME_RE.match(p["metric"]):
        raise InputError(f"template {template!r}: params.metric {p['metric']!r} is not a metric name")
    if "window" in p and not DURATION_RE.match(p["window"]):
        raise InputError(f"template {template!r}: params.window {p['window']!r} is not a duration such as 5m")
    selector = dict(selector or {})
    keys = [k for k in ("gpu_product", "gpu_model") if k in selector]
    by_model, dcgm = template.endswith("_by_model"), template.startswith("dcgm_")
    if len(keys) > 1:
        raise InputError(f"template {template!r}: set selector.gpu_product or selector.gpu_model, not both")
    if not keys and by_model:
        raise InputError(f"template {template!r}: needs one of selector.gpu_product (the GFD product label, e.g. "
                         "NVIDIA-A100-SXM4-80GB; `capplan discover` lists them) or selector.gpu_model (a catalogue "
                         "model, e.g. A100-80GB)")
    if keys and not (by_model or dcgm):
        raise InputError(f"template {template!r}: selector.{keys[0]} selects a GPU model only in the *_by_model "
                         "and dcgm_* templates; a Kueue flavor is selected with selector.flavor")
    rx, model_rx = models.patterns(keys[0], selector.pop(keys[0]), template) if keys else ("", "")
    if exported_labels and dcgm and selector:
        selector = {(f"exported_{k}" if k in WORKLOAD_LABELS else k): v for k, v in selector.items()}
    sel = matchers(selector)
    if dcgm and model_rx:
        sel = ", ".join(x for x in (sel, f'modelName=~"{model_rx}"') if x)
    ns = matchers({"namespace": selector["namespace"]}) if "namespace" in selector else ""
    node = matchers({"node": selector["node"]}) if "node" in selector else ""
    p["resource"] = escape_label_value(p["resource"]) if "resource" in p else ""
    slices = int(extra["slices_per_gpu"])
    extra["busy_terms"] = busy_terms(sel, slices=slices)
    sel_c, ns_c = (", " + sel) if sel else "", (", " + ns) if ns else ""
    extra.update(alive_terms(sel, ns, node, f'{models.NODE_LABEL}=~"{models.product_regex(rx)}"' if rx else ""))
    if by_model:
        replicas = int(extra["shared_replicas"])
        extra["model_capacity"] = models.capacity(rx, slices, replicas)
        extra["model_requests"] = models.requests(rx, slices, replicas, sel_c, ns_c)
    return t.promql.format(sel=sel, sel_c=sel_c, ns_c=ns_c, **{**p, **extra})


def alive_terms(sel: str, ns: str = "", node: str = "", model: str = "") -> dict[str, str]:
    """The ``alive_*`` fields of the templates: ``0 * group(...)`` of the exporter's own series of
    the selection (:data:`capplan.promql.templates.ALIVE`), so a step is 0 while the selection
    reports and missing once it does not, whatever else reports. ``sel``: the selector's matchers;
    ``ns``/``node``/``model``: its namespace, node and GPU-model (``kube_node_labels``) matchers,
    each empty when the selector has none (the kube-state-metrics terms then cover the cluster)."""
    f = {"sel": sel, "sel_c": (", " + sel) if sel else "", "ns": ns, "node": node, "model": model}
    raw = {k: pat.format(**f) for k, pat in ALIVE.items()}
    ksm = [f"group({raw['ksm']})"] + ([f"group({raw['ksm_node']})"] if node else [])
    mod = [f"group({raw['model']})"] + ([f"group({raw['ksm']})"] if ns else [])
    out = {f"alive_{k}": f"0 * group({raw[k]})" for k in ("dcgm", "volcano", "kueue", "kueue_pw", "kueue_lq")}
    out["alive_ksm"] = "0 * (" + " and ".join(ksm) + ")" if len(ksm) > 1 else "0 * " + ksm[0]
    out["alive_model"] = "0 * (" + " and ".join(mod) + ")" if len(mod) > 1 else "0 * " + mod[0]
    return out


def busy_terms(sel: str, slices: int = 7) -> str:
    """Per-entity busy GPU-equivalents joined with ``or`` (summed by the template): whole GPUs (no
    ``GPU_I_PROFILE``) by ``DCGM_FI_DEV_GPU_UTIL`` / 100 (or ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` where a
    GPU emits no GPU_UTIL), each MIG instance with N compute slices (``GPU_I_PROFILE`` ``<N>g.<M>gb``)
    by its ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` ratio x N / ``slices``. One value per entity
    (``max by (UUID, GPU_I_ID)``), so a GPU reported under two label sets counts once. The entity
    label sets differ (``GPU_I_ID``), so ``or`` joins them; no ``label_replace`` (engines differ on
    it for absent labels)."""
    c = f"{sel}, " if sel else ""
    whole = (f'max by (UUID, GPU_I_ID) (DCGM_FI_DEV_GPU_UTIL{{{c}GPU_I_PROFILE=""}} or '
             f'(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{c}GPU_I_PROFILE=""}} * 100)) / 100')
    mig = [f'max by (UUID, GPU_I_ID) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{c}GPU_I_PROFILE=~"{k}g[.].*"}}) * {k} / {slices}'
           for k in range(1, slices + 1)]
    return " or ".join([whole] + mig)


def _number(template: str, name: str, text: str, lo: float, hi: float) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not lo <= x <= hi:
        raise InputError(f"template {template!r}: params.{name} {text!r} must be a number from {lo:g} to {hi:g}")
    return x


def mig_share(resource: str, slices_per_gpu: int) -> float:
    """GPU-equivalents of one unit of ``resource``: ``N / slices_per_gpu`` for a MIG
    resource with ``N`` compute slices (``nvidia.com/mig-3g.40gb`` -> 3/7), else 1."""
    m = MIG_RE.search(resource)
    return min(int(m.group(1)) / slices_per_gpu, 1.0) if m else 1.0


def _derived(template: str, p: dict[str, str]) -> dict[str, str]:
    """Checked template parameters turned into the fields the patterns use: ``ksm_resource``
    (kube-state-metrics' spelling of ``resource``), ``share`` (`` * <GPU-equivalents per
    unit>`` or empty), ``shares`` (a vector of the GPU share per MIG slice count,
    ``{slices="N"}`` -> N / slices_per_gpu, no label -> 1), ``gpus_per_workload`` and the
    ``alive_*`` expressions. Raises InputError for a bad value, naming it."""
    out: dict[str, str] = {}
    slices = int(_number(template, "slices_per_gpu", p.get("slices_per_gpu", "7"), 1, 8))
    if slices != float(p.get("slices_per_gpu", "7")):
        raise InputError(f"template {template!r}: params.slices_per_gpu must be a whole number (7, or 4 for A30)")
    if "resource" in p:
        if not RESOURCE_RE.match(p["resource"]):
            raise InputError(f"template {template!r}: params.resource {p['resource']!r} is not a Kubernetes "
                             "resource name such as nvidia.com/gpu or nvidia.com/mig-1g.10gb")
        out["ksm_resource"] = re.sub(r"[^A-Za-z0-9_]", "_", p["resource"])
        share = mig_share(p["resource"], slices)
        n = MIG_RE.search(p["resource"])
        out["share"] = f" * {n.group(1)} / {slices}" if share != 1 else ""
    out["slices_per_gpu"] = str(slices)
    if "shared_replicas" in p:
        r = _number(template, "shared_replicas", p["shared_replicas"], 1, 1024)
        if r != int(r):
            raise InputError(f"template {template!r}: params.shared_replicas must be a whole number (the device "
                             "plugin's time-slicing/MPS replicas per GPU)")
        out["shared_replicas"] = str(int(r))
    if "gpus_per_workload" in p:
        out["gpus_per_workload"] = f"{_number(template, 'gpus_per_workload', p['gpus_per_workload'], 1e-3, 1e4):g}"
    return out


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
