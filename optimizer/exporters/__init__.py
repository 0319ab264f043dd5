"""Manifest writers: the dispatcher policy, HPA, KEDA, Volcano, PriorityClass, kustomization.

One module per target, each registered by name in :data:`WRITERS`
(:func:`optimizer.exporters.base.register`):

* ``policy`` (:mod:`.dispatcher_policy`) — ``policy.yaml``, the DispatcherPolicy;
* ``crd`` (:mod:`.dispatcher_policy`, :mod:`.crd`) — its CustomResourceDefinition;
* ``keda`` (:mod:`.keda`) — ScaledObject + TriggerAuthentication;
* ``hpa`` (:mod:`.hpa`) — ``autoscaling/v2`` HPA on an External DCGM metric;
* ``adapter`` (:mod:`.adapter`) — the prometheus-adapter rule serving that metric;
* ``volcano`` (:mod:`.volcano`) — a Queue per training pool;
* ``priorityclass`` (:mod:`.priorityclass`) — the preemption tiers;
* ``kueue`` (:mod:`.fleet.kueue`) — ResourceFlavors, a ClusterQueue and LocalQueue per team in one cohort (or a Volcano
  Queue per team), when a fleet quota is given (``fleet=``);

plus ``manifests/kustomization.yaml`` (:mod:`.kustomization`) listing the set.

Layout of the output folder::

    policy.yaml
    crds/capplan.io_dispatcherpolicies.yaml   kubectl apply -f crds/ (then policy.yaml)
    manifests/            kubectl apply -k manifests/
      kustomization.yaml
      <name>-scaledobject.yaml | <name>-hpa.yaml   (export.autoscaler: keda | hpa)
      capplan-prometheus-<ns>-triggerauthentication.yaml
      <name>-queue.yaml, capplan-*-priorityclass.yaml
    adapter/prometheus-adapter-rules.yaml
    alternatives/hpa/ or alternatives/keda/   the autoscaler not chosen (never both on one target)

GPU utilisation is not a Kubernetes Resource metric (Resource metrics are cpu
and memory only), so the HPA scales on an **External** metric served by
prometheus-adapter from DCGM, and the KEDA ScaledObject uses a ``prometheus``
trigger with an explicit PromQL aggregation.

Every write is validated (:mod:`.validate`, :mod:`.lint`); a problem raises
:class:`ExportValidationError` and nothing is kept.
"""

from __future__ import annotations

from pathlib import Path

from optimizer.exporters import (  # noqa: F401  (registration)
    adapter,
    crd,
    dispatcher_policy,
    hpa,
    keda,
    priorityclass,
    volcano,
)
from optimizer.exporters.base import WRITERS, Context, Doc, register, render
from optimizer.exporters.checks.schemas import default_schemas_dir
from optimizer.exporters.checks.validate import ExportValidationError, Problem, validate_dir, validate_files
from optimizer.exporters.fleet import kueue  # noqa: F401  (registration)
from optimizer.exporters.kustomization import PATH as kustomization_path
from optimizer.exporters.kustomization import kustomization
from optimizer.exporters.names import assign_names, k8s_name
from optimizer.exporters.policy_fields import human
from optimizer.exporters.settings import ExportSettings, coerce
from optimizer.plan.policy import SeriesPlan

ORDER = ("policy", "crd", "keda", "hpa", "adapter", "volcano", "priorityclass")
OWNED = ("policy.yaml", "crds", "manifests", "adapter", "alternatives")  # paths write_all owns in an output folder
MANAGED_BY = "app.kubernetes.io/managed-by: capplan"  # the label on every object capplan writes but these:
# files whose path is capplan's
FIXED = (dispatcher_policy.PATH, f"crds/{crd.CRD_FILE}", kustomization_path, adapter.PATH)


def is_own_file(root: Path, rel: str) -> bool:
    """True when the file ``rel`` under ``root`` is one capplan writes: one of :data:`FIXED`, or a
    YAML file whose text carries the :data:`MANAGED_BY` label. Anything else under :data:`OWNED` is
    the user's, which a re-render must not delete (``capplan export --out``, ``capplan plan --out``)."""
    if rel in FIXED:
        return True
    try:
        return MANAGED_BY in (Path(root) / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def render_all(plans: list[SeriesPlan], settings=None, fleet=None) -> dict[str, str]:
    """``relative path -> YAML text`` of every file, without writing. ``fleet``: an optional
    :class:`optimizer.exporters.fleet.kueue.FleetQuota` whose Kueue objects are written too.

    Raises
    ------
    ValueError: two series map to one object name, or a plan's params are invalid.
    pydantic.ValidationError: invalid settings.
    """
    s = coerce(settings)
    # the values policy.yaml shows (rounded for reading), so that a re-render from it gives the same files
    plans = [p.model_copy(update={"params": human(p.params), "plan": human(p.plan)}) for p in plans]
    ctx = Context.build(plans, s, fleet)
    docs: list[Doc] = []
    for name in ORDER:
        docs += WRITERS[name](plans, ctx)
    for name in WRITERS:
        if name not in ORDER:
            docs += WRITERS[name](plans, ctx)
    docs.append(kustomization(docs))
    out: dict[str, str] = {}
    for d in docs:
        if d.path in out:
            raise ValueError(f"two writers produced {d.path}")
        out[d.path] = render(d)
    return out


def export_warnings(plans: list[SeriesPlan], settings=None) -> dict[str, list[str]]:
    """``series_id -> messages`` (each starting ``export:``) about what a user must act on
    before applying the manifests: a placeholder Prometheus address, an idle pool's
    non-zero cap, a plan above the quota. The pipeline puts them in the report's warnings."""
    s = coerce(settings)
    ctx = Context.build(plans, s)
    out: dict[str, list[str]] = {}
    for mod in (keda, volcano):
        for sid, ws in mod.warnings(plans, ctx).items():
            out.setdefault(sid, []).extend(ws)
    return out


def schemas_dir(settings: ExportSettings) -> Path:
    return Path(settings.schemas_dir) if settings.schemas_dir else default_schemas_dir()


def write_all(plans: list[SeriesPlan], out_dir: Path, settings=None, fleet=None) -> list[Path]:
    """Write ``policy.yaml``, ``manifests/``, ``adapter/`` and ``alternatives/`` under ``out_dir``
    and validate them (``fleet``: as for :func:`render_all`). Returns the written paths.

    ``out_dir`` should be a temporary folder that the caller renames into place
    (the pipeline does, via ``capplan.store.atomic.replace_dir``).

    Raises
    ------
    ExportValidationError: any schema or lint problem in the written files
        (an error, never a warning).
    ValueError, pydantic.ValidationError: see :func:`render_all`.
    """
    s = coerce(settings)
    out_dir = Path(out_dir)
    files = render_all(plans, s, fleet)
    paths = []
    for rel, text in files.items():
        p = out_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        paths.append(p)
    problems = validate_files(out_dir, list(files), schemas_dir(s), s.kubernetes_version)
    if problems:
        raise ExportValidationError(problems)
    return paths


__all__ = ["write_all", "render_all", "export_warnings", "WRITERS", "register", "Doc", "Context", "ExportSettings",
           "ExportValidationError", "Problem", "validate_dir", "k8s_name", "assign_names", "OWNED"]
