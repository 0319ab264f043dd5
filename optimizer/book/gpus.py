"""The GPU catalogue: per GPU model its memory, relative speed per kind of work, MIG profiles, GPUs per node,
numeric formats and the spellings a cluster names it by. Prices are not here: they stay in the price book
(:mod:`optimizer.book.prices`), per model and purchase option.

Figures and their sources (``sources`` on each entry says which apply):

* **Memory** (GB per GPU), **numeric formats** and **MIG profiles**: the vendor's data sheets
  (nvidia.com/en-us/data-center/<model>/) and, for MIG, NVIDIA's named layouts
  (``NVIDIA/mig-parted : deployments/systemd/config-default.yaml``) and the device plugin's resource names.
* **Relative speed** (throughput of one GPU against one A100-80GB = 1.0), MLPerf Inference closed division,
  NVIDIA submissions, one GPU, Offline "samples per second", each ratio within one round
  (``mlcommons/inference_results_v{0.7,1.1,3.0}``): H100 2.17 (ResNet-50 v3.0; BERT-99 gives 2.61), L4 0.31
  (ResNet-50 v3.0; BERT-99 0.29), A10 0.35 (ResNet-50 v1.1), T4 0.16 (ResNet-50 v0.7, against the 40 GB A100).
  ResNet-50 is taken throughout so the ratios come from one benchmark.
* **Estimates** (said so in each entry's ``sources``):

  - every *training* speed: MLPerf Training reports time-to-train of multi-GPU systems, not one GPU's
    throughput, so the training speed is the inference ratio above (or the estimate below);
  - the models with no MLPerf ratio read (L40S, V100-32GB): the geometric mean of the data-sheet ratios of
    dense FP16 tensor throughput and memory bandwidth against the A100-80GB (312 TFLOPS, 2,039 GB/s).
    The same rule gives 2.28 for the H100 (measured 2.17) and 0.34 for the A10 (measured 0.35);
  - A100-40GB: 1.0 (the same GA100 chip; the MLPerf v0.7 reference of the T4 ratio);
  - A10G: the A10's ratio (the AWS variant of the same GA102 board);
  - H200-141GB: the H100's measured ratio (same GH100 compute, more and faster memory), a conservative figure.

* **GPUs per node**: the AWS instance the price book prices (p5en/p5/p4de/p4d/p3dn.24xlarge: 8; g6e.12xlarge:
  4; g6.xlarge, g5.xlarge: 1) or, for the T4, the 4-GPU nodes of the Alibaba GPU trace v2023 (openb).

A model's GFD label (``nvidia.com/gpu.product``) and dcgm-exporter's ``modelName`` spell it differently
("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB") and carry sharing suffixes (``-SHARED``, ``-MIG-1g.10gb``):
:func:`normalise_model_name` maps them to catalogue names.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

REFERENCE_MODEL = "A100-80GB"
FORMATS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")

_MLPERF = ("MLPerf Inference closed, NVIDIA, ResNet-50 Offline, one GPU "
           "(mlcommons/inference_results_v{round} closed/NVIDIA/results)")


class UnknownGpuModel(KeyError):
    """A GPU model (or MIG profile) the catalogue does not hold. The message names the key and lists the known
    ones; the config layer turns it into an input error (exit 2)."""

    def __str__(self) -> str:  # KeyError quotes its argument; the message reads better plain
        return str(self.args[0]) if self.args else "unknown GPU model"


class MigProfile(BaseModel):
    """One MIG profile of a GPU model: ``name`` as the device plugin names it (``1g.10gb``), ``slices`` (compute
    slices out of 7), ``memory_gb`` (GB of GPU memory) and ``max_count`` (most instances of it on one GPU)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    slices: int = Field(ge=1, le=7)
    memory_gb: float = Field(gt=0)
    max_count: int = Field(ge=1, le=7)


