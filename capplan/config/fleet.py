"""The fleet keys of the configuration: what each series may run on, the ``gpu_catalogue:`` overrides and the
``fleet:`` section, and their checks (bad input is refused before any data is read).

Per series (``series[]`` entries, or the CSV columns of :mod:`capplan.sources.files`):

* ``gpu_models``: the GPU models of the catalogue (:mod:`optimizer.book.gpus`) the series may run on;
* ``min_gpu_memory_gb``: its memory floor: only models with at least this much memory per GPU;
* ``share``: the share of one GPU its work needs (0 < share <= 1), or a MIG profile name (``1g.10gb``).

A series that sets any of them is a fleet member (:class:`FleetConfig` may name the members instead). A run
where no series sets one and there is no ``fleet:`` section plans exactly as without this module.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from optimizer.book.gpus import GpuModelSpec, UnknownGpuModel, load_catalogue, models_for, spec_for

FLEET_KEYS = ("gpu_models", "min_gpu_memory_gb", "share")
MIG_PROFILE = re.compile(r"^\d+g\.\d+gb$")


class FleetConfig(BaseModel):
    """The ``fleet:`` section: one fleet (a Kueue cohort) planned together, e.g.::

        fleet:
          name: research
          series: [train/vc6YE, train/vcLJZ, infer/nasa-http]
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str = Field(default="fleet", min_length=1, description="the fleet's (cohort's) name")
    series: list[str] = Field(default_factory=list, description="the member series' ids; empty: every series that "
                              "sets gpu_models, min_gpu_memory_gb or share")


def parse_share(v: Any) -> float | str | None:
    """A ``share`` value as a float, or a MIG profile name such as ``1g.10gb``; None stays None. Raises
    ValueError for anything else; the range (0 < share <= 1) is checked by :func:`check_series_keys`, which
    knows the series."""
    if v is None:
        return None
    if isinstance(v, str):
        s = v.strip()
        if MIG_PROFILE.match(s):
            return s
        try:
            v = float(s)
        except ValueError:
            raise ValueError(f"share {v!r}: expected a number 0 < share <= 1 or a MIG profile (1g.10gb)") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"share {v!r}: expected a number 0 < share <= 1 or a MIG profile such as 1g.10gb")
    return float(v)


def parse_models(v: Any) -> list[str] | None:
    """A ``gpu_models`` value: a list of names, or one string of names separated by ``|`` (the CSV form)."""
    if v is None:
        return None
    if isinstance(v, str):
        v = [p for p in (x.strip() for x in v.split("|")) if p]
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise ValueError(f"gpu_models {v!r}: expected a list of GPU model names (in a CSV: names separated by |)")
    if not v:
        raise ValueError("gpu_models is empty; name at least one model or leave the key out")
    return [x.strip() for x in v]


def catalogue_from(overrides: dict[str, dict]) -> dict[str, GpuModelSpec]:
    """The catalogue a run uses (:func:`optimizer.book.gpus.load_catalogue` with the config's
    ``gpu_catalogue:``). Raises ValueError naming the model and field of a bad override."""
    for key, fields in overrides.items():  # one at a time, so that the message names the model
        if not isinstance(fields, dict):
            raise ValueError(f"gpu_catalogue.{key}: expected a mapping of fields (memory_gb, speed, ...)")
        try:
            load_catalogue({key: fields})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"gpu_catalogue.{key}: {where}: {err['msg']}") from None
    return load_catalogue(overrides)


def check_series_keys(sid: str, catalogue: dict[str, GpuModelSpec], gpu_models: list[str] | None,
                      min_gpu_memory_gb: float | None, share: float | str | None,
                      gpu_model: str | None = None) -> list[str]:
    """The models series ``sid`` may run on (:func:`optimizer.book.gpus.models_for`). Raises ValueError
    naming the series and the key: a numeric ``share`` outside (0, 1], an unknown model in ``gpu_models``
    (or an unknown own ``gpu_model``, when given and not the price book's ``default``), no allowed model
    holding the memory floor, or a MIG ``share`` that no allowed model has."""
    if isinstance(share, float) and not 0 < share <= 1:
        raise ValueError(f"series {sid!r}: share: {share:g} must be > 0 and <= 1 (the share of one GPU a unit of "
                         "its work needs; demand above one GPU is counted in the series' GPUs)")
    try:
        allowed = models_for(catalogue, gpu_models, min_gpu_memory_gb)
    except UnknownGpuModel as exc:
        raise ValueError(f"series {sid!r}: gpu_models: {exc}") from None
    if not allowed:
        pool = ", ".join(f"{n} ({catalogue[n].memory_gb:g} GB)" for n in (
            [spec_for(catalogue, m).name for m in gpu_models] if gpu_models else catalogue))
        raise ValueError(f"series {sid!r}: min_gpu_memory_gb: {min_gpu_memory_gb:g} GB is more than every model it "
                         f"may use has ({pool}); lower the floor or allow a larger model")
    if gpu_model is not None and gpu_model != "default":
        try:
            spec_for(catalogue, gpu_model)
        except UnknownGpuModel as exc:
            raise ValueError(f"series {sid!r}: gpu_model: {exc}") from None
    if isinstance(share, str):
        holders = [m for m in allowed if any(p.name == share for p in catalogue[m].mig_profiles)]
        if not holders:
            raise ValueError(f"series {sid!r}: share: no model it may use ({', '.join(allowed)}) has the MIG "
                             f"profile {share!r}")
    return allowed


class SeriesFleetKeys(BaseModel):
    """The fleet keys of one series, whichever source gave them (config or CSV columns)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    gpu_models: list[str] | None = None
    min_gpu_memory_gb: float | None = Field(default=None, gt=0)
    share: float | str | None = None

    _models = field_validator("gpu_models", mode="before")(lambda cls, v: parse_models(v))
    _share = field_validator("share", mode="before")(lambda cls, v: parse_share(v))

    def is_set(self) -> bool:
        """Whether any key is set."""
        return any(getattr(self, k) is not None for k in FLEET_KEYS)
