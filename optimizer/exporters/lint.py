"""Semantic rules that schemas cannot express. Each rule has an id used in reports.

| rule | what it checks | source |
| --- | --- | --- |
| ``resource-metric-cpu-memory`` | HPA ``Resource``/``ContainerResource`` metrics name only ``cpu`` or ``memory`` (GPU utilisation is not one: use External/Pods) | Kubernetes docs, "Horizontal Pod Autoscaling" |
| ``stabilization-window-range`` | ``stabilizationWindowSeconds`` within 0–3600 | HPA API (HPAScalingRules) |
| ``period-seconds-range`` | ``periodSeconds`` within 1–1800 | HPA API (HPAScalingPolicy) |
| ``replica-bounds`` | ``minReplicas`` <= ``maxReplicas`` (HPA ``minReplicas`` >= 1); KEDA ``minReplicaCount`` <= ``maxReplicaCount`` (default 100), 0 only with annotation ``capplan.io/allow-scale-to-zero: "true"``; fallback and cron replicas within bounds | HPA API; KEDA ScaledObject spec |
| ``metric-units`` | targets in the unit of their metric: percent metrics (``DCGM_FI_DEV_GPU_UTIL``, ``*_percent``) need values > 1; ratio metrics (``DCGM_FI_PROF_*``, ``*_ratio``) with type Value need values <= 1; ``Utilization`` targets only on Resource metrics, ``averageUtilization`` is percent | DCGM field reference; HPA API |
| ``rfc1123-name`` | ``metadata.name`` and ``scaleTargetRef.name`` are RFC 1123 labels | Kubernetes docs, "Object Names and IDs" |
| ``unique-name`` | one object per apiGroup, kind, namespace and name within a folder | |
| ``cluster-scoped-namespace`` | Queue and PriorityClass carry no namespace | |
| ``one-autoscaler-per-target`` | at most one HPA/ScaledObject per workload within a folder | KEDA FAQ: do not combine an HPA and a ScaledObject on one target |
| ``keda-null-values`` | prometheus triggers set ``ignoreNullValues: "false"`` | KEDA Prometheus scaler docs |
| ``keda-fallback`` | a ScaledObject has ``fallback``; no trigger has ``metricType: Value`` then | KEDA "Scaling Deployments" (fallback) |
| ``keda-inline-credentials`` | no credentials in trigger metadata; ``authModes`` needs ``authenticationRef`` | KEDA Authentication docs |
| ``keda-query-single-element`` | the PromQL query is one aggregation without ``by``/``without`` | KEDA Prometheus scaler docs |
| ``cron-trigger`` | cron triggers: IANA timezone, 5-field ``start``/``end``, integer ``desiredReplicas``; for ``m h * * dow`` pairs, the end is after the start and the window lasts at most a day (a weekly window that wraps round holds for a week) | KEDA Cron scaler docs |
| ``keda-trigger-metadata`` | trigger metadata values by type (``prometheus``, ``cron``, ``cpu``, ``memory``): known keys, numbers where KEDA parses numbers (``threshold: 'abc'`` fails), booleans as ``"true"``/``"false"``, an http(s) ``serverAddress`` | KEDA scaler docs |
| ``volcano-queue-bounds`` | 0 <= guarantee <= deserved <= capability per resource | Volcano Queue docs |
| ``volcano-queue-quota`` | capability <= the pool's quota (annotation ``capplan.io/quota-gpus``) unless ``capplan.io/capability-above-quota: "true"``; deserved >= min(GPUs the plan buys (``capplan.io/planned-gpus``), capability) | :mod:`.volcano` |
| ``kustomization-resources`` | every listed resource exists, every manifest in the folder is listed | |
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jsonschema

from optimizer.exporters.names import is_label
from optimizer.exporters.problem import YAML_SUFFIXES, Problem

RESOURCE_METRICS = {"cpu", "memory"}
WINDOW_RANGE = (0, 3600)
PERIOD_RANGE = (1, 1800)
KEDA_DEFAULT_MAX = 100
PERCENT_METRIC = re.compile(r"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_MEM_COPY_UTIL|_percent\b|capplan_gpu_util", re.I)
RATIO_METRIC = re.compile(r"DCGM_FI_PROF_|_ratio\b", re.I)
CRED_KEYS = {"bearertoken", "password", "username", "token", "apikey", "key", "cert", "ca", "customauthvalue"}
CLUSTER_SCOPED = {"Queue", "PriorityClass", "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
AGGREGATION = re.compile(r"^\s*(sum|avg|max|min|count|count_values|quantile|stddev|stdvar|topk|bottomk|group|"
                         r"scalar|vector)\s*\(", re.I)
CRON_FIELD = re.compile(r"^[\d*/,\-A-Za-z?]+$")
SIMPLE_CRON = re.compile(r"^(\d{1,2}) (\d{1,2}) \* \* (\d|\*)$")
DAY_MIN, WEEK_MIN = 1440, 10080
_NUMBER = {"type": "string", "pattern": r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$"}
_BOOL = {"type": "string", "enum": ["true", "false"]}
_TEXT = {"type": "string", "minLength": 1}
#: metadata of the trigger types capplan writes (KEDA docs: "Prometheus", "Cron", "CPU", "Memory" scalers)
TRIGGER_METADATA = {
    "prometheus": {"required": ["serverAddress", "query", "threshold"], "properties": {
        "serverAddress": {"type": "string", "pattern": "^https?://[^\\s/]+"}, "query": _TEXT, "threshold": _NUMBER,
        "activationThreshold": _NUMBER, "ignoreNullValues": _BOOL, "unsafeSsl": _BOOL, "timeout": _NUMBER,
        "authModes": {"type": "string", "pattern": "^(bearer|basic|tls|custom)(,(bearer|basic|tls|custom))*$"},
        "namespace": _TEXT, "queryParameters": _TEXT, "customHeaders": _TEXT, "cortexOrgID": _TEXT,
        "metricName": _TEXT}},
    "cron": {"required": ["timezone", "start", "end", "desiredReplicas"], "properties": {
        "timezone": _TEXT, "start": _TEXT, "end": _TEXT, "desiredReplicas": {"type": "string", "pattern": r"^\d+$"}}},
    "cpu": {"required": ["value"], "properties": {"value": _NUMBER, "type": {"enum": ["Utilization", "AverageValue"]},
                                                  "containerName": _TEXT}},
    "memory": {"required": ["value"], "properties": {"value": _NUMBER,
                                                     "type": {"enum": ["Utilization", "AverageValue"]},
                                                     "containerName": _TEXT}},
}


def _num(x) -> float | None:
    """Parse a number or simple Kubernetes quantity (``70``, ``65.5``, ``500m``); None if not."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        m = re.fullmatch(r"\s*([+-]?\d+(?:\.\d*)?|\.\d+)(m|k|M|G|Ki|Mi|Gi)?\s*", x)
        if m:
            mult = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}
            return float(m.group(1)) * mult[m.group(2)]
    return None


