"""Kueue quotas of a fleet (``kueue.x-k8s.io/v1beta2``): a ResourceFlavor per GPU model, a ClusterQueue per team
in one cohort, a LocalQueue per team namespace; Volcano Queues for the teams that use Volcano.

Input is a :class:`FleetQuota` (team -> GPU model -> nominal, borrowing and lending GPUs; model -> node labels
and capacity), which the fleet plan fills. The objects (Kueue concepts docs, "Resource Flavor", "Cluster Queue",
"Local Queue", "Cohort"; fields in ``apis/kueue/v1beta2``):

* **ResourceFlavor** ``<model>`` (cluster-scoped): ``spec.nodeLabels`` selects the model's nodes by the label
  NVIDIA GPU Feature Discovery sets, ``nvidia.com/gpu.product`` (plus any labels given, at most 8). It carries
  the model's capacity as the annotation ``capplan.io/capacity-gpus``, which the lint rule
  ``kueue-quota-capacity`` (:mod:`.lint`) checks the cohort's quotas against.
* **ClusterQueue** ``<team>`` (cluster-scoped), ``spec.cohortName`` = the fleet's cohort: one resource group
  covering the GPU resource (``export.gpu_resource``), with one flavor per model the team may use, **cheapest
  first** by the price book's on-demand USD per GPU-hour (:func:`optimizer.book.prices.price_for`; Kueue tries
  flavors in list order), each with ``nominalQuota``, ``borrowingLimit`` and ``lendingLimit`` (left out when
  None: no limit). ``flavorFungibility`` is ``whenCanBorrow: TryNextFlavor`` and ``whenCanPreempt:
  TryNextFlavor``: a workload that would have to borrow or preempt in a cheap flavor tries the next flavor
  first, so a team runs on its own quota of a dearer model before it borrows another team's cheap GPUs or
  preempts (with Kueue's default ``whenCanBorrow: MayStopSearch`` it would borrow in the first flavor that
  fits by borrowing).
* **LocalQueue** ``<team>`` in the team's namespace, pointing at its ClusterQueue.
* **Volcano Queue** ``<team>`` (``scheduling.volcano.sh/v1beta1``, as :mod:`.volcano` writes per pool) for a
  team whose ``scheduler`` is ``volcano``, instead of the three above: ``guarantee`` = what the team never lends
  (the sum over its models of nominal - lending limit; 0 where no lending limit), ``deserved`` = the sum of its
  nominal quotas, ``capability`` = nominal + borrowing limit summed (the models' capacity where a borrowing limit
  is None), in ``export.gpu_resource``. It carries :mod:`.volcano`'s annotations so that rule
  ``volcano-queue-quota`` applies.

The quota covers the GPU resource only: Kueue admits a workload only when every resource it requests is covered,
so list ``cpu`` and ``memory`` under the Kueue manager's ``resources.excludeResourcePrefixes`` or add them to the
ClusterQueues.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.book.prices import GpuPrice, default_price_book, price_for
from optimizer.exporters.base import MANAGED_BY, Context, Doc, register
from optimizer.exporters.names import is_label, k8s_name
from optimizer.exporters.settings import ExportSettings
from optimizer.exporters.volcano import PLANNED_ANNOTATION, QUOTA_ANNOTATION
from optimizer.plan.policy import SeriesPlan

API_VERSION = "kueue.x-k8s.io/v1beta2"  # served and the storage version of the CRDs in schemas/
VOLCANO_API_VERSION = "scheduling.volcano.sh/v1beta1"
CAPACITY_ANNOTATION = "capplan.io/capacity-gpus"
MODEL_ANNOTATION = "capplan.io/gpu-model"
PRODUCT_LABEL = "nvidia.com/gpu.product"
FUNGIBILITY = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}


class ModelQuota(BaseModel):
    """One team's quota of one GPU model, in GPUs: ``nominal`` (Kueue ``nominalQuota``), ``borrowing_limit``
    (most GPUs it may borrow from the cohort above nominal; None = no limit) and ``lending_limit`` (most of its
    nominal GPUs others may borrow; None = all)."""

    model_config = ConfigDict(extra="forbid")
    nominal: int = Field(ge=0)
    borrowing_limit: int | None = Field(default=None, ge=0)
    lending_limit: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _lending(self):
        if self.lending_limit is not None and self.lending_limit > self.nominal:
            raise ValueError(f"lending_limit {self.lending_limit} is above nominal {self.nominal} (Kueue refuses it)")
        return self


class TeamQuota(BaseModel):
    """A team of the fleet: its ``namespace`` (default: the team's name), ``scheduler`` (``kueue`` or
    ``volcano``) and its quota per GPU model (catalogue names, keys of :attr:`FleetQuota.models`)."""

    model_config = ConfigDict(extra="forbid")
    namespace: str | None = None
    scheduler: Literal["kueue", "volcano"] = "kueue"
    models: dict[str, ModelQuota]
    series: list[str] = Field(default_factory=list, description="the series the team's quotas were planned from "
                              "(recorded in policy.yaml; not written to the Kueue objects)")


class FlavorSpec(BaseModel):
    """One GPU model of the fleet: ``gpu_product`` (the value of GFD's ``nvidia.com/gpu.product`` on its nodes,
    e.g. ``NVIDIA-A100-SXM4-80GB``), more ``node_labels`` to select them, and ``capacity_gpus`` (the GPUs of
    that model in the cluster)."""

    model_config = ConfigDict(extra="forbid")
    gpu_product: str = Field(min_length=1)
    node_labels: dict[str, str] = Field(default_factory=dict)
    capacity_gpus: int = Field(ge=0)
    mix: dict[str, dict[str, float]] = Field(default_factory=dict, description="the plan's purchase mix of the "
                                             "model: option (reserved, spot, on_demand) -> gpus, gpu_hours, "
                                             "cost_usd (recorded in policy.yaml; not written to the Kueue objects)")


class FleetQuota(BaseModel):
    """What the Kueue export writes: the ``cohort``, the ``teams`` and the GPU ``models`` (module docstring).

    Raises pydantic's ``ValidationError`` when a team names a model not in ``models``, a name is not an RFC 1123
    label (cohort, team, namespace), or a flavor would carry more than 8 node labels (Kueue's limit)."""

    model_config = ConfigDict(extra="forbid")
    cohort: str
    teams: dict[str, TeamQuota]
    models: dict[str, FlavorSpec]

    @model_validator(mode="after")
    def _consistent(self):
        if not is_label(self.cohort):
            raise ValueError(f"cohort {self.cohort!r} is not an RFC 1123 label")
        for team, t in self.teams.items():
            for name in (team, t.namespace or team):
                if not is_label(name):
                    raise ValueError(f"team {team!r}: {name!r} is not an RFC 1123 label (a queue or namespace name)")
            unknown = sorted(set(t.models) - set(self.models))
            if unknown:
                raise ValueError(f"team {team!r}: GPU model(s) {unknown} are not in models: "
                                 f"{sorted(self.models)}")
        for model, f in self.models.items():
            if len({PRODUCT_LABEL: f.gpu_product, **f.node_labels}) > 8:
                raise ValueError(f"models.{model}: at most 8 node labels (ResourceFlavor.spec.nodeLabels)")
        return self


def flavor_name(model: str) -> str:
    """The ResourceFlavor name of a GPU model (``A100-80GB`` -> ``a100-80gb``)."""
    return k8s_name(model.lower())


def flavor_order(models, prices: dict[str, GpuPrice] | None = None) -> list[str]:
    """``models`` cheapest first by on-demand USD per GPU-hour (:func:`optimizer.book.prices.price_for`, the
    ``default`` entry for a model the book lacks), ties by name."""
    book = prices or default_price_book()
    return sorted(models, key=lambda m: (price_for(book, m)[0].on_demand, m))


def _meta(name: str, annotations: dict[str, str], namespace: str | None = None) -> dict:
    m: dict = {"name": name}
    if namespace:
        m["namespace"] = namespace
    m["labels"] = dict(MANAGED_BY)
    m["annotations"] = annotations
    return m


def resource_flavor(model: str, spec: FlavorSpec) -> Doc:
    ann = {MODEL_ANNOTATION: model, CAPACITY_ANNOTATION: str(spec.capacity_gpus)}
    obj = {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _meta(flavor_name(model), ann),
           "spec": {"nodeLabels": {PRODUCT_LABEL: spec.gpu_product, **spec.node_labels}}}
    return Doc(f"manifests/{flavor_name(model)}-resourceflavor.yaml", obj,
               notes={f"metadata.annotations.{CAPACITY_ANNOTATION}": "GPUs of this model in the cluster (lint: "
                                                                     "kueue-quota-capacity)"},
               header=f"Kueue ResourceFlavor for GPU model {model}")


def cluster_queue(team: str, t: TeamQuota, fleet: FleetQuota, gpu_resource: str,
                  prices: dict[str, GpuPrice] | None) -> Doc:
    flavors = []
    for model in flavor_order(t.models, prices):
        q = t.models[model]
        res: dict = {"name": gpu_resource, "nominalQuota": str(q.nominal)}
        if q.borrowing_limit is not None:
            res["borrowingLimit"] = str(q.borrowing_limit)
        if q.lending_limit is not None:
            res["lendingLimit"] = str(q.lending_limit)
        flavors.append({"name": flavor_name(model), "resources": [res]})
    obj = {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": _meta(team, {}),
           "spec": {"cohortName": fleet.cohort,
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t.namespace or team}},
                    "resourceGroups": [{"coveredResources": [gpu_resource], "flavors": flavors}],
                    "flavorFungibility": dict(FUNGIBILITY)}}
    del obj["metadata"]["annotations"]
    return Doc(f"manifests/{team}-clusterqueue.yaml", obj,
               notes={"whenCanBorrow": "try a dearer flavor of the team's own quota before borrowing a cheap one",
                      "whenCanPreempt": "try the next flavor before preempting",
                      "flavors": "cheapest first (on-demand USD per GPU-hour, price book)"},
               header=f"Kueue ClusterQueue of team {team} in cohort {fleet.cohort}")


