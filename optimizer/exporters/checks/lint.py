"""Semantic rules that schemas cannot express. Each rule has an id used in reports.

* ``resource-metric-cpu-memory``: HPA ``Resource``/``ContainerResource`` metrics name only ``cpu`` or ``memory`` (GPU
  utilisation is not one: use External/Pods) (source: Kubernetes docs, "Horizontal Pod Autoscaling")
* ``stabilization-window-range``: ``stabilizationWindowSeconds`` within 0–3600 (source: HPA API, HPAScalingRules)
* ``period-seconds-range``: ``periodSeconds`` within 1–1800 (source: HPA API, HPAScalingPolicy)
* ``replica-bounds``: ``minReplicas`` <= ``maxReplicas`` (HPA ``minReplicas`` >= 1); KEDA ``minReplicaCount`` <=
  ``maxReplicaCount`` (default 100), 0 only with annotation ``capplan.io/allow-scale-to-zero: "true"``; fallback and
  cron replicas within bounds (source: HPA API; KEDA ScaledObject spec)
* ``metric-units``: targets in the unit of their metric: percent metrics (``DCGM_FI_DEV_GPU_UTIL``, ``*_percent``) need
  values > 1; ratio metrics (``DCGM_FI_PROF_*``, ``*_ratio``) with type Value need values <= 1; ``Utilization`` targets
  only on Resource metrics, ``averageUtilization`` is percent (source: DCGM field reference; HPA API)
* ``rfc1123-name``: ``metadata.name`` and ``scaleTargetRef.name`` are RFC 1123 labels (source: Kubernetes docs, "Object
  Names and IDs")
* ``unique-name``: one object per apiGroup, kind, namespace and name within a folder
* ``cluster-scoped-namespace``: Queue and PriorityClass carry no namespace
* ``one-autoscaler-per-target``: at most one HPA/ScaledObject per workload within a folder (source: KEDA FAQ: do not
  combine an HPA and a ScaledObject on one target)
* ``keda-null-values``: prometheus triggers set ``ignoreNullValues: "false"`` (source: KEDA Prometheus scaler docs)
* ``keda-fallback``: a ScaledObject has ``fallback``; no trigger has ``metricType: Value`` then (source: KEDA "Scaling
  Deployments", fallback)
* ``keda-inline-credentials``: no credentials in trigger metadata; ``authModes`` needs ``authenticationRef`` (source:
  KEDA Authentication docs)
* ``keda-query-single-element``: the PromQL query is one aggregation without ``by``/``without`` (source: KEDA Prometheus
  scaler docs)
* ``cron-trigger``: cron triggers: IANA timezone, 5-field ``start``/``end``, integer ``desiredReplicas``; for
  ``m h * * dow`` pairs, the end is after the start and the window lasts at most a day (a weekly window that wraps round
  holds for a week) (source: KEDA Cron scaler docs)
* ``keda-trigger-metadata``: trigger metadata values by type (``prometheus``, ``cron``, ``cpu``, ``memory``): known
  keys, numbers where KEDA parses numbers (``threshold: 'abc'`` fails), booleans as ``"true"``/``"false"``, an http(s)
  ``serverAddress`` (source: KEDA scaler docs)
* ``volcano-queue-bounds``: 0 <= guarantee <= deserved <= capability per resource (source: Volcano Queue docs)
* ``volcano-queue-quota``: capability <= the pool's quota (annotation ``capplan.io/quota-gpus``) unless
  ``capplan.io/capability-above-quota: "true"``; deserved >= min(GPUs the plan buys (``capplan.io/planned-gpus``),
  capability) (source: :mod:`.volcano`)
* ``kustomization-resources``: every listed resource exists, every manifest in the folder is listed
* ``kueue-quota-bounds``: a ClusterQueue's ``lendingLimit`` <= its ``nominalQuota``; ``borrowingLimit`` only with a
  cohort (``cohortName``, v1beta1 ``cohort``); ``flavorFungibility.preference`` only when both policies are
  ``TryNextFlavor`` (source: Kueue ClusterQueue API ``v1beta2``, its CEL rules and webhook)
* ``kueue-quota-capacity``: per ResourceFlavor that records its capacity (annotation ``capplan.io/capacity-gpus``), no
  ClusterQueue's ``nominalQuota`` of that flavor exceeds it, nor does the sum of the ``nominalQuota`` of the
  ClusterQueues of one cohort (GPU resources: names ending ``gpu``); checked over all files given, since flavors and
  ClusterQueues are cluster-scoped (source: :mod:`.kueue`)
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from optimizer.exporters.checks.lint_autoscalers import hpa_rules, number, scaled_object_rules
from optimizer.exporters.checks.problem import YAML_SUFFIXES, Problem
from optimizer.exporters.names import is_label
from optimizer.exporters.policy_fields import param_problems

CLUSTER_SCOPED = {"Queue", "PriorityClass", "Namespace", "ClusterRole", "ClusterRoleBinding",
                  "CustomResourceDefinition", "ResourceFlavor", "ClusterQueue", "Cohort"}
KUEUE_GROUP = "kueue.x-k8s.io/"
CAPACITY_ANNOTATION = "capplan.io/capacity-gpus"  # written by optimizer.exporters.fleet.kueue on each ResourceFlavor


def _queue_quota(file: str, o: dict, res: str, dv, cv, out: list[Problem]) -> None:
    """Rule ``volcano-queue-quota`` from the annotations :mod:`.volcano` writes."""
    ann = (o.get("metadata") or {}).get("annotations") or {}
    quota, planned = number(ann.get("capplan.io/quota-gpus")), number(ann.get("capplan.io/planned-gpus"))
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
        gv, dv, cv = number(g.get(res)), number(d.get(res)), number(c.get(res))
        for where, v in (("guarantee.resource", gv), ("deserved", dv), ("capability", cv)):
            if v is not None and v < 0:
                out.append(Problem(file, f"spec.{where}.{res}", "volcano-queue-bounds",
                                   f"negative quantity {v:g}: a queue cannot guarantee or hold less than 0"))
        if gv is not None and dv is not None and gv > dv:
            out.append(Problem(file, f"spec.deserved.{res}", "volcano-queue-bounds",
                               f"guarantee {gv:g} > deserved {dv:g}"))
        if dv is not None and cv is not None and dv > cv:
            out.append(Problem(file, f"spec.deserved.{res}", "volcano-queue-bounds",
                               f"deserved {dv:g} > capability {cv:g}"))
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
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                            str(meta.get("name", ""))):
            out.append(Problem(file, "metadata.name", "rfc1123-name",
                               f"{meta.get('name')!r} is not an RFC 1123 subdomain"))
    elif kind not in ("Kustomization",) and "name" in meta and not is_label(str(meta["name"])):
        out.append(Problem(file, "metadata.name", "rfc1123-name",
                           f"{meta['name']!r} is not an RFC 1123 label (lower-case a-z, 0-9, '-', <= 63 chars)"))
    if kind in CLUSTER_SCOPED and meta.get("namespace"):
        out.append(Problem(file, "metadata.namespace", "cluster-scoped-namespace", f"{kind} is cluster-scoped"))
    ref = (o.get("spec") or {}).get("scaleTargetRef") if isinstance(o.get("spec"), dict) else None
    if isinstance(ref, dict) and "name" in ref and not is_label(str(ref["name"])):
        out.append(Problem(file, "spec.scaleTargetRef.name", "rfc1123-name",
                           f"{ref['name']!r} is not an RFC 1123 label"))
    if kind == "HorizontalPodAutoscaler":
        hpa_rules(file, o, out)
    elif kind == "ScaledObject":
        scaled_object_rules(file, o, out)
    elif kind == "Queue" and str(o.get("apiVersion", "")).startswith("scheduling.volcano.sh/"):
        _queue(file, o, out)
    elif kind == "DispatcherPolicy":
        _policy_params(file, o, out)
    elif kind == "ClusterQueue" and str(o.get("apiVersion", "")).startswith(KUEUE_GROUP):
        _cluster_queue_bounds(file, o, out)
    return out


def _quotas(o: dict):
    """``(path, flavor, resource, resource entry)`` of each quota of a ClusterQueue."""
    spec = o.get("spec") if isinstance(o.get("spec"), dict) else {}
    for i, rg in enumerate(spec.get("resourceGroups") or []):
        for j, fl in enumerate(rg.get("flavors") or [] if isinstance(rg, dict) else []):
            for k, r in enumerate(fl.get("resources") or [] if isinstance(fl, dict) else []):
                if isinstance(r, dict):
                    yield f"spec.resourceGroups[{i}].flavors[{j}].resources[{k}]", fl.get("name"), r.get("name"), r


def _cluster_queue_bounds(file: str, o: dict, out: list[Problem]) -> None:
    """Rule ``kueue-quota-bounds``."""
    spec = o.get("spec") if isinstance(o.get("spec"), dict) else {}
    cohort = spec.get("cohortName") or spec.get("cohort")
    for path, flavor, res, r in _quotas(o):
        for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
            if key not in r:
                continue
            q = number(r[key])
            if q is None or q < 0 or (str(res).endswith("gpu") and q != int(q)):
                what = ("not a quantity" if q is None else "negative" if q < 0 else "not a whole number of GPUs")
                out.append(Problem(file, f"{path}.{key}", "kueue-quota-bounds",
                                   f"{key} {r[key]!r} of {res} in flavor {flavor} is {what}"))
        nominal, lending = number(r.get("nominalQuota")), number(r.get("lendingLimit"))
        if nominal is not None and lending is not None and lending > nominal:
            out.append(Problem(file, f"{path}.lendingLimit", "kueue-quota-bounds",
                               f"lendingLimit {lending:g} of {res} in flavor {flavor} is above its nominalQuota "
                               f"{nominal:g}"))
        if "borrowingLimit" in r and not cohort:
            out.append(Problem(file, f"{path}.borrowingLimit", "kueue-quota-bounds",
                               "borrowingLimit must be unset when the ClusterQueue is in no cohort"))
    ff = spec.get("flavorFungibility") if isinstance(spec.get("flavorFungibility"), dict) else {}
    if "preference" in ff and not (ff.get("whenCanBorrow") == ff.get("whenCanPreempt") == "TryNextFlavor"):
        out.append(Problem(file, "spec.flavorFungibility.preference", "kueue-quota-bounds",
                           "preference can only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor"))


def _is_kueue(o, kind: str) -> bool:
    return (isinstance(o, dict) and o.get("kind") == kind and str(o.get("apiVersion", "")).startswith(KUEUE_GROUP)
            and isinstance(o.get("metadata"), dict))


def _kueue_capacity(items: list[tuple[str, dict]]) -> list[Problem]:
    """Rule ``kueue-quota-capacity`` over every file given (flavors and ClusterQueues are cluster-scoped)."""
    capacity: dict[str, float] = {}
    for _, o in items:
        if _is_kueue(o, "ResourceFlavor"):
            cap = number((o["metadata"].get("annotations") or {}).get(CAPACITY_ANNOTATION))
            if cap is not None:
                capacity[str(o["metadata"].get("name"))] = cap
    flavors = {str(o["metadata"].get("name")) for _, o in items if _is_kueue(o, "ResourceFlavor")}
    out: list[Problem] = []
    held: dict[tuple, list[tuple[str, str, str, float]]] = defaultdict(list)  # (cohort, flavor, resource) -> quotas
    for f, o in items:
        if not _is_kueue(o, "ClusterQueue"):
            continue
        spec = o.get("spec") if isinstance(o.get("spec"), dict) else {}
        cohort = spec.get("cohortName") or spec.get("cohort")
        for path, flavor, res, r in _quotas(o):
            if flavors and flavor not in flavors:  # Kueue leaves a ClusterQueue naming a missing flavor inactive
                out.append(Problem(f, f"{path.rsplit('.resources', 1)[0]}.name", "kueue-quota-capacity",
                                   f"flavor {flavor!r} is no ResourceFlavor of this folder "
                                   f"({', '.join(sorted(flavors))}); Kueue leaves the ClusterQueue inactive"))
            nominal = number(r.get("nominalQuota"))
            if flavor not in capacity or nominal is None or not str(res).endswith("gpu"):
                continue
            if nominal > capacity[flavor]:
                out.append(Problem(f, f"{path}.nominalQuota", "kueue-quota-capacity",
                                   f"nominalQuota {nominal:g} of {res} in flavor {flavor} is above the flavor's "
                                   f"capacity of {capacity[flavor]:g} GPUs ({CAPACITY_ANNOTATION})"))
            if cohort:
                held[(cohort, flavor, res)].append((f, path, str(o["metadata"].get("name")), nominal))
    for (cohort, flavor, res), quotas in sorted(held.items()):
        total = sum(q[3] for q in quotas)
        if total > capacity[flavor] and len(quotas) > 1:
            parts = ", ".join(f"{n}: {q:g}" for _, _, n, q in quotas)
            for f, path, _, q in quotas:
                if q > 0:
                    out.append(Problem(f, f"{path}.nominalQuota", "kueue-quota-capacity",
                                       f"the ClusterQueues of cohort {cohort} hold {total:g} nominal {res} in flavor "
                                       f"{flavor} ({parts}), above its capacity of {capacity[flavor]:g} GPUs"))
    return out


def _policy_params(file: str, o: dict, out: list[Problem]) -> None:
    """Params a hand edit broke (the schema only says ``params`` is an object):
    :func:`optimizer.exporters.policy_fields.param_problems` per ``spec.series`` entry."""
    series = (o.get("spec") or {}).get("series") if isinstance(o.get("spec"), dict) else None
    for i, e in enumerate(series if isinstance(series, list) else []):
        for field, rule in param_problems(e):
            out.append(Problem(file, f"spec.series[{i}].{field}", "policy-params", rule))


def lint(items: list[tuple[str, dict]], root: Path | None = None) -> list[Problem]:
    """All rules over ``(file, object)`` pairs; cross-object rules apply per folder."""
    out: list[Problem] = []
    for f, o in items:
        out += lint_object(f, o)
    out += _kueue_capacity(items)
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
                                   f"{kind} {key[3]!r} in namespace {ns or '(cluster)'} is also defined in "
                                   f"{seen[key]}"))
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
