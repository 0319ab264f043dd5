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
  ``AverageValue`` triggers, which all of these are. ``replicas`` is the plan's
  p95 need for the next 24 h (:func:`optimizer.inference.prescale.fallback_replicas`),
  so an outage holds forecast demand instead of ``maxReplicaCount``;
* ``advanced.horizontalPodAutoscalerConfig.behavior`` from the tuned policy;
* with the ``lookahead`` family (:mod:`optimizer.inference.lookahead`), a second ``prometheus`` trigger
  ``lookahead`` whose query is the level plus the tuned quantile of its errors
  (:func:`lookahead_trigger`), ``threshold`` 100 x GPUs per replica (replicas at 100 %), and no
  cron windows (the family does not use the forecast peaks);
* with the ``hpa`` family, one ``cron`` trigger per forecast peak
  (:func:`optimizer.inference.prescale.prescale_windows`)
  (``timezone``, ``start``, ``end``, ``desiredReplicas``). The HPA takes the
  largest of the triggers, so pre-scaling only ever adds replicas. The cron
  fields are the window's weekday and time in the series' timezone, so a
  window repeats weekly until the next plan replaces it; a window lasts as
  long as its peak, never a day or more (:func:`cron_window` refuses);
* authentication only when the config names credentials (``keda_auth.mode``
  ``bearer``/``basic``, which ``mode: auto`` takes from ``prometheus:``): a
  ``TriggerAuthentication`` that references a Secret (``secretTargetRef``);
  the Secret itself is not written. Otherwise a plain trigger;
* ``serverAddress`` from the config, or a placeholder marked in a comment;
* a comment on each tuned number: where it came from and what the baseline
  would have used.

"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from optimizer.exporters.base import SCALE_TO_ZERO_ANNOTATION, Context, Doc, register
from optimizer.exporters.hpa import (
    LOOKAHEAD_NOTE,
    behavior,
    behavior_notes,
    min_replicas,
    pod_regex,
    quantity,
    replica_notes,
    target_percent,
)
from optimizer.exporters.predictive import NOTE as PREDICTIVE_NOTE
from optimizer.exporters.predictive import predictive_trigger, uses_predictive
from optimizer.exporters.settings import PROMETHEUS_PLACEHOLDER
from optimizer.inference.lookahead import promql
from optimizer.plan.policy import InferenceParams, SeriesPlan

AUTH_NAME = "capplan-prometheus"
THRESHOLD_NOTE = ("per replica (metricType AverageValue): percent points of summed DCGM_FI_DEV_GPU_UTIL "
                  "per replica = target_utilization x 100 x GPUs per replica")
ACTIVATION_NOTE = "whole query result in percent points (not per replica); decides 0 <-> 1 only"
NULL_NOTE = "empty result = error (fallback), never zero load"
PLACEHOLDER_NOTE = ("PLACEHOLDER: no Prometheus address in capplan.yaml; prometheus-operator's default Service. "
                    "Set export.prometheus_url")
MAX_WINDOW = dt.timedelta(days=1)


def _local(iso: str, z: ZoneInfo) -> dt.datetime:
    t = dt.datetime.fromisoformat(iso)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(z)


def cron_window(start_iso: str, end_iso: str, tz: str) -> tuple[str, str]:
    """Weekly cron expressions (``m h * * dow``, Sunday = 0) for a UTC window, in zone ``tz``.

    Raises
    ------
    ValueError: the end is not after the start, or the window lasts more than a day (a
        weekly cron pair cannot say "this week only", so such a window would repeat as
        a standing floor; :func:`optimizer.inference.prescale.prescale_windows` never makes one).
    """
    z = ZoneInfo(tz)
    a, b = _local(start_iso, z), _local(end_iso, z)
    if b <= a:
        raise ValueError(f"pre-scaling window {start_iso} .. {end_iso}: the end is not after the start")
    if b - a > MAX_WINDOW:
        raise ValueError(f"pre-scaling window {start_iso} .. {end_iso} lasts {b - a}; at most a day")

    def expr(t: dt.datetime) -> str:
        return f"{t.minute} {t.hour} * * {t.isoweekday() % 7}"

    return expr(a), expr(b)