def local_queue(team: str, t: TeamQuota) -> Doc:
    obj = {"apiVersion": API_VERSION, "kind": "LocalQueue", "metadata": _meta(team, {}, t.namespace or team),
           "spec": {"clusterQueue": team}}
    del obj["metadata"]["annotations"]
    return Doc(f"manifests/{team}-localqueue.yaml", obj, header=f"Kueue LocalQueue of team {team}")


def volcano_queue(team: str, t: TeamQuota, fleet: FleetQuota, s: ExportSettings) -> Doc:
    nominal = sum(q.nominal for q in t.models.values())
    guarantee = sum(q.nominal - q.lending_limit for q in t.models.values() if q.lending_limit is not None)
    capability = sum(q.nominal + q.borrowing_limit if q.borrowing_limit is not None
                     else max(q.nominal, fleet.models[m].capacity_gpus) for m, q in t.models.items())
    ann = {QUOTA_ANNOTATION: str(capability), PLANNED_ANNOTATION: str(nominal)}
    obj = {"apiVersion": VOLCANO_API_VERSION, "kind": "Queue", "metadata": _meta(team, ann),
           "spec": {"weight": s.queue_weight, "reclaimable": s.reclaimable,
                    "guarantee": {"resource": {s.gpu_resource: str(guarantee)}},
                    "deserved": {s.gpu_resource: str(nominal)},
                    "capability": {s.gpu_resource: str(capability)}}}
    return Doc(f"manifests/{team}-queue.yaml", obj,
               notes={"guarantee": "GPUs the team never lends (nominal - lending limit)",
                      "deserved": "the team's nominal GPUs, all models", "capability": "nominal + borrowing limit"},
               header=f"Volcano Queue of team {team} (models {', '.join(sorted(t.models))})")


