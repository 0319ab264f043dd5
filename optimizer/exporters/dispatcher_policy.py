"""The dispatcher policy, ``policy.yaml``: capplan's own Kubernetes-style object.

``apiVersion: capplan.io/v1alpha1``, ``kind: DispatcherPolicy``; the published
JSON Schema is ``schemas/dispatcherpolicy.schema.json``. Per series
(``spec.series[]``):

* ``capacity`` (training): the plan for each lead time —
  ``reserved`` (lead ``P7D``, bought weekly), ``onDemand`` and ``spot``
  (lead ``P1D``, bought daily), ``onDemandHourly`` (lead ``PT1H``: the next
  hour's on-demand top-up, present when the policy has an hourly layer; the
  dispatcher recomputes it each hour from ``params.topupQuantile`` and
  ``params.topupHeadroom``), plus ``capabilityGpus``, ``deservedGpus``,
  ``quotaGpus``, ``lastPeakGpus`` (GPU counts);
* ``scaling`` (inference): ``minReplicas``, ``maxReplicas``,
  ``targetUtilization`` (**ratio** 0–1), ``fallbackReplicas``, ``prescale`` windows
  (UTC ISO ``start``/``end``, ``desiredReplicas``) with their lead time;
* ``params``: the tuned parameters, keys in camelCase, units as in
  :mod:`optimizer.plan.policy` (ratios 0–1, ``*Percent`` in percent, ``*S`` seconds);
* ``expected``: ``recommended`` and ``baseline`` replay metrics
  (``costUsd`` in USD, ``coverage`` and ``idleRatio`` ratios, ``unmet`` in
  GPU- or replica-hours), with the purchase ``mix`` (``reserved``, ``spot``, ``onDemand``:
  ``gpuHours``, ``costUsd``) and ``spotRefusedGpuHours``; the file's header comments list each
  series' mix and say which training pools are planned all on spot, and why;
* ``baselineLevels``: what the rules of thumb would set from the last
  day of history (:mod:`optimizer.plan.history_levels`);
* ``forecastVersion``, ``validFrom``, ``fallbacks``.

With a fleet plan, ``spec.fleet`` holds the cohort, per GPU model the ResourceFlavor and purchase mix, and per
team its Kueue quotas (:mod:`.fleet_policy`; ``capplan export`` renders the Kueue objects from it).

Floats are rounded for reading (:func:`human`: 4 significant digits, cents
kept), so ``policy.yaml`` shows ``0.7898``, not ``0.7897946257902195``.

:func:`read_policy` parses the file back into :class:`SeriesPlan` objects;
write -> read gives the same values up to that rounding.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from optimizer.exporters.base import Context, Doc, register
from optimizer.exporters.checks.schemas import default_schemas_dir
from optimizer.exporters.crd import CRD_FILE, SCHEMA_FILE, crd
from optimizer.exporters.fleet.policy_block import fleet_entry
from optimizer.exporters.policy_fields import camel, camel_dict, human, param_problems, snake, snake_dict
from optimizer.plan.policy import Metrics, SeriesPlan

API_VERSION = "capplan.io/v1alpha1"
KIND = "DispatcherPolicy"
PATH = "policy.yaml"
LEAD = {"reserved": "P7D", "onDemand": "P1D", "spot": "P1D", "onDemandHourly": "PT1H"}
_TRAIN_KEYS = {"reserved_gpus": "reserved", "on_demand_gpus": "onDemand", "spot_gpus": "spot",
               "on_demand_hourly_gpus": "onDemandHourly"}
_TRAIN_FLAT = {"capability_gpus": "capabilityGpus", "deserved_gpus": "deservedGpus", "quota_gpus": "quotaGpus",
               "last_peak_gpus": "lastPeakGpus"}
_INF_FLAT = {"min_replicas": "minReplicas", "max_replicas": "maxReplicas", "target_utilization": "targetUtilization",
             "fallback_replicas": "fallbackReplicas"}

#: the header lines of policy.yaml that say who reads what (docs/objects.md)
POLICY_ROLE = (
    "what enforces the plan: manifests/ (kubectl apply -k manifests/): a Volcano Queue per training pool (its GPU",
    "ceiling, held to the quota), a KEDA ScaledObject or HPA per inference service (replicas, target, behaviour),",
    "PriorityClasses, and Kueue ResourceFlavors/ClusterQueues/LocalQueues with a fleet plan. No controller",
    "capplan ships reads this object: it records the plan (the purchase mix per lead time for whoever buys",
    "reserved, spot and on-demand capacity, the tuned params, the expected figures) and is the source",
    "capplan export re-renders manifests/ from; docs/objects.md",
)


def _metrics_entry(m: Metrics) -> dict:
    """A policy's replay figures in camelCase, its purchase ``mix`` too (layers ``reserved``, ``spot``,
    ``onDemand``, each ``{gpuHours, costUsd}``; :func:`optimizer.book.purchase.layer_mix`); ``None``
    values (a run before the mix) are left out."""
    d = {k: v for k, v in m.model_dump().items() if v is not None}
    mix = d.pop("mix", None)
    out = camel_dict(d)
    if mix is not None:
        out["mix"] = {camel(k): camel_dict(v) for k, v in mix.items()}
    return out


def _metrics_of(d: dict) -> Metrics:
    """The inverse of :func:`_metrics_entry`."""
    d = dict(d)
    mix = d.pop("mix", None)
    return Metrics(**snake_dict(d), mix=None if mix is None else {snake(k): snake_dict(v) for k, v in mix.items()})


def mix_comment(p: SeriesPlan) -> str | None:
    """One comment line of ``policy.yaml``'s header: the recommended purchase mix of ``p`` (share of
    GPU-hours and USD per layer), and for a training pool planned all on spot, that it is and why;
    for one that reserves GPUs, why (:mod:`optimizer.training.committed`).
    None when the plan carries no mix."""
    mix = p.recommended.mix
    if not mix:
        return None
    total = sum(v["gpu_hours"] for v in mix.values()) or 1.0
    word = f" (recommendation: {p.recommendation})" if p.recommendation else ""
    line = f"{p.series_id}{word}: " + ", ".join(
        f"{k.replace('_', ' ')} {100 * v['gpu_hours'] / total:.0f} % ({v['cost_usd']:,.0f} USD)"
        for k, v in mix.items())
    if p.kind == "training" and mix["spot"]["gpu_hours"] >= total * 0.995:
        line += ("\n  planned 100 % on spot: spot, with its interruptions priced in, is cheaper than reserved and on\n"
                 "  demand in the price book and no spot cap bound it; set prices.<gpu model>.spot_cap_share or\n"
                 "  spot_cap_gpus to what the account can get (report.json's notes give the prices)")
    elif p.kind == "training" and mix["reserved"]["gpu_hours"] > 0:
        line += ("\n  reserved GPUs are committed for at least prices.<gpu model>.reserved_min_term_days; "
                 "report.json's\n"
                 "  notes say why the plan reserves (e.g. a spot cap whose refused GPUs cost less reserved than on "
                 "demand)")
    return line


def series_entry(p: SeriesPlan, name: str) -> dict:
    pl = dict(p.plan)
    e: dict = {"seriesId": p.series_id, "name": name, "kind": p.kind, "unit": p.unit, "gpuModel": p.gpu_model,
               "timezone": p.timezone, "forecastVersion": p.forecast_version, "validFrom": pl.pop("valid_from", None)}
    if p.kind == "training":
        cap = {v: {"leadTime": LEAD[v], "gpus": pl.pop(k)} for k, v in _TRAIN_KEYS.items() if k in pl}
        cap.update({v: pl.pop(k) for k, v in _TRAIN_FLAT.items() if k in pl})
        e["capacity"] = cap
    else:
        sc = {v: pl.pop(k) for k, v in _INF_FLAT.items() if k in pl}
        windows = pl.pop("prescale", []) or []
        if p.params.get("family", "hpa") == "hpa":  # the lookahead family pre-scales from its own query, no windows
            lead = int(p.params.get("prescale_lead_s", 0))
            sc["prescale"] = {"leadTime": f"PT{lead}S",
                              "windows": [{"start": w["start"], "end": w["end"],
                                           "desiredReplicas": int(w["desired_replicas"])} for w in windows]}
        e["scaling"] = sc
    if "baseline" in pl:
        e["baselineLevels"] = pl.pop("baseline")
    if pl:
        e["planExtra"] = pl
    e["params"] = camel_dict(p.params)
    e["expected"] = {"recommended": _metrics_entry(p.recommended), "baseline": _metrics_entry(p.baseline)}
    if p.recommendation:  # read back by plans_from_policy, so a re-render keeps the header's word
        e["recommendation"] = p.recommendation
    e["fallbacks"] = list(p.fallbacks)
    return human(e)


def policy_object(plans: list[SeriesPlan], ctx: Context) -> dict:
    """The DispatcherPolicy object; ``spec.fleet`` (:func:`optimizer.exporters.fleet.policy_block.fleet_entry`) when the
    export has a fleet quota (``ctx.fleet``)."""
    spec: dict = {"series": [series_entry(p, ctx.names[p.series_id]) for p in plans]}
    if ctx.fleet is not None:
        spec["fleet"] = fleet_entry(ctx.fleet)
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "capplan", "labels": {"app.kubernetes.io/managed-by": "capplan"}}, "spec": spec}


@register("policy")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    mixes = [c for c in (mix_comment(p) for p in plans) if c]
    return [Doc(PATH, policy_object(plans, ctx),
                header="capplan dispatcher policy; schema: schemas/dispatcherpolicy.schema.json\n"
                       + "\n".join(POLICY_ROLE) + "\n"
                       "ratios are 0-1, costs USD, unmet in GPU-hours (training) or replica-hours (inference)"
                       + ("\npurchase mix of the recommendation on the evaluation window (share of GPU-hours, USD):\n"
                          + "\n".join(mixes) if mixes else ""))]


@register("crd")
def write_crd(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """``crds/capplan.io_dispatcherpolicies.yaml``: the CRD that lets ``kubectl apply`` accept policy.yaml."""
    sd = ctx.settings.schemas_dir or default_schemas_dir()
    schema = json.loads((Path(sd) / SCHEMA_FILE).read_text())
    return [Doc(f"crds/{CRD_FILE}", crd(schema),
                header=f"CustomResourceDefinition of {API_VERSION} {KIND}; generated from {SCHEMA_FILE}.\n"
                       "kubectl apply -f crds/ once, then kubectl apply -f policy.yaml")]


def plans_from_policy(obj: dict) -> list[SeriesPlan]:
    """Rebuild :class:`SeriesPlan` objects from a parsed DispatcherPolicy.

    Raises
    ------
    ValueError: not a DispatcherPolicy of this apiVersion, or an inference entry whose
    ``params`` its autoscaler cannot take (:func:`optimizer.exporters.policy_fields.param_problems`; the entry and the
    field named).
    """
    if not isinstance(obj, dict) or obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
        raise ValueError(f"not a {API_VERSION} {KIND}")
    out = []
    for i, e in enumerate(obj["spec"]["series"]):
        bad = param_problems(e)
        if bad:
            field, rule = bad[0]
            raise ValueError(f"spec.series[{i}] ({e.get('seriesId')}): {field}: {rule}")
        plan: dict = {}
        if e["kind"] == "training":
            cap = e.get("capacity", {})
            for k, v in _TRAIN_KEYS.items():
                if v in cap:
                    plan[k] = cap[v]["gpus"]
            for k, v in _TRAIN_FLAT.items():
                if v in cap:
                    plan[k] = cap[v]
        else:
            sc = e.get("scaling", {})
            for k, v in _INF_FLAT.items():
                if v in sc:
                    plan[k] = sc[v]
            plan["prescale"] = [{"start": w["start"], "end": w["end"], "desired_replicas": w["desiredReplicas"]}
                                for w in sc.get("prescale", {}).get("windows", [])]
        if "baselineLevels" in e:
            plan["baseline"] = e["baselineLevels"]
        if e.get("validFrom") is not None:
            plan["valid_from"] = e["validFrom"]
        plan.update(e.get("planExtra", {}))
        out.append(SeriesPlan(
            series_id=e["seriesId"], kind=e["kind"], unit=e["unit"], gpu_model=e.get("gpuModel", "default"),
            timezone=e.get("timezone", "UTC"), params=snake_dict(e.get("params", {})), plan=plan,
            recommended=_metrics_of(e["expected"]["recommended"]),
            baseline=_metrics_of(e["expected"]["baseline"]),
            forecast_version=e.get("forecastVersion", ""), fallbacks=list(e.get("fallbacks", [])),
            recommendation=e.get("recommendation", "")))
    return out


def read_policy(path: str | Path) -> list[SeriesPlan]:
    """Read ``policy.yaml`` (``yaml.safe_load``) back into plans. Raises ValueError / yaml.YAMLError."""
    return plans_from_policy(yaml.safe_load(Path(path).read_text()))