def lookahead_trigger(series_query: str, p: InferenceParams, gpus_per_replica: int, prom: dict,
                      scrape_s: int = 60) -> dict:
    """The ``lookahead`` family's trigger (:mod:`optimizer.inference.lookahead`): a ``prometheus`` trigger
    on :func:`optimizer.inference.lookahead.promql` of the service's summed GPU utilisation (percent points),
    ``AverageValue`` with ``threshold`` = 100 x GPUs per replica, so the HPA asks for
    ``ceil(level + margin)`` replicas at 100 % utilisation; server and authentication as the
    utilisation trigger ``prom``; ``scrape_s``: the exporter's scrape interval (s), the resolution
    of each step's peak (:func:`optimizer.inference.lookahead.promql`)."""
    md = {k: v for k, v in prom["metadata"].items() if k not in ("query", "threshold", "activationThreshold")}
    md.update({"query": promql(series_query, p, scrape_s), "threshold": quantity(100.0 * gpus_per_replica)})
    out = {"type": "prometheus", "name": "lookahead", "metricType": "AverageValue", "metadata": md}
    if "authenticationRef" in prom:
        out["authenticationRef"] = prom["authenticationRef"]
    return out


def add_predictive(plan: SeriesPlan, ctx: Context, p: InferenceParams, prom: dict, triggers: list,
                   notes: dict) -> bool:
    """Append the predicted-demand trigger (:mod:`optimizer.exporters.predictive`) when the service uses
    it; returns whether it did (then no cron windows are written)."""
    if not uses_predictive(p, ctx):
        return False
    triggers.append(predictive_trigger(plan, ctx, prom, quantity(p.target_utilization)))
    notes[f"spec.triggers[{len(triggers) - 1}].metadata.threshold"] = PREDICTIVE_NOTE
    return True


def fallback_replicas(plan: SeriesPlan, p: InferenceParams, ctx: Context, lo: int) -> tuple[int, str]:
    """``(replicas, comment)`` for KEDA ``fallback``: the configured value, else the plan's
    ``fallback_replicas`` (p95 need for the next 24 h), else (a policy written before
    that field existed) the largest pre-scale need or ``lo``; within ``[lo, max_replicas]``."""
    n = ctx.settings.fallback_replicas
    why = "export.fallback_replicas"
    if n is None and plan.plan.get("fallback_replicas") is not None:
        n = plan.plan["fallback_replicas"]
        why = (f"forecast p95 need over the next 24 h at target {p.target_utilization:.2f}; "
               "baseline: none (KEDA keeps the last scale)")
    if n is None:
        needs = [int(w["desired_replicas"]) for w in plan.plan.get("prescale") or []]
        n = max(needs) if needs else lo
        why = "largest forecast pre-scale need (policy has no fallbackReplicas)"
    return min(max(int(n), lo), int(p.max_replicas)), why


