"""Schema validation of exported files (run on every write and by ``capplan export --validate``).

* Built-in kinds (HorizontalPodAutoscaler, PriorityClass, ...) are checked with
  ``kubernetes-validate`` in **strict** mode (unknown fields are errors), using
  the schemas it ships (offline).
* KEDA (``keda.sh``), Volcano (``scheduling.volcano.sh``) and Kueue (``kueue.x-k8s.io``) objects are
  checked with ``jsonschema`` against the CRDs in ``schemas/`` (see
  ``schemas/README.md``), made strict the way the API server prunes unknown
  fields: ``additionalProperties: false`` wherever a CRD lists ``properties``
  without ``x-kubernetes-preserve-unknown-fields``.
* ``policy.yaml`` against ``schemas/dispatcherpolicy.schema.json`` and against
  the DispatcherPolicy CRD generated from it
  (``schemas/capplan.io_dispatcherpolicies.yaml``, :mod:`.crd`); the
  kustomization and the prometheus-adapter rules against small schemas here.

Then the semantic rules of :mod:`.lint` run over everything. Every finding is
a :class:`Problem` (file, JSON path, rule, message).
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

import jsonschema
import yaml

from optimizer.exporters.checks.lint import lint
from optimizer.exporters.checks.problem import YAML_SUFFIXES, ExportValidationError, Problem, yaml_problem
from optimizer.exporters.checks.schemas import default_schemas_dir

SCHEMA_FILES = {
    ("keda.sh", "ScaledObject"): "keda.sh_scaledobjects.yaml",
    ("keda.sh", "TriggerAuthentication"): "keda.sh_triggerauthentications.yaml",
    ("scheduling.volcano.sh", "Queue"): "scheduling.volcano.sh_queues.yaml",
    ("kueue.x-k8s.io", "ResourceFlavor"): "kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io", "ClusterQueue"): "kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io", "LocalQueue"): "kueue.x-k8s.io_localqueues.yaml",
    ("capplan.io", "DispatcherPolicy"): "capplan.io_dispatcherpolicies.yaml",  # generated, optimizer.exporters.crd
}
POLICY_SCHEMA = "dispatcherpolicy.schema.json"

KUSTOMIZATION_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "resources"],
    "properties": {
        "apiVersion": {"const": "kustomize.config.k8s.io/v1beta1"},
        "kind": {"const": "Kustomization"},
        "resources": {"type": "array", "items": {"type": "string", "minLength": 1}},
    },
}
ADAPTER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["externalRules"],
    "properties": {"externalRules": {"type": "array", "items": {
        "type": "object", "additionalProperties": False,
        "required": ["seriesQuery", "metricsQuery", "name"],
        "properties": {
            "seriesQuery": {"type": "string", "minLength": 1},
            "seriesFilters": {"type": "array"},
            "resources": {"type": "object", "properties": {
                "overrides": {"type": "object"}, "template": {"type": "string"}, "namespaced": {"type": "boolean"}}},
            "name": {"type": "object", "additionalProperties": False, "required": ["as"],
                     "properties": {"matches": {"type": "string"}, "as": {"type": "string", "minLength": 1}}},
            "metricsQuery": {"type": "string", "pattern": "<<\\.Series>>"},
        }}}},
}


def json_path(parts) -> str:
    out = ""
    for x in parts:
        out += f"[{x}]" if isinstance(x, int) else (f".{x}" if out else str(x))
    return out


def _strict(node):
    """Copy of an OpenAPI v3 CRD schema with unknown fields forbidden (API-server pruning semantics)."""
    if isinstance(node, list):
        return [_strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items()}
    if (out.get("type") == "object" and "properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    for ex, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if out.get(ex) is True and bound in out:  # OpenAPI v3.0 boolean form -> JSON Schema number
            out[ex] = out.pop(bound)
        elif out.get(ex) is False:
            out.pop(ex)
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        out.pop("type", None)
    return out


@lru_cache(maxsize=None)
def crd_schema(schemas_dir: str, group: str, kind: str, version: str) -> dict | None:
    """The strict JSON Schema of ``group/version`` ``kind`` from its CRD file, or None if not served."""
    fname = SCHEMA_FILES.get((group, kind))
    if fname is None:
        return None
    crd = yaml.safe_load((Path(schemas_dir) / fname).read_text())
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            s = copy.deepcopy(v["schema"]["openAPIV3Schema"])
            s = _strict(s)
            # metadata is checked by lint (names); the CRD leaves it open
            return s
    return None


@lru_cache(maxsize=None)
def policy_schema(schemas_dir: str) -> dict:
    return json.loads((Path(schemas_dir) / POLICY_SCHEMA).read_text())


def _jsonschema_problems(obj, schema, file: str, rule: str) -> list[Problem]:
    v = jsonschema.Draft202012Validator(schema)
    return [Problem(file, json_path(e.absolute_path), rule, e.message)
            for e in sorted(v.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))]


def validate_object(obj, file: str, schemas_dir: str | Path | None = None, k8s_version: str = "1.30") -> list[Problem]:
    """Schema problems of one parsed document (empty list when valid)."""
    import kubernetes_validate as kv

    sd = str(schemas_dir or default_schemas_dir())
    if not isinstance(obj, dict):
        return [Problem(file, "", "schema", f"expected a mapping, got {type(obj).__name__}")]
    if "externalRules" in obj and "kind" not in obj:
        return _jsonschema_problems(obj, ADAPTER_SCHEMA, file, "schema:prometheus-adapter")
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return [Problem(file, "", "schema", "apiVersion and kind are required")]
    if kind == "Kustomization":
        return _jsonschema_problems(obj, KUSTOMIZATION_SCHEMA, file, "schema:kustomization")
    if kind == "DispatcherPolicy":
        # the JSON Schema (with the per-kind rules), then the CRD the API server applies
        found = _jsonschema_problems(obj, policy_schema(sd), file, "schema:dispatcherpolicy")
        s = crd_schema(sd, "capplan.io", kind, api.rpartition("/")[2]) if api.startswith("capplan.io/") else None
        seen = {p.path for p in found}
        if s is not None:
            found += [p for p in _jsonschema_problems(obj, s, file, "schema:crd/DispatcherPolicy")
                      if p.path not in seen]
        return found
    group, _, version = api.rpartition("/")
    if (group, kind) in SCHEMA_FILES:
        s = crd_schema(sd, group, kind, version)
        if s is None:
            return [Problem(file, "apiVersion", "schema:crd", f"{api} {kind} is not served by the CRD in {sd}")]
        return _jsonschema_problems(obj, s, file, f"schema:crd/{kind}")
    try:
        kv.validate(obj, k8s_version, strict=True)
    except kv.ValidationError as e:
        return [Problem(file, json_path(e.path), "schema:kubernetes", e.message)]
    except kv.SchemaNotFoundError as e:
        return [Problem(file, "kind", "unknown-kind", e.message)]
    return []


def load_docs(path: Path, rel: str) -> tuple[list[dict], list[Problem]]:
    """Parse a YAML/JSON file (``yaml.safe_load_all``); empty documents are skipped."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return [], [Problem(rel, "", "yaml-parse", yaml_problem(exc))]
    return docs, []


