"""KEDA ``ScaledObject`` and ``TriggerAuthentication`` (``keda.sh/v1alpha1``).

Per inference series (KEDA docs "Scaling Deployments", "Prometheus" scaler,
"Cron" scaler, "Authentication"):

* a ``prometheus`` trigger whose query returns **one element**:
  ``sum(DCGM_FI_DEV_GPU_UTIL{namespace=..., pod=~"<deployment>-..."})``
  (percent, 0–100 per GPU, summed over the service's GPUs);
* ``threshold`` is **per replica** because ``metricType`` is ``AverageValue``
  (KEDA's default): the HPA divides the query result by the replica count.
  It is ``target_utilization`` (ratio) × 100 × ``gpus_per_replica``;
* ``activationThreshold`` is compared with the whole query result (it only
  decides 0 <-> 1 replicas);
* ``ignoreNullValues: "false"``: an empty result (Prometheus or exporter
  outage) is an error, not zero load, so ``fallback`` applies instead of a
  scale-down;
* ``fallback`` (``failureThreshold``, ``replicas``) — KEDA supports it only for
  ``AverageValue`` triggers, which all of these are;
* ``advanced.horizontalPodAutoscalerConfig.behavior`` from the tuned policy;
* one ``cron`` trigger per forecast pre-scaling window
  (``timezone``, ``start``, ``end``, ``desiredReplicas``). The HPA takes the
  largest of the triggers, so pre-scaling only ever adds replicas. The cron
  fields are the window's weekday and time in the series' timezone, so a
  window repeats weekly until the next plan replaces it;
* credentials only through a ``TriggerAuthentication`` that references a
  Secret (``secretTargetRef``); the Secret itself is not written.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from optimizer.exporters.base import SCALE_TO_ZERO_ANNOTATION, Context, Doc, register
from optimizer.exporters.hpa import behavior, min_replicas, pod_regex, quantity, target_percent
from optimizer.policy import InferenceParams, SeriesPlan

AUTH_NAME = "capplan-prometheus"
THRESHOLD_NOTE = ("per replica (metricType AverageValue): percent points of summed DCGM_FI_DEV_GPU_UTIL "
                  "per replica = target_utilization x 100 x GPUs per replica")
ACTIVATION_NOTE = "whole query result in percent points (not per replica); decides 0 <-> 1 only"
NULL_NOTE = "empty result = error (fallback), never zero load"


def cron_window(start_iso: str, end_iso: str, tz: str) -> tuple[str, str]:
    """Weekly cron expressions (``m h * * dow``, Sunday = 0) for a UTC window, in zone ``tz``."""
    z = ZoneInfo(tz)

    def expr(iso: str) -> str:
        t = dt.datetime.fromisoformat(iso)
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.timezone.utc)
        t = t.astimezone(z)
        return f"{t.minute} {t.hour} * * {t.isoweekday() % 7}"

    start, end = expr(start_iso), expr(end_iso)
    if start == end:  # a window of whole weeks: KEDA rejects start == end, so end one minute early
        end = expr((dt.datetime.fromisoformat(end_iso) - dt.timedelta(minutes=1)).isoformat())
    return start, end


def fallback_replicas(plan: SeriesPlan, p: InferenceParams, ctx: Context, lo: int) -> int:
    """Configured value, else the largest forecast pre-scale need, else ``max_replicas``; within [lo, max]."""
    n = ctx.settings.fallback_replicas
    if n is None:
        needs = [int(w["desired_replicas"]) for w in plan.plan.get("prescale") or []]
        n = max(needs) if needs else int(p.max_replicas)
    return min(max(int(n), lo), int(p.max_replicas))


def scaled_object(plan: SeriesPlan, ctx: Context) -> Doc:
    s = ctx.settings
    p = InferenceParams(**plan.params)
    t = ctx.target(plan)
    name = ctx.names[plan.series_id]
    lo = min_replicas(p, s.allow_scale_to_zero)
    query = f'sum({s.gpu_metric}{{{s.namespace_label}="{t.namespace}",{s.pod_label}=~"{pod_regex(t.name, t.kind)}"}})'
    md = {
        "serverAddress": s.prometheus_url,
        "query": query,
        "threshold": quantity(target_percent(p, t.gpus_per_replica)),
        "activationThreshold": quantity(s.activation_threshold_percent),
        "ignoreNullValues": "false",
    }
    prom = {"type": "prometheus", "name": "gpu-utilization", "metricType": "AverageValue", "metadata": md}
    if s.keda_auth.mode != "none":
        md["authModes"] = s.keda_auth.mode
        prom["authenticationRef"] = {"name": AUTH_NAME, "kind": "TriggerAuthentication"}
    triggers = [prom]
    tz = plan.timezone or "UTC"
    for i, w in enumerate(plan.plan.get("prescale") or []):
        start, end = cron_window(w["start"], w["end"], tz)
        want = min(max(int(w["desired_replicas"]), lo), int(p.max_replicas))
        triggers.append({"type": "cron", "name": f"prescale-{i}",
                         "metadata": {"timezone": tz, "start": start, "end": end, "desiredReplicas": str(want)}})
    meta = ctx.meta(plan, name, t.namespace)
    if lo == 0:
        meta["annotations"][SCALE_TO_ZERO_ANNOTATION] = "true"
    obj = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": t.kind, "name": t.name},
            "pollingInterval": s.polling_interval_s,
            "cooldownPeriod": s.cooldown_period_s,
            "minReplicaCount": lo,
            "maxReplicaCount": int(p.max_replicas),
            "fallback": {"failureThreshold": s.fallback_failure_threshold,
                         "replicas": fallback_replicas(plan, p, ctx, max(lo, 1))},
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior(p)}},
            "triggers": triggers,
        },
    }
    folder = "manifests" if s.autoscaler == "keda" else "alternatives/keda"
    return Doc(f"{folder}/{name}-scaledobject.yaml", obj,
               notes={"threshold": THRESHOLD_NOTE, "activationThreshold": ACTIVATION_NOTE,
                      "ignoreNullValues": NULL_NOTE},
               header=f"KEDA ScaledObject for series {plan.series_id} (forecast {plan.forecast_version})")


def trigger_auth(namespace: str, ctx: Context) -> dict:
    a = ctx.settings.keda_auth
    if a.mode == "bearer":
        refs = [{"parameter": "bearerToken", "name": a.secret_name, "key": a.bearer_key}]
    else:
        refs = [{"parameter": "username", "name": a.secret_name, "key": a.username_key},
                {"parameter": "password", "name": a.secret_name, "key": a.password_key}]
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": ctx.meta(None, AUTH_NAME, namespace), "spec": {"secretTargetRef": refs}}


@register("keda")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """A ScaledObject per inference series and a TriggerAuthentication per namespace used."""
    inf = [p for p in plans if p.kind == "inference"]
    docs = [scaled_object(p, ctx) for p in inf]
    if inf and ctx.settings.keda_auth.mode != "none":
        folder = "manifests" if ctx.settings.autoscaler == "keda" else "alternatives/keda"
        for ns in sorted({ctx.target(p).namespace for p in inf}):
            docs.append(Doc(f"{folder}/{AUTH_NAME}-{ns}-triggerauthentication.yaml", trigger_auth(ns, ctx),
                            header=f"Create the Secret {ctx.settings.keda_auth.secret_name!r} in namespace {ns} "
                                   "yourself; capplan never writes credentials."))
    return docs
