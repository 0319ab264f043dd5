"""The report's ``fleet`` object and ``run.gpu_models``: the fleet plan of the series that set the fleet keys
(:mod:`capplan.config.fleet`, :mod:`optimizer.fleet`) and the GPU catalogue the run used. Both are absent from
a report of a run without fleet keys."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.book.prices import price_for


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FleetCost(_Model):
    """One variant's cost on the evaluation window."""

    cost_usd: float = Field(description="USD over the fleet's evaluation window")
    limit_usd: float | None = Field(default=None, description="the variant's own perfect-foresight limit, USD")


class FleetLimit(_Model):
    """The fleet's perfect-foresight limit (:mod:`optimizer.fleet.limit`)."""

    cost_usd: float = Field(description="USD: the cheapest whole-GPU plan serving every hour on allowed models")
    bound_usd: float = Field(description="USD: the solver's proven lower bound on it")
    method: str = Field(description="how it was solved")


class MixFigures(_Model):
    """One GPU model and purchase option of the recommended plan."""

    gpus: float = Field(description="the most GPUs held at once")
    gpu_hours: float = Field(description="GPU-hours bought over the evaluation window")
    cost_usd: float = Field(description="USD")


class FleetSeries(_Model):
    """One member series of the fleet."""

    gpu_model: str = Field(description="the model its demand is measured on")
    allowed: list[str] = Field(description="the models it may use (its list, cut at its memory floor)")
    min_gpu_memory_gb: float | None = Field(default=None, description="its memory floor, GB")
    share: float | str | None = Field(default=None, description="the share of one GPU its work needs, or a MIG profile")
    placement: dict[str, float] = Field(description="GPU-hours per GPU model that served it (recommended plan)")
    coverage: float = Field(description="share (0-1) of its hours fully served by the recommended plan")
    unmet_gpu_hours: float = Field(description="GPU-hours of its own model left unmet by the recommended plan")
    alone_coverage: float = Field(description="its coverage planned alone on its own model")
    alone_cost_usd: float = Field(description="USD of its plan alone on its own model")


class FleetReport(_Model):
    """``report.json``'s ``fleet``: the fleet plan on the evaluation window against each series alone on its own
    model, the fleet pooled without substitution and the fleet's perfect-foresight limit."""

    name: str = Field(description="the fleet's (cohort's) name")
    evaluation_window: tuple[str, str] = Field(description="ISO 8601 UTC: first and last hour of the window")
    hours: int = Field(description="hours in the window")
    rule: str = Field(description="how the causal plan sized each layer (optimizer.fleet.causal)")
    limit: FleetLimit
    recommended: FleetCost = Field(description="pooled with substitution: the plan recommended")
    alone: FleetCost = Field(description="each series alone on its own model (sum)")
    pooled: FleetCost = Field(description="pooled, each series on its own model (no substitution)")
    regret: float | None = Field(description="fleet regret: recommended cost / the limit's cost")
    violations: int = Field(description="steps where a series is served by a model outside its list or below its "
                            "memory floor (0)")
    mix: dict[str, dict[str, MixFigures]] = Field(description="per GPU model and purchase option (reserved, spot, "
                                                  "on_demand)")
    series: dict[str, FleetSeries] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


def catalogue_used(catalogue: dict, book: dict) -> dict[str, dict[str, Any]]:
    """``run.gpu_models``: per catalogue model its memory (GB), relative speeds, MIG profile names, GPUs per node
    and prices per purchase option (USD per GPU-hour, :func:`optimizer.book.prices.price_for`)."""

    out = {}
    for name, spec in sorted(catalogue.items()):
        price, note = price_for(book, name)
        out[name] = {"memory_gb": spec.memory_gb, "speed": dict(spec.speed),
                     "mig_profiles": [p.name for p in spec.mig_profiles], "gpus_per_node": spec.gpus_per_node,
                     "prices": {"on_demand": price.on_demand, "reserved": price.reserved, "spot": price.spot},
                     **({"price_note": note} if note else {})}
    return out