def _behavior_problems(file: str, base: str, beh, out: list[Problem]) -> None:
    if not isinstance(beh, dict):
        return
    for side in ("scaleUp", "scaleDown"):
        rules = beh.get(side)
        if not isinstance(rules, dict):
            continue
        w = rules.get("stabilizationWindowSeconds")
        if w is not None and (not isinstance(w, int) or not WINDOW_RANGE[0] <= w <= WINDOW_RANGE[1]):
            out.append(Problem(file, f"{base}.{side}.stabilizationWindowSeconds", "stabilization-window-range",
                               f"{w} s is outside 0–3600 s"))
        for i, pol in enumerate(rules.get("policies") or []):
            ps = pol.get("periodSeconds") if isinstance(pol, dict) else None
            if ps is not None and (not isinstance(ps, int) or not PERIOD_RANGE[0] <= ps <= PERIOD_RANGE[1]):
                out.append(Problem(file, f"{base}.{side}.policies[{i}].periodSeconds", "period-seconds-range",
                                   f"{ps} s is outside 1–1800 s"))


def _units(file: str, path: str, metric_name: str, mtype: str | None, value, out: list[Problem]) -> None:
    v = _num(value)
    if v is None:
        return
    if PERCENT_METRIC.search(metric_name or "") and 0 < v <= 1:
        out.append(Problem(file, path, "metric-units",
                           f"{value!r} looks like a ratio, but {metric_name} is in percent (0-100): write {v * 100:g}"))
    elif RATIO_METRIC.search(metric_name or "") and (mtype == "Value") and v > 1:
        out.append(Problem(file, path, "metric-units",
                           f"{value!r} looks like a percent, but {metric_name} is a ratio (0-1): write {v / 100:g}"))