class GpuModelSpec(BaseModel):
    """One GPU model of the catalogue.

    ``speed``: relative throughput per kind of work (``training``, ``inference``) against one A100-80GB = 1.0;
    demand measured in GPUs of model A needs ``demand x speed_A / speed_B`` GPUs of model B.
    ``product_labels``: the GFD ``nvidia.com/gpu.product`` / dcgm-exporter ``modelName`` spellings, normalised
    by :func:`clean_model_name`. ``sources``: the public source of each figure, estimates marked."""

    model_config = ConfigDict(extra="forbid")

    name: str
    memory_gb: float = Field(gt=0, description="GPU memory, GB per GPU")
    speed: dict[Literal["training", "inference"], float] = Field(description="relative throughput per kind of "
                                                                 "work, A100-80GB = 1.0")
    mig_profiles: list[MigProfile] = Field(default_factory=list)
    gpus_per_node: int = Field(ge=1)
    formats: list[str] = Field(default_factory=list, description="numeric formats: fp64/fp32/tf32/bf16/fp16/fp8/int8")
    product_labels: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)

    @field_validator("speed")
    @classmethod
    def _speed_positive(cls, v: dict[str, float]) -> dict[str, float]:
        for kind in ("training", "inference"):
            if kind not in v:
                raise ValueError(f"speed needs both 'training' and 'inference' (missing {kind!r})")
            if not v[kind] > 0:
                raise ValueError(f"speed.{kind} must be > 0, got {v[kind]}")
        return v

    @field_validator("formats")
    @classmethod
    def _known_formats(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if f not in FORMATS]
        if bad:
            raise ValueError(f"unknown numeric formats {bad}; known: {', '.join(FORMATS)}")
        return v

    def profile(self, name: str) -> MigProfile:
        """The MIG profile ``name`` of this model; :class:`UnknownGpuModel` when it has none of that name."""
        for p in self.mig_profiles:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.mig_profiles) or "none (this model has no MIG)"
        raise UnknownGpuModel(f"GPU model {self.name!r} has no MIG profile {name!r}; its profiles: {known}")


def _mig(*spec: tuple[str, int]) -> list[MigProfile]:
    """MIG profiles from ``(name, max_count)``: slices and memory read from the name (``3g.40gb``)."""
    out = []
    for name, count in spec:
        g, mem = re.fullmatch(r"(\d)g\.(\d+)gb", name).groups()
        out.append(MigProfile(name=name, slices=int(g), memory_gb=float(mem), max_count=count))
    return out


_MIG_80 = _mig(("1g.10gb", 7), ("1g.20gb", 4), ("2g.20gb", 3), ("3g.40gb", 2), ("4g.40gb", 1), ("7g.80gb", 1))
_MIG_SRC = "MIG profiles: NVIDIA/mig-parted deployments/systemd/config-default.yaml; NVIDIA MIG user guide"
_ESTIMATE_TRAIN = "training speed: estimate, the inference ratio (MLPerf Training is not reduced to one GPU)"
_RULE = ("inference speed: estimate, geometric mean of the data sheet's dense FP16 tensor TFLOPS and memory "
         "bandwidth ratios against the A100-80GB (312 TFLOPS, 2,039 GB/s)")


def _entry(name: str, memory_gb: float, speed: float, gpus_per_node: int, formats: str, labels: list[str],
           sources: list[str], mig: list[MigProfile] | None = None) -> GpuModelSpec:
    return GpuModelSpec(name=name, memory_gb=memory_gb, speed={"training": speed, "inference": speed},
                        mig_profiles=mig or [], gpus_per_node=gpus_per_node, formats=formats.split(),
                        product_labels=[clean_model_name(x) for x in labels], sources=sources)


def clean_model_name(raw: str) -> str:
    """``raw`` without vendor prefixes (``NVIDIA-``, ``NVIDIA ``, ``Tesla-``, ``Tesla ``) and sharing suffixes
    (``-SHARED``, ``-MIG-<profile>``), with runs of spaces/underscores as one hyphen, upper-cased. A pure
    string function: it does not consult the catalogue (:func:`normalise_model_name` does)."""
    s = raw.strip()
    s = re.sub(r"[\s_]+", "-", s)
    s = re.sub(r"-MIG-\d+g\.\d+gb$", "", s, flags=re.IGNORECASE)
    s = re.sub(r"-SHARED$", "", s, flags=re.IGNORECASE)
    s = re.sub(r"^(NVIDIA-|TESLA-)+", "", s, flags=re.IGNORECASE)
    return s.upper()


