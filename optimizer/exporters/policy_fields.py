"""The field spellings and value rounding of ``policy.yaml`` (camelCase keys, values
rounded for reading) and the check of one ``spec.series`` entry's ``params``.

A leaf module: the policy writer (:mod:`.dispatcher_policy`) and the manifest lint
(:mod:`.lint`) both import it, and it imports neither.
"""

from __future__ import annotations

import math
import re

from pydantic import ValidationError

from optimizer.plan.policy import InferenceParams, TrainingParams

SIGNIFICANT = 4  # digits a human reads in policy.yaml; USD keep cents


def human(x):
    """``x`` rounded for reading: floats to 4 significant digits (at least 2 decimals, so
    USD keep their cents: ``0.7897946257902195`` -> ``0.7898``, ``17797.260000000002`` ->
    ``17797.26``); dicts and lists recursed; other values unchanged."""
    if isinstance(x, dict):
        return {k: human(v) for k, v in x.items()}
    if isinstance(x, list):
        return [human(v) for v in x]
    if isinstance(x, float) and math.isfinite(x):
        if x == int(x):
            return x
        digits = max(SIGNIFICANT - 1 - int(math.floor(math.log10(abs(x)))), 2)
        return round(x, digits)
    return x


def camel(key: str) -> str:
    """``scale_up_window_s`` -> ``scaleUpWindowS``."""
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def snake(key: str) -> str:
    """Inverse of :func:`camel` for keys made of lower-case words and digits."""
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def camel_dict(d: dict) -> dict:
    return {camel(k): v for k, v in d.items()}


def snake_dict(d: dict) -> dict:
    return {snake(k): v for k, v in d.items()}

def param_problems(entry: dict) -> list[tuple[str, str]]:
    """``(path, rule)`` for each reason the ``params`` of one ``spec.series`` entry of a
    DispatcherPolicy cannot drive its autoscaler (``path`` relative to the entry, e.g.
    ``params.minReplicas``): an inference entry's params must be an
    :class:`optimizer.plan.policy.InferenceParams` (what the KEDA/HPA writers render), with
    ``minReplicas`` not above ``maxReplicas`` (Kubernetes' HPA rule), and its ``scaling``
    replica bounds and target must agree with ``params``, which the writers render (a hand
    edit of ``scaling`` alone would change nothing). The rule is pydantic's message or
    capplan's; a value is never repeated (a hand-edited file may hold anything).
    A training entry's params must be an :class:`optimizer.plan.policy.TrainingParams`: the Volcano queue
    reads the capacity, not them, but the object is applied as it is, and a value JSON cannot hold
    (NaN, inf in ``dayErrorsGpus``) fails ``kubectl apply``."""
    if not isinstance(entry, dict) or entry.get("kind") not in ("inference", "training"):
        return []
    params = entry.get("params", {})
    if not isinstance(params, dict):
        return [("params", "must be a mapping")]
    model = InferenceParams if entry["kind"] == "inference" else TrainingParams
    try:
        p = model.model_validate(snake_dict(params))
    except ValidationError as exc:
        return [("params." + ".".join(camel(str(x)) for x in e["loc"]) if e["loc"] else "params", e["msg"])
                for e in exc.errors()]
    if entry["kind"] == "training":
        return []
    out = []
    if p.min_replicas > p.max_replicas:
        out.append(("params.minReplicas", "must not exceed params.maxReplicas"))
    sc = entry.get("scaling", {})
    for key, snake in (("minReplicas", "min_replicas"), ("maxReplicas", "max_replicas"),
                       ("targetUtilization", "target_utilization")):
        v = sc.get(key) if isinstance(sc, dict) else None
        if v is not None and not (isinstance(v, (int, float)) and math.isclose(v, human(getattr(p, snake)),
                                                                                 rel_tol=1e-3)):
            out.append((f"scaling.{key}", f"disagrees with params.{key}, which the manifests are rendered from: "
                                          "edit params (and scaling to match)"))
    return out