def _hpa(file: str, o: dict, out: list[Problem]) -> None:
    spec = o.get("spec") or {}
    lo, hi = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if isinstance(lo, int) and lo < 1:
        out.append(Problem(file, "spec.minReplicas", "replica-bounds",
                           f"minReplicas {lo} needs the alpha HPAScaleToZero gate; use KEDA for scale to zero"))
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        out.append(Problem(file, "spec.minReplicas", "replica-bounds", f"minReplicas {lo} > maxReplicas {hi}"))
    for i, m in enumerate(spec.get("metrics") or []):
        if not isinstance(m, dict):
            continue
        t = m.get("type")
        base = f"spec.metrics[{i}]"
        if t in ("Resource", "ContainerResource"):
            key = "resource" if t == "Resource" else "containerResource"
            r = m.get(key) or {}
            if r.get("name") not in RESOURCE_METRICS:
                out.append(Problem(file, f"{base}.{key}.name", "resource-metric-cpu-memory",
                                   f"{t} metrics are cpu and memory only; {r.get('name')!r} never reports. Scale on "
                                   "DCGM through an External or Pods metric (prometheus-adapter) or a KEDA "
                                   "prometheus trigger"))
            tgt = r.get("target") or {}
            au = tgt.get("averageUtilization")
            if isinstance(au, (int, float)) and au <= 1:
                out.append(Problem(file, f"{base}.{key}.target.averageUtilization", "metric-units",
                                   f"averageUtilization is a percent of the request; {au} looks like a ratio"))
        elif t in ("External", "Pods", "Object"):
            key = t.lower()
            r = m.get(key) or {}
            name = (r.get("metric") or {}).get("name", "")
            tgt = r.get("target") or {}
            if tgt.get("type") == "Utilization":
                out.append(Problem(file, f"{base}.{key}.target.type", "metric-units",
                                   "Utilization targets exist only for Resource metrics; use Value or AverageValue"))
            for k in ("value", "averageValue"):
                if k in tgt:
                    _units(file, f"{base}.{key}.target.{k}", name, "Value" if k == "value" else "AverageValue",
                           tgt[k], out)
    _behavior_problems(file, "spec.behavior", spec.get("behavior"), out)