def _builtin() -> dict[str, GpuModelSpec]:
    ds = "nvidia.com/en-us/data-center/{}/ data sheet (memory, formats)"
    entries = [
        _entry("H200-141GB", 141, 2.17, 8, "fp64 fp32 tf32 bf16 fp16 fp8 int8",
               ["H200", "H200-141GB", "H200-SXM-141GB", "H200-SXM5-141GB", "H200-NVL"],
               [ds.format("h200"), "speed: estimate, the H100's measured MLPerf ratio (same GH100 compute)",
                _ESTIMATE_TRAIN, _MIG_SRC, "GPUs per node: AWS p5en.48xlarge (8x H200)"],
               _mig(("1g.18gb", 7), ("1g.35gb", 4), ("2g.35gb", 3), ("3g.71gb", 2), ("7g.141gb", 1))),
        _entry("H100-80GB", 80, 2.17, 8, "fp64 fp32 tf32 bf16 fp16 fp8 int8",
               ["H100", "H100-80GB", "H100-80GB-HBM3", "H100-SXM5-80GB", "H100-SXM-80GB", "H100-PCIE",
                "H100-PCIE-80GB"],
               [ds.format("h100"), _MLPERF.format(round="3.0") + ": 91,826 vs 42,379 samples/s = 2.17",
                _ESTIMATE_TRAIN, _MIG_SRC, "GPUs per node: AWS p5.48xlarge (8x H100)"], _MIG_80),
        _entry(REFERENCE_MODEL, 80, 1.0, 8, "fp64 fp32 tf32 bf16 fp16 int8",
               ["A100-80GB", "A100-SXM4-80GB", "A100-80GB-PCIE", "A100-PCIE-80GB", "A800-SXM4-80GB"],
               [ds.format("a100"), "speed: the reference (1.0)", _MIG_SRC,
                "GPUs per node: AWS p4de.24xlarge (8x A100 80GB)"], _MIG_80),
        _entry("A100-40GB", 40, 1.0, 8, "fp64 fp32 tf32 bf16 fp16 int8",
               ["A100-40GB", "A100-SXM4-40GB", "A100-PCIE-40GB"],
               [ds.format("a100"), "speed: estimate, 1.0 (same GA100 chip as the reference)", _MIG_SRC,
                "GPUs per node: AWS p4d.24xlarge (8x A100 40GB)"],
               _mig(("1g.5gb", 7), ("2g.10gb", 3), ("3g.20gb", 2), ("4g.20gb", 1), ("7g.40gb", 1))),
        _entry("L40S", 48, 0.70, 4, "fp32 tf32 bf16 fp16 fp8 int8", ["L40S", "L40S-48GB"],
               [ds.format("l40s"), _RULE + ": sqrt(362/312 x 864/2039) = 0.70", _ESTIMATE_TRAIN,
                "GPUs per node: AWS g6e.12xlarge (4x L40S)"]),
        _entry("L4", 24, 0.31, 1, "fp32 tf32 bf16 fp16 fp8 int8", ["L4", "L4-24GB"],
               [ds.format("l4"), _MLPERF.format(round="3.0") + ": 13,158 vs 42,379 samples/s = 0.31",
                _ESTIMATE_TRAIN, "GPUs per node: AWS g6.xlarge (1x L4)"]),
        _entry("A10G", 24, 0.35, 1, "fp32 tf32 bf16 fp16 int8", ["A10G", "A10G-24GB", "A10", "A10-24GB"],
               ["aws.amazon.com/ec2/instance-types/g5/ (A10G, 24 GB); nvidia.com/en-us/data-center/products/a10-gpu/",
                "speed: estimate, the A10's " + _MLPERF.format(round="1.1") + ": 13,805 vs 39,830 samples/s = 0.35",
                _ESTIMATE_TRAIN, "GPUs per node: AWS g5.xlarge (1x A10G)"]),
        _entry("T4", 16, 0.16, 4, "fp32 fp16 int8", ["T4", "T4-16GB"],
               [ds.format("tesla-t4"), _MLPERF.format(round="0.7") + ": 6,036 vs 37,480 samples/s (A100 40GB) = 0.16",
                _ESTIMATE_TRAIN, "GPUs per node: the 4-GPU T4 nodes of alibaba/clusterdata cluster-trace-gpu-v2023"]),
        _entry("V100-32GB", 32, 0.42, 8, "fp64 fp32 fp16",
               ["V100-32GB", "V100-SXM2-32GB", "V100-PCIE-32GB", "V100S-PCIE-32GB", "V100M32"],
               [ds.format("v100"), _RULE + ": sqrt(125/312 x 900/2039) = 0.42", _ESTIMATE_TRAIN,
                "GPUs per node: AWS p3dn.24xlarge (8x V100 32GB)"]),
    ]
    return {e.name: e for e in entries}


