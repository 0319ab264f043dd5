"""Validation status of a run's generated files, for the Manifests page.

Checks, per YAML document:

* it parses (``yaml.safe_load_all``) and has ``apiVersion`` and ``kind``;
* built-in kinds (HPA, PriorityClass, ...) pass ``kubernetes-validate`` in
  strict mode against its newest bundled Kubernetes version;
* KEDA and Volcano objects pass their CRD's ``openAPIV3Schema`` with
  ``jsonschema`` (schemas from ``capplan/_schemas`` in a wheel, ``schemas/`` in
  a checkout, or ``../shared/schemas``);
* lint rules schemas cannot express: HPA Resource metrics only cpu/memory,
  stabilisation windows 0–3600 s, periodSeconds 1–1800 s, min ≤ max replicas,
  RFC 1123 names.

Other documents (capplan's own ``DispatcherPolicy``, kustomization) are reported
as parsed only. This mirrors, and does not replace, the validation that
``capplan`` runs when it writes the files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

RFC1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass
class FileStatus:
    path: str
    ok: bool
    checks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return "valid" if self.ok else "invalid"


def _schema_dirs() -> list[Path]:
    here = Path(__file__).resolve()
    out = []
    try:
        from importlib import resources

        p = Path(str(resources.files("capplan") / "_schemas"))
        out.append(p)
    except (ModuleNotFoundError, TypeError):
        pass
    out += [here.parents[1] / "schemas", here.parents[2] / "shared" / "schemas"]
    return [p for p in out if p.is_dir()]


@lru_cache(maxsize=1)
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> openAPIV3Schema from the CRD files found."""
    out: dict[tuple[str, str], dict] = {}
    for d in _schema_dirs():
        for f in sorted(d.glob("*.y*ml")):
            try:
                docs = list(yaml.safe_load_all(f.read_text()))
            except (OSError, yaml.YAMLError):
                continue
            for doc in docs:
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc.get("spec", {})
                kind = spec.get("names", {}).get("kind")
                for v in spec.get("versions", []):
                    sch = (v.get("schema") or {}).get("openAPIV3Schema")
                    if kind and sch:
                        out.setdefault((f"{spec.get('group')}/{v.get('name')}", kind), sch)
    return out


def _lint(doc: dict) -> list[str]:
    probs = []
    name = (doc.get("metadata") or {}).get("name", "")
    if not RFC1123.match(str(name)) or len(str(name)) > 63:
        probs.append(f"metadata.name {name!r}: not an RFC 1123 label")
    spec = doc.get("spec") or {}
    kind = doc.get("kind")
    behavior = None
    if kind == "HorizontalPodAutoscaler":
        for i, m in enumerate(spec.get("metrics", [])):
            if m.get("type") == "Resource" and (m.get("resource") or {}).get("name") not in ("cpu", "memory"):
                probs.append(f"spec.metrics[{i}]: Resource metrics are cpu and memory only "
                             f"(got {(m.get('resource') or {}).get('name')!r}); use External or Pods")
        lo, hi = spec.get("minReplicas", 1), spec.get("maxReplicas")
        if hi is not None and lo > hi:
            probs.append(f"spec.minReplicas {lo} > maxReplicas {hi}")
        behavior = spec.get("behavior")
    elif kind == "ScaledObject":
        lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount")
        if hi is not None and lo > hi:
            probs.append(f"spec.minReplicaCount {lo} > maxReplicaCount {hi}")
        behavior = ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior")
    for side in ("scaleUp", "scaleDown"):
        rules = (behavior or {}).get(side) or {}
        w = rules.get("stabilizationWindowSeconds")
        if w is not None and not 0 <= w <= 3600:
            probs.append(f"behavior.{side}.stabilizationWindowSeconds {w}: outside 0–3600")
        for j, p in enumerate(rules.get("policies", [])):
            ps = p.get("periodSeconds")
            if ps is not None and not 1 <= ps <= 1800:
                probs.append(f"behavior.{side}.policies[{j}].periodSeconds {ps}: outside 1–1800")
    return probs


def validate_doc(doc: dict) -> tuple[list[str], list[str]]:
    """(checks run, problems) of one document."""
    checks, probs = [], []
    if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
        return ["yaml"], ["document has no apiVersion/kind"]
    key = (doc["apiVersion"], doc["kind"])
    if doc["kind"] == "DispatcherPolicy" or doc["kind"] == "Kustomization":
        return ["yaml"], []
    if key in crd_schemas():
        import jsonschema

        checks.append("CRD schema")
        v = jsonschema.Draft7Validator(crd_schemas()[key])
        for e in sorted(v.iter_errors(doc.get("spec") and {"spec": doc["spec"]} or doc), key=str)[:5]:
            probs.append(f"{'.'.join(str(x) for x in e.absolute_path) or '(root)'}: {e.message}")
    else:
        try:
            import kubernetes_validate as kv
            from kubernetes_validate.utils import latest_version

            kv.validate(doc, latest_version(), strict=True)
            checks.append("kubernetes-validate")
        except ImportError:
            checks.append("kubernetes-validate unavailable")
        except Exception as exc:  # ValidationError, InvalidSchemaError (unknown kind)
            name = type(exc).__name__
            if name == "InvalidSchemaError":
                checks.append("no schema for this kind")
            else:
                checks.append("kubernetes-validate")
                probs.append(f"{name}: {str(getattr(exc, 'message', exc)).splitlines()[0][:300]}")
    lint = _lint(doc)
    checks.append("lint")
    return checks, probs + lint


def validate_file(path: Path, rel: str) -> FileStatus:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        return FileStatus(rel, False, ["yaml"], [f"YAML: {exc}"])
    checks, probs = [], []
    for d in docs:
        c, p = validate_doc(d)
        checks += [x for x in c if x not in checks]
        probs += p
    return FileStatus(rel, not probs, checks, probs)


def run_files(run_dir: Path) -> list[Path]:
    """The generated files of a run: policy.yaml, manifests/ and any other YAML beside them."""
    out = [p for p in sorted(run_dir.rglob("*")) if p.is_file() and p.suffix in (".yaml", ".yml", ".json")
           and p.name != "report.json"]
    return out