def _scaled_object(file: str, o: dict, out: list[Problem]) -> None:
    spec = o.get("spec") or {}
    ann = (o.get("metadata") or {}).get("annotations") or {}
    lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", KEDA_DEFAULT_MAX)
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        out.append(Problem(file, "spec.minReplicaCount", "replica-bounds", f"minReplicaCount {lo} > maxReplicaCount {hi}"))
    if lo == 0 and str(ann.get("capplan.io/allow-scale-to-zero", "")).lower() != "true":
        out.append(Problem(file, "spec.minReplicaCount", "replica-bounds",
                           "minReplicaCount is 0 (the default when unset) without the annotation "
                           "capplan.io/allow-scale-to-zero: \"true\"; set export.allow_scale_to_zero to scale to zero"))
    fb = spec.get("fallback")
    triggers = spec.get("triggers") or []
    if not isinstance(fb, dict):
        out.append(Problem(file, "spec.fallback", "keda-fallback",
                           "no fallback: when the metric source fails the ScaledObject keeps its last scale"))
    else:
        r = fb.get("replicas")
        if isinstance(r, int) and isinstance(hi, int) and not (0 <= r <= hi):
            out.append(Problem(file, "spec.fallback.replicas", "replica-bounds", f"{r} is outside 0–{hi}"))
        for i, t in enumerate(triggers):
            if isinstance(t, dict) and t.get("metricType") == "Value":
                out.append(Problem(file, f"spec.triggers[{i}].metricType", "keda-fallback",
                                   "fallback works only with AverageValue triggers"))
    _behavior_problems(file, "spec.advanced.horizontalPodAutoscalerConfig.behavior",
                       ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior"), out)
    names = [t.get("name") for t in triggers if isinstance(t, dict) and t.get("name")]
    for n in sorted({n for n in names if names.count(n) > 1}):
        out.append(Problem(file, "spec.triggers", "keda-trigger-names", f"trigger name {n!r} is used more than once "
                           "(KEDA names each trigger's metric after it)"))
    for i, t in enumerate(triggers):
        if not isinstance(t, dict):
            continue
        md = t.get("metadata") or {}
        base = f"spec.triggers[{i}]"
        thr = _num(md.get("threshold")) if "threshold" in md else None
        if thr is not None and thr <= 0:
            out.append(Problem(file, f"{base}.metadata.threshold", "keda-threshold",
                               f"{md['threshold']!r}: the threshold divides the metric, it must be above 0"))
        for k in md:
            if k.lower() in CRED_KEYS:
                out.append(Problem(file, f"{base}.metadata.{k}", "keda-inline-credentials",
                                   "credentials belong in a Secret referenced by a TriggerAuthentication"))
        _trigger_metadata(file, base, t.get("type"), md, out)
        if "authModes" in md and not t.get("authenticationRef"):
            out.append(Problem(file, f"{base}.authenticationRef", "keda-inline-credentials",
                               "authModes is set but no authenticationRef names a TriggerAuthentication"))
        if t.get("type") == "prometheus":
            if str(md.get("ignoreNullValues", "")).lower() != "false":
                out.append(Problem(file, f"{base}.metadata.ignoreNullValues", "keda-null-values",
                                   'set ignoreNullValues: "false" so that an empty result (outage) is an error, '
                                   "not zero load"))
            q = str(md.get("query", ""))
            if not AGGREGATION.match(q) or re.search(r"\b(by|without)\s*\(", q):
                out.append(Problem(file, f"{base}.metadata.query", "keda-query-single-element",
                                   "the query must return one element: one aggregation (sum, avg, max, ...) "
                                   "without by/without"))
            for k in ("threshold", "activationThreshold"):
                if k in md and k == "threshold":
                    _units(file, f"{base}.metadata.{k}", q, t.get("metricType", "AverageValue"), md[k], out)
        if t.get("type") == "cron":
            tz = md.get("timezone")
            try:
                ZoneInfo(str(tz))
            except (ZoneInfoNotFoundError, ValueError):
                out.append(Problem(file, f"{base}.metadata.timezone", "cron-trigger", f"{tz!r} is not an IANA zone"))
            for k in ("start", "end"):
                fields = str(md.get(k, "")).split()
                if len(fields) != 5 or not all(CRON_FIELD.match(x) for x in fields):
                    out.append(Problem(file, f"{base}.metadata.{k}", "cron-trigger",
                                       f"{md.get(k)!r} is not a 5-field cron expression"))
            _cron_span(file, base, md.get("start"), md.get("end"), out)
            d = md.get("desiredReplicas")
            if not re.fullmatch(r"\d+", str(d)):
                out.append(Problem(file, f"{base}.metadata.desiredReplicas", "cron-trigger",
                                   f"{d!r} is not a whole number of replicas"))
            elif isinstance(hi, int) and int(d) > hi:
                out.append(Problem(file, f"{base}.metadata.desiredReplicas", "replica-bounds",
                                   f"{d} > maxReplicaCount {hi}"))


@lru_cache(maxsize=None)
def _metadata_validator(kind: str):
    spec = TRIGGER_METADATA[kind]
    return jsonschema.Draft202012Validator({"type": "object", "additionalProperties": False, **spec})


def _trigger_metadata(file: str, base: str, kind, md, out: list[Problem]) -> None:
    """Rule ``keda-trigger-metadata``: the metadata of known trigger types, value by value."""
    if kind not in TRIGGER_METADATA or not isinstance(md, dict):
        return
    for e in sorted(_metadata_validator(kind).iter_errors(md), key=lambda e: str(list(e.absolute_path))):
        key = ".".join(str(x) for x in e.absolute_path)
        where = f"{base}.metadata" + (f".{key}" if key else "")
        if e.validator == "pattern" or e.validator == "enum":
            msg = f"{e.instance!r} is not a valid {kind} {key} (" + (
                "a number, e.g. '70'" if e.schema == _NUMBER else
                "'true' or 'false'" if e.schema == _BOOL else f"expected {e.schema.get('enum') or e.schema['pattern']}") + ")"
        elif e.validator == "additionalProperties":
            msg = f"unknown {kind} metadata: {e.message}"
        else:
            msg = e.message
        out.append(Problem(file, where, "keda-trigger-metadata", msg))


def _cron_span(file: str, base: str, start, end, out: list[Problem]) -> None:
    """Rule ``cron-trigger`` on a ``m h * * dow`` pair: end after start, at most a day long."""
    a, b = SIMPLE_CRON.match(str(start or "")), SIMPLE_CRON.match(str(end or ""))
    if start is not None and start == end:
        out.append(Problem(file, f"{base}.metadata.end", "cron-trigger", "start and end are the same"))
        return
    if not a or not b or (a.group(3) == "*") != (b.group(3) == "*"):
        return  # ranges, steps or lists: not checked here
    ma, mb = (int(m.group(2)) * 60 + int(m.group(1)) for m in (a, b))
    if a.group(3) == "*":
        return  # a daily window (crossing midnight or not) is always shorter than a day
    da, db = int(a.group(3)) % 7, int(b.group(3)) % 7
    if da == db and mb <= ma:
        out.append(Problem(file, f"{base}.metadata.end", "cron-trigger",
                           f"end {end!r} is not after start {start!r} on the same day: the window would hold for "
                           f"{(mb - ma) % WEEK_MIN / DAY_MIN:.1f} days, every week"))
        return
    span = (db * DAY_MIN + mb - da * DAY_MIN - ma) % WEEK_MIN
    if span > DAY_MIN:
        out.append(Problem(file, f"{base}.metadata.end", "cron-trigger",
                           f"window {start!r} .. {end!r} lasts {span / 60:.1f} h; a pre-scaling window covers one "
                           "forecast peak, at most a day"))


def _queue_quota(file: str, o: dict, res: str, dv, cv, out: list[Problem]) -> None:
    """Rule ``volcano-queue-quota`` from the annotations :mod:`.volcano` writes."""
    ann = (o.get("metadata") or {}).get("annotations") or {}
    quota, planned = _num(ann.get("capplan.io/quota-gpus")), _num(ann.get("capplan.io/planned-gpus"))
    above = str(ann.get("capplan.io/capability-above-quota", "")).lower() == "true"
    if quota is not None and cv is not None and cv > quota and not above:
        out.append(Problem(file, f"spec.capability.{res}", "volcano-queue-quota",
                           f"capability {cv:g} is above the pool's quota {quota:g}; lower it, or annotate "
                           'capplan.io/capability-above-quota: "true" (export.capability_limit: plan)'))
    if planned is not None and dv is not None and cv is not None and dv < min(planned, cv):
        out.append(Problem(file, f"spec.deserved.{res}", "volcano-queue-quota",
                           f"deserved {dv:g} is below the {planned:g} GPUs the plan buys; other queues could "
                           "reclaim capacity the team pays for"))


def _queue(file: str, o: dict, out: list[Problem]) -> None:
    spec = o.get("spec") or {}
    g = ((spec.get("guarantee") or {}).get("resource")) or {}
    d = spec.get("deserved") or {}
    c = spec.get("capability") or {}
    for res in sorted(set(g) | set(d) | set(c)):
        gv, dv, cv = _num(g.get(res)), _num(d.get(res)), _num(c.get(res))
        for where, v in (("guarantee.resource", gv), ("deserved", dv), ("capability", cv)):
            if v is not None and v < 0:
                out.append(Problem(file, f"spec.{where}.{res}", "volcano-queue-bounds",
                                   f"negative quantity {v:g}: a queue cannot guarantee or hold less than 0"))
        if gv is not None and dv is not None and gv > dv:
            out.append(Problem(file, f"spec.deserved.{res}", "volcano-queue-bounds", f"guarantee {gv:g} > deserved {dv:g}"))
        if dv is not None and cv is not None and dv > cv:
            out.append(Problem(file, f"spec.deserved.{res}", "volcano-queue-bounds", f"deserved {dv:g} > capability {cv:g}"))
        if gv is not None and cv is not None and gv > cv:
            out.append(Problem(file, f"spec.capability.{res}", "volcano-queue-bounds",
                               f"guarantee {gv:g} > capability {cv:g}"))
        if res == "nvidia.com/gpu" or len(set(g) | set(d) | set(c)) == 1:
            _queue_quota(file, o, res, dv, cv, out)


def lint_object(file: str, o: dict) -> list[Problem]:
    """Rules that look at one object."""
    out: list[Problem] = []
    if not isinstance(o, dict) or "kind" not in o:
        return out
    kind = o.get("kind")
    meta = o.get("metadata") or {}
    if kind == "CustomResourceDefinition":  # <plural>.<group>: an RFC 1123 subdomain
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", str(meta.get("name", ""))):
            out.append(Problem(file, "metadata.name", "rfc1123-name", f"{meta.get('name')!r} is not an RFC 1123 subdomain"))
    elif kind not in ("Kustomization",) and "name" in meta and not is_label(str(meta["name"])):
        out.append(Problem(file, "metadata.name", "rfc1123-name",
                           f"{meta['name']!r} is not an RFC 1123 label (lower-case a-z, 0-9, '-', <= 63 chars)"))
    if kind in CLUSTER_SCOPED and meta.get("namespace"):
        out.append(Problem(file, "metadata.namespace", "cluster-scoped-namespace", f"{kind} is cluster-scoped"))
    ref = (o.get("spec") or {}).get("scaleTargetRef") if isinstance(o.get("spec"), dict) else None
    if isinstance(ref, dict) and "name" in ref and not is_label(str(ref["name"])):
        out.append(Problem(file, "spec.scaleTargetRef.name", "rfc1123-name", f"{ref['name']!r} is not an RFC 1123 label"))
    if kind == "HorizontalPodAutoscaler":
        _hpa(file, o, out)
    elif kind == "ScaledObject":
        _scaled_object(file, o, out)
    elif kind == "Queue" and str(o.get("apiVersion", "")).startswith("scheduling.volcano.sh/"):
        _queue(file, o, out)
    elif kind == "DispatcherPolicy":
        _policy_params(file, o, out)
    return out


def _policy_params(file: str, o: dict, out: list[Problem]) -> None:
    """Inference params a hand edit broke (the schema only says ``params`` is an object):
    :func:`optimizer.exporters.policy.param_problems` per ``spec.series`` entry."""
    from optimizer.exporters.policy import param_problems  # the policy writer imports this module's caller

    series = (o.get("spec") or {}).get("series") if isinstance(o.get("spec"), dict) else None
    for i, e in enumerate(series if isinstance(series, list) else []):
        for field, rule in param_problems(e):
            out.append(Problem(file, f"spec.series[{i}].{field}", "policy-params", rule))


def lint(items: list[tuple[str, dict]], root: Path | None = None) -> list[Problem]:
    """All rules over ``(file, object)`` pairs; cross-object rules apply per folder."""
    out: list[Problem] = []
    for f, o in items:
        out += lint_object(f, o)
    by_dir: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for f, o in items:
        by_dir[f.split("#")[0].rpartition("/")[0]].append((f, o))
    for folder, group in sorted(by_dir.items()):
        seen: dict[tuple, str] = {}
        targets: dict[tuple, str] = {}
        for f, o in group:
            if isinstance(o, dict) and o.get("kind") == "Kustomization" and root is not None:
                out += _kustomization(f, o, root)
            if not isinstance(o, dict) or "kind" not in o or not isinstance(o.get("metadata"), dict):
                continue
            kind = o["kind"]
            ns = None if kind in CLUSTER_SCOPED else o["metadata"].get("namespace", "default")
            key = (str(o.get("apiVersion", "")).rpartition("/")[0], kind, ns, o["metadata"].get("name"))
            if key in seen:
                out.append(Problem(f, "metadata.name", "unique-name",
                                   f"{kind} {key[3]!r} in namespace {ns or '(cluster)'} is also defined in {seen[key]}"))
            else:
                seen[key] = f
            if kind in ("HorizontalPodAutoscaler", "ScaledObject"):
                ref = (o.get("spec") or {}).get("scaleTargetRef") or {}
                tkey = (ns, ref.get("kind", "Deployment"), ref.get("name"))
                if tkey in targets:
                    out.append(Problem(f, "spec.scaleTargetRef", "one-autoscaler-per-target",
                                       f"{tkey[1]} {tkey[2]!r} is already scaled by {targets[tkey]}"))
                else:
                    targets[tkey] = f
    return out


def _kustomization(file: str, o: dict, root: Path) -> list[Problem]:
    out = []
    here = (root / file.split("#")[0]).parent
    listed = set()
    for i, r in enumerate(o.get("resources") or []):
        p = (here / str(r))
        listed.add(p.resolve())
        if not p.exists():
            out.append(Problem(file, f"resources[{i}]", "kustomization-resources", f"{r!r} does not exist"))
    for p in sorted(here.iterdir()):
        if p.is_file() and p.suffix in YAML_SUFFIXES and p.name not in ("kustomization.yaml", "kustomization.yml",
                                                                        "Kustomization") \
                and p.resolve() not in listed:
            out.append(Problem(file, "resources", "kustomization-resources", f"{p.name} is not listed"))
    return out
