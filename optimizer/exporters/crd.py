"""The CustomResourceDefinition of ``capplan.io/v1alpha1`` DispatcherPolicy, generated
from ``schemas/dispatcherpolicy.schema.json`` so the two never drift apart.

A CRD's ``openAPIV3Schema`` must be a *structural* schema (Kubernetes docs,
"Extend the Kubernetes API with CustomResourceDefinitions", "Specifying a
structural schema"), which JSON Schema 2020-12 is not. :func:`structural`
rewrites it:

* ``$ref`` into ``$defs`` are inlined; ``$schema``, ``$id``, ``$defs`` dropped;
* ``const`` becomes a one-value ``enum``;
* ``anyOf: [X, {type: null}]`` becomes ``X`` with ``nullable: true``;
* numeric ``exclusiveMinimum``/``exclusiveMaximum`` become ``minimum``/``maximum``
  with the OpenAPI v3.0 boolean flag;
* ``additionalProperties: false`` is dropped (the API server prunes unknown
  fields anyway); an object with neither ``properties`` nor
  ``additionalProperties`` keeps its content through
  ``x-kubernetes-preserve-unknown-fields: true``;
* ``if``/``then`` (the per-kind ``required`` rules) have no OpenAPI form and
  are dropped: ``capplan export --validate`` still applies them through the
  JSON Schema;
* the top level keeps ``apiVersion``, ``kind``, ``metadata`` (``type: object``)
  and ``spec``.

``python -m optimizer.exporters.crd > schemas/capplan.io_dispatcherpolicies.yaml``
regenerates the packaged file; a test checks it is current. ``capplan plan``
writes it to ``crds/`` of the output folder: ``kubectl apply -f crds/`` once,
then ``kubectl apply -f policy.yaml``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

from optimizer.exporters.checks.schemas import default_schemas_dir

GROUP = "capplan.io"
KIND = "DispatcherPolicy"
PLURAL = "dispatcherpolicies"
VERSION = "v1alpha1"
CRD_FILE = f"{GROUP}_{PLURAL}.yaml"
SCHEMA_FILE = "dispatcherpolicy.schema.json"
DROP = {"$schema", "$id", "$defs", "if", "then", "else", "allOf", "title"}


def _resolve(node, defs: dict):
    if isinstance(node, list):
        return [_resolve(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        merged = {**copy.deepcopy(defs[name]), **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return {k: _resolve(v, defs) for k, v in node.items()}


def _openapi(node):
    if isinstance(node, list):
        return [_openapi(x) for x in node]
    if not isinstance(node, dict):
        return node
    n = {k: _openapi(v) for k, v in node.items() if k not in DROP}
    any_of = n.get("anyOf")
    if isinstance(any_of, list) and {"type": "null"} in any_of:
        rest = [x for x in any_of if x != {"type": "null"}]
        n.pop("anyOf")
        if len(rest) == 1:
            n = {**rest[0], **n, "nullable": True}
        else:
            n.update({"anyOf": rest, "nullable": True})
    if "const" in n:
        n["enum"] = [n.pop("const")]
        n.setdefault("type", "string" if isinstance(n["enum"][0], str) else "number")
    for ex, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(n.get(ex), (int, float)) and not isinstance(n.get(ex), bool):
            n[bound] = n.pop(ex)
            n[ex] = True
    if n.get("additionalProperties") is False:
        n.pop("additionalProperties")
    if n.get("type") == "object" and "properties" not in n and "additionalProperties" not in n:
        n["x-kubernetes-preserve-unknown-fields"] = True
    return n


def structural(schema: dict) -> dict:
    """The OpenAPI v3 structural schema of a DispatcherPolicy JSON Schema (rules above)."""
    s = _openapi(_resolve({k: v for k, v in schema.items() if k != "$defs"}, schema.get("$defs", {})))
    s["properties"]["metadata"] = {"type": "object"}
    s["properties"]["apiVersion"] = {"type": "string"}
    s["properties"]["kind"] = {"type": "string"}
    return s


def crd(schema: dict) -> dict:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/managed-by": "capplan"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": KIND.lower(),
                      "shortNames": ["dpol"]},
            "scope": "Namespaced",
            "versions": [{"name": VERSION, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": structural(schema)}}],
        },
    }


def crd_text(schemas_dir: str | Path) -> str:
    """YAML of the CRD generated from ``schemas_dir/dispatcherpolicy.schema.json``."""
    schema = json.loads((Path(schemas_dir) / SCHEMA_FILE).read_text())
    head = (f"# generated from {SCHEMA_FILE} by `python -m optimizer.exporters.crd`; do not edit\n")
    return head + yaml.safe_dump(crd(schema), sort_keys=False, width=1 << 16)


if __name__ == "__main__":  # pragma: no cover
    print(crd_text(default_schemas_dir()), end="")