BUILTIN_CATALOGUE: dict[str, GpuModelSpec] = _builtin()


def _label_index(catalogue: dict[str, GpuModelSpec]) -> dict[str, str]:
    idx: dict[str, str] = {}
    for name, spec in catalogue.items():
        for label in [name, *spec.product_labels]:
            idx.setdefault(clean_model_name(label), name)
    return idx


def normalise_model_name(raw: str, catalogue: dict[str, GpuModelSpec] | None = None) -> str:
    """The catalogue name of a GPU model as a cluster spells it: GFD's ``nvidia.com/gpu.product``
    ("NVIDIA-A100-SXM4-80GB", "Tesla-T4", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "NVIDIA-L4-SHARED"),
    dcgm-exporter's ``modelName`` ("NVIDIA A100-SXM4-80GB") or a catalogue name in any case. The string is
    cleaned by :func:`clean_model_name`, then matched case-insensitively against each entry's name and
    ``product_labels`` (``catalogue``, default :data:`BUILTIN_CATALOGUE`). Unknown models come back as the
    cleaned string (upper-case); no error is raised."""
    cleaned = clean_model_name(raw)
    return _label_index(catalogue if catalogue is not None else BUILTIN_CATALOGUE).get(cleaned, cleaned)


def load_catalogue(overrides: dict[str, dict] | None = None) -> dict[str, GpuModelSpec]:
    """The built-in catalogue with ``overrides`` applied: ``{model: {field: value}}`` replaces those fields of a
    built-in entry (``speed`` is merged per kind, so ``{"speed": {"training": 1.2}}`` keeps the inference
    figure), or adds a new entry (then every required field of :class:`GpuModelSpec` must be given; ``name``
    is always the key). Raises pydantic's ``ValidationError`` on a bad field or value."""
    out = {k: v.model_copy(deep=True) for k, v in BUILTIN_CATALOGUE.items()}
    for key, fields in (overrides or {}).items():
        fields = dict(fields)
        base = out.get(key)
        if base is not None:
            merged = base.model_dump()
            if isinstance(fields.get("speed"), dict):  # anything else is refused by the model's own validation
                fields["speed"] = {**merged["speed"], **fields["speed"]}
            merged.update(fields)
            merged["name"] = key
        else:
            merged = {**fields, "name": key}
        out[key] = GpuModelSpec.model_validate(merged)
    return out


def spec_for(catalogue: dict[str, GpuModelSpec], name: str) -> GpuModelSpec:
    """The entry for ``name``: the exact key first, then :func:`normalise_model_name` of it. Raises
    :class:`UnknownGpuModel` naming the key and the known models."""
    if name in catalogue:
        return catalogue[name]
    norm = normalise_model_name(name, catalogue)
    if norm in catalogue:
        return catalogue[norm]
    raise UnknownGpuModel(f"unknown GPU model {name!r}; the catalogue knows {', '.join(sorted(catalogue))} "
                          "(add it under gpu_catalogue: in the config)")


def models_for(catalogue: dict[str, GpuModelSpec], gpu_models: list[str] | None = None,
               min_gpu_memory_gb: float | None = None) -> list[str]:
    """Catalogue names a series may run on: ``gpu_models`` (each resolved by :func:`spec_for`; all catalogue
    models when None or empty) with at least ``min_gpu_memory_gb`` GB per GPU (no floor when None), in the
    order given (catalogue order when all). May be empty: the caller decides whether that is an error.
    Raises :class:`UnknownGpuModel` for a model not in the catalogue."""
    names = [spec_for(catalogue, m).name for m in gpu_models] if gpu_models else list(catalogue)
    floor = min_gpu_memory_gb or 0.0
    seen: list[str] = []
    for n in names:
        if catalogue[n].memory_gb >= floor and n not in seen:
            seen.append(n)
    return seen