def scaled_object(plan: SeriesPlan, ctx: Context) -> Doc:
    s = ctx.settings
    p = InferenceParams(**plan.params)
    t = ctx.target(plan)
    name = ctx.names[plan.series_id]
    lo = min_replicas(p, s.allow_scale_to_zero)
    query = f'sum({s.gpu_metric}{{{s.namespace_label}="{t.namespace}",{s.pod_label}=~"{pod_regex(t.name, t.kind)}"}})'
    md = {
        "serverAddress": s.server_address,
        "query": query,
        "threshold": quantity(target_percent(p, t.gpus_per_replica)),
        "activationThreshold": quantity(s.activation_threshold_percent),
        "ignoreNullValues": "false",
    }
    if s.custom_headers:  # KEDA Prometheus scaler `customHeaders`: name=value,name=value (e.g. a Mimir tenant)
        md["customHeaders"] = ",".join(f"{k}={v}" for k, v in s.custom_headers.items())
    prom = {"type": "prometheus", "name": "gpu-utilization", "metricType": "AverageValue", "metadata": md}
    if s.auth_mode != "none":
        md["authModes"] = s.auth_mode
        prom["authenticationRef"] = {"name": AUTH_NAME, "kind": "TriggerAuthentication"}
    triggers = [prom]
    tz = plan.timezone or "UTC"
    z = ZoneInfo(tz)
    quant = p.prescale_quantile
    notes = {**replica_notes(plan, p),
             **behavior_notes(p, "spec.advanced.horizontalPodAutoscalerConfig.behavior"),
             "spec.triggers[0].metadata.threshold": f"{THRESHOLD_NOTE}; tuned target {p.target_utilization:.2f}, "
                                                    "baseline 70 (scale up above 70 %)",
             "activationThreshold": ACTIVATION_NOTE, "ignoreNullValues": NULL_NOTE,
             "spec.triggers[0].metadata.serverAddress": PLACEHOLDER_NOTE if s.prometheus_url is None else
             "from capplan.yaml"}
    if p.family == "lookahead":
        triggers.append(lookahead_trigger(query, p, t.gpus_per_replica, prom, ctx.settings.scrape_seconds))
        notes[f"spec.triggers[{len(triggers) - 1}].metadata.threshold"] = LOOKAHEAD_NOTE
    predictive = add_predictive(plan, ctx, p, prom, triggers, notes)
    for i, w in enumerate(plan.plan.get("prescale") if p.family == "hpa" and not predictive else []):
        start, end = cron_window(w["start"], w["end"], tz)
        want = min(max(int(w["desired_replicas"]), lo), int(p.max_replicas))
        triggers.append({"type": "cron", "name": f"prescale-{i}",
                         "metadata": {"timezone": tz, "start": start, "end": end, "desiredReplicas": str(want)}})
        a, b = _local(w["start"], z), _local(w["end"], z)
        notes[f"spec.triggers[{len(triggers) - 1}].metadata.desiredReplicas"] = (
            f"forecast {quant} peak {a:%a %H:%M}-{b:%H:%M} {tz} / target {p.target_utilization:.2f}, "
            f"{p.prescale_lead_s} s early (tuned lead); baseline: no pre-scaling")
    meta = ctx.meta(plan, name, t.namespace)
    if lo == 0:
        meta["annotations"][SCALE_TO_ZERO_ANNOTATION] = "true"
    fb, fb_note = fallback_replicas(plan, p, ctx, max(lo, 1))
    notes["spec.fallback.replicas"] = fb_note
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
            "fallback": {"failureThreshold": s.fallback_failure_threshold, "replicas": fb},
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior(p)}},
            "triggers": triggers,
        },
    }
    folder = "manifests" if s.autoscaler == "keda" else "alternatives/keda"
    return Doc(f"{folder}/{name}-scaledobject.yaml", obj, notes=notes,
               header=f"KEDA ScaledObject for series {plan.series_id} (forecast {plan.forecast_version})")


def trigger_auth(namespace: str, ctx: Context) -> dict:
    a = ctx.settings.keda_auth
    if ctx.settings.auth_mode == "bearer":
        refs = [{"parameter": "bearerToken", "name": a.secret_name, "key": a.bearer_key}]
    else:
        refs = [{"parameter": "username", "name": a.secret_name, "key": a.username_key},
                {"parameter": "password", "name": a.secret_name, "key": a.password_key}]
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": ctx.meta(None, AUTH_NAME, namespace), "spec": {"secretTargetRef": refs}}


def warnings(plans: list[SeriesPlan], ctx: Context) -> dict[str, list[str]]:
    """``series_id -> messages`` a user must act on before applying the ScaledObjects."""
    out: dict[str, list[str]] = {}
    for p in plans:
        if p.kind != "inference":
            continue
        if ctx.settings.prometheus_url is None:
            out.setdefault(p.series_id, []).append(
                f"export: KEDA serverAddress is a placeholder ({PROMETHEUS_PLACEHOLDER}); set export.prometheus_url "
                "or prometheus.url")
        family = p.params.get("family", "hpa")
        if ctx.settings.predictive_metric and family != "predictive":  # what runs is not what was replayed
            out.setdefault(p.series_id, []).append(
                f"export: export.predictive_metric adds capplan serve's predicted demand to the recommended {family} "
                "policy (replacing its cron windows); the recommended figures are the replay of that policy without "
                "it (python -m benchmarks predictive compares the two)")
    return out


@register("keda")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """A ScaledObject per inference series and, when the config names credentials, a
    TriggerAuthentication per namespace used."""
    inf = [p for p in plans if p.kind == "inference"]
    docs = [scaled_object(p, ctx) for p in inf]
    if inf and ctx.settings.auth_mode != "none":
        folder = "manifests" if ctx.settings.autoscaler == "keda" else "alternatives/keda"
        for ns in sorted({ctx.target(p).namespace for p in inf}):
            docs.append(Doc(f"{folder}/{AUTH_NAME}-{ns}-triggerauthentication.yaml", trigger_auth(ns, ctx),
                            header=f"Create the Secret {ctx.settings.keda_auth.secret_name!r} in namespace {ns} "
                                   "yourself; capplan never writes credentials."))
    return docs
