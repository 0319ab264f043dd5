"""Manifest writers: the dispatcher policy, HPA, KEDA ScaledObject and Volcano Queue.

``write_all(plans, out_dir, settings)`` writes ``policy.yaml`` and
``manifests/`` for a list of :class:`optimizer.policy.SeriesPlan`.

GPU utilisation is not a Kubernetes Resource metric (Resource metrics are cpu
and memory only), so the HPA scales on an **External** metric served by
prometheus-adapter from DCGM, and the KEDA ScaledObject uses a ``prometheus``
trigger with an explicit PromQL aggregation.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from optimizer.policy import SeriesPlan

API_POLICY = "capplan.io/v1alpha1"


def k8s_name(series_id: str) -> str:
    """RFC 1123 label from a series id: lower case, [a-z0-9-], at most 63 chars."""
    s = re.sub(r"[^a-z0-9-]+", "-", series_id.lower()).strip("-")
    return (s or "series")[:63].rstrip("-")


def _hpa(p: SeriesPlan, name: str, ns: str) -> dict:
    pr = p.params
    target_pct = round(100 * pr["target_utilization"])
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/managed-by": "capplan"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": max(1, int(pr["min_replicas"])),
            "maxReplicas": int(pr["max_replicas"]),
            "metrics": [{
                "type": "External",
                "external": {
                    "metric": {"name": "capplan_gpu_utilization_percent",
                               "selector": {"matchLabels": {"deployment": name}}},
                    # AverageValue: per-replica percent of DCGM_FI_DEV_GPU_UTIL
                    "target": {"type": "AverageValue", "averageValue": str(target_pct)},
                },
            }],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": int(pr["scale_up_window_s"]), "selectPolicy": "Max",
                            "policies": [{"type": "Percent", "value": int(pr["scale_up_percent"]),
                                          "periodSeconds": int(pr["period_s"])}]},
                "scaleDown": {"stabilizationWindowSeconds": int(pr["scale_down_window_s"]), "selectPolicy": "Max",
                              "policies": [{"type": "Percent", "value": int(pr["scale_down_percent"]),
                                            "periodSeconds": int(pr["period_s"])}]},
            },
        },
    }


def _scaled_object(p: SeriesPlan, name: str, ns: str, prom_url: str) -> dict:
    pr = p.params
    target_pct = round(100 * pr["target_utilization"])
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "scaleTargetRef": {"name": name},
            "minReplicaCount": max(1, int(pr["min_replicas"])),
            "maxReplicaCount": int(pr["max_replicas"]),
            "fallback": {"failureThreshold": 3, "replicas": int(pr["max_replicas"])},
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _hpa(p, name, ns)["spec"]["behavior"]}},
            "triggers": [{
                "type": "prometheus",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": prom_url,
                    "query": f'sum(DCGM_FI_DEV_GPU_UTIL{{namespace="{ns}", pod=~"{name}-.*"}})',
                    "threshold": str(target_pct),  # per replica (AverageValue): percent GPU utilisation
                    "activationThreshold": "5",
                    "ignoreNullValues": "false",
                },
            }],
        },
    }


def _queue(p: SeriesPlan, name: str) -> dict:
    pl = p.plan
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "weight": 1,
            "reclaimable": True,
            "guarantee": {"resource": {"nvidia.com/gpu": str(pl["reserved_gpus"])}},
            "deserved": {"nvidia.com/gpu": str(pl["deserved_gpus"])},
            "capability": {"nvidia.com/gpu": str(pl["capability_gpus"])},
        },
    }


def _policy(plans: list[SeriesPlan]) -> dict:
    return {
        "apiVersion": API_POLICY,
        "kind": "DispatcherPolicy",
        "metadata": {"name": "capplan"},
        "spec": {"series": [
            {"seriesId": p.series_id, "kind": p.kind, "unit": p.unit, "gpuModel": p.gpu_model,
             "params": p.params, "plan": p.plan, "forecastVersion": p.forecast_version,
             "expected": {"recommended": p.recommended.model_dump(), "baseline": p.baseline.model_dump()}}
            for p in plans]},
    }


def write_all(plans: list[SeriesPlan], out_dir: Path, settings: dict | None = None) -> list[Path]:
    """Write ``policy.yaml`` and ``manifests/*.yaml`` under ``out_dir``. Returns the paths."""
    settings = settings or {}
    ns = settings.get("namespace", "default")
    prom = settings.get("prometheus_url", "http://prometheus.monitoring.svc:9090")
    out_dir = Path(out_dir)
    man = out_dir / "manifests"
    man.mkdir(parents=True, exist_ok=True)
    paths = []
    pol = out_dir / "policy.yaml"
    pol.write_text(yaml.safe_dump(_policy(plans), sort_keys=False))
    paths.append(pol)
    for p in plans:
        name = k8s_name(p.series_id)
        docs = [_hpa(p, name, ns), _scaled_object(p, name, ns, prom)] if p.kind == "inference" else [_queue(p, name)]
        for d in docs:
            f = man / f"{name}-{d['kind'].lower()}.yaml"
            f.write_text(yaml.safe_dump(d, sort_keys=False))
            paths.append(f)
    return paths
