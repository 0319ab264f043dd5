"""The autoscaler rules of :mod:`.lint`: HPA ``autoscaling/v2`` and KEDA ScaledObject
(rule ids and sources in :mod:`.lint`'s table).
"""

from __future__ import annotations

import re
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jsonschema

from optimizer.exporters.checks.problem import Problem

RESOURCE_METRICS = {"cpu", "memory"}
WINDOW_RANGE = (0, 3600)
PERIOD_RANGE = (1, 1800)
KEDA_DEFAULT_MAX = 100
PERCENT_METRIC = re.compile(r"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_MEM_COPY_UTIL|_percent\b|capplan_gpu_util", re.I)
RATIO_METRIC = re.compile(r"DCGM_FI_PROF_|_ratio\b", re.I)
CRED_KEYS = {"bearertoken", "password", "username", "token", "apikey", "key", "cert", "ca", "customauthvalue"}
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


#: the suffixes of a Kubernetes quantity (``k8s.io/apimachinery/pkg/api/resource``, ``quantity.go``): binary SI,
#: decimal SI; a decimal exponent (``5e2``) is handled apart
_SUFFIX = {"": 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40, "Pi": 2.0 ** 50, "Ei": 2.0 ** 60}
_QUANTITY = re.compile(r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)\s*")


def number(x) -> float | None:
    """Parse a number or a Kubernetes quantity (``70``, ``65.5``, ``500m``, ``5e2``, ``1Ki``); None if not one."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        m = _QUANTITY.fullmatch(x)
        if m:
            if m.group(2) is not None:
                return float(m.group(1)) * 10.0 ** int(m.group(2))
            return float(m.group(1)) * _SUFFIX[m.group(3) or ""]
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
    v = number(value)
    if v is None:
        return
    if PERCENT_METRIC.search(metric_name or "") and 0 < v <= 1:
        out.append(Problem(file, path, "metric-units",
                           f"{value!r} looks like a ratio, but {metric_name} is in percent (0-100): write {v * 100:g}"))
    elif RATIO_METRIC.search(metric_name or "") and (mtype == "Value") and v > 1:
        out.append(Problem(file, path, "metric-units",
                           f"{value!r} looks like a percent, but {metric_name} is a ratio (0-1): write {v / 100:g}"))


def hpa_rules(file: str, o: dict, out: list[Problem]) -> None:
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


def scaled_object_rules(file: str, o: dict, out: list[Problem]) -> None:
    spec = o.get("spec") or {}
    ann = (o.get("metadata") or {}).get("annotations") or {}
    lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", KEDA_DEFAULT_MAX)
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        out.append(Problem(file, "spec.minReplicaCount", "replica-bounds",
                           f"minReplicaCount {lo} > maxReplicaCount {hi}"))
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
        thr = number(md.get("threshold")) if "threshold" in md else None
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
                "'true' or 'false'" if e.schema == _BOOL else
                f"expected {e.schema.get('enum') or e.schema['pattern']}") + ")"
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