def kueue_docs(fleet: FleetQuota, settings: ExportSettings | None = None,
               prices: dict[str, GpuPrice] | None = None) -> list[Doc]:
    """Every object of the fleet's quotas (module docstring): ResourceFlavors of the models a Kueue team uses,
    then per team a ClusterQueue and a LocalQueue, or a Volcano Queue."""
    s = settings or ExportSettings()
    kueue_teams = {k: t for k, t in fleet.teams.items() if t.scheduler == "kueue"}
    used = sorted({m for t in kueue_teams.values() for m in t.models})
    docs = [resource_flavor(m, fleet.models[m]) for m in flavor_order(used, prices)]
    for team, t in fleet.teams.items():
        if t.scheduler == "kueue":
            docs += [cluster_queue(team, t, fleet, s.gpu_resource, prices), local_queue(team, t)]
        else:
            docs.append(volcano_queue(team, t, fleet, s))
    return docs


@register("kueue")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """The fleet's Kueue (and Volcano team) objects when the export has a fleet quota (``ctx.fleet``), else none."""
    return kueue_docs(ctx.fleet, ctx.settings) if ctx.fleet is not None else []


__all__ = ["FleetQuota", "TeamQuota", "ModelQuota", "FlavorSpec", "kueue_docs", "flavor_order", "flavor_name",
           "CAPACITY_ANNOTATION", "API_VERSION"]