def validate_files(root: str | Path, rels: list[str], schemas_dir: str | Path | None = None,
                   k8s_version: str = "1.30") -> list[Problem]:
    """Every problem in the files ``rels`` (paths relative to ``root``): schemas, then lint rules.
    JSON files without an ``apiVersion`` (data such as ``report.json``) are skipped."""
    root = Path(root)
    problems: list[Problem] = []
    items: list[tuple[str, dict]] = []
    for rel in sorted(rels):
        f = root / rel
        docs, probs = load_docs(f, rel)
        problems += probs
        if f.suffix == ".json" and not any(isinstance(d, dict) and "apiVersion" in d for d in docs):
            continue
        for i, d in enumerate(docs):
            label = rel if len(docs) == 1 else f"{rel}#{i}"
            problems += validate_object(d, label, schemas_dir, k8s_version)
            items.append((label, d))
    return problems + lint(items, root)


def validate_dir(folder: str | Path, schemas_dir: str | Path | None = None, k8s_version: str = "1.30") -> list[Problem]:
    """Every problem in the YAML/JSON files under ``folder`` (schemas, then lint rules).

    Raises
    ------
    FileNotFoundError: ``folder`` does not exist.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder")
    rels = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES]
    return validate_files(root, rels, schemas_dir, k8s_version)


__all__ = ["validate_dir", "validate_files", "validate_object", "load_docs", "Problem", "ExportValidationError",
           "YAML_SUFFIXES", "default_schemas_dir"]
