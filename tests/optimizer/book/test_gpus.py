"""The GPU catalogue: built-in entries, name normalisation, overrides, lookups and the price book's alias."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from optimizer.book.gpus import (
    BUILTIN_CATALOGUE,
    REFERENCE_MODEL,
    GpuModelSpec,
    UnknownGpuModel,
    load_catalogue,
    models_for,
    normalise_model_name,
    spec_for,
)
from optimizer.book.prices import _ON_DEMAND, default_price_book, price_for

REQUIRED = ["H200-141GB", "H100-80GB", "A100-80GB", "A100-40GB", "L40S", "L4", "A10G", "T4", "V100-32GB"]


def test_builtin_holds_the_required_models_each_sourced():
    for name in REQUIRED:
        spec = BUILTIN_CATALOGUE[name]
        assert spec.name == name
        assert spec.sources, name
        assert spec.memory_gb > 0 and spec.gpus_per_node >= 1
        assert set(spec.speed) == {"training", "inference"}
    assert BUILTIN_CATALOGUE[REFERENCE_MODEL].speed == {"training": 1.0, "inference": 1.0}
    # estimates are said to be estimates
    assert any("estimate" in s for s in BUILTIN_CATALOGUE["L40S"].sources)


def test_mig_profiles_fit_in_the_gpu():
    for spec in BUILTIN_CATALOGUE.values():
        for p in spec.mig_profiles:
            assert p.slices * p.max_count <= 7, (spec.name, p.name)
            assert p.memory_gb * p.max_count <= spec.memory_gb + 1, (spec.name, p.name)
    assert BUILTIN_CATALOGUE["A100-80GB"].profile("1g.10gb").max_count == 7
    assert not BUILTIN_CATALOGUE["L4"].mig_profiles
    with pytest.raises(UnknownGpuModel, match="1g.10gb"):
        BUILTIN_CATALOGUE["L4"].profile("1g.10gb")


@pytest.mark.parametrize("raw,expected", [
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"),        # dcgm-exporter modelName
    ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),        # GFD gpu.product
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"),
    ("NVIDIA-H100-80GB-HBM3-SHARED", "H100-80GB"),
    ("Tesla-T4", "T4"),
    ("Tesla T4", "T4"),
    ("NVIDIA-L4", "L4"),
    ("a100-80gb", "A100-80GB"),
    ("A10G-24GB", "A10G"),
    ("NVIDIA A10G", "A10G"),
    ("V100M32", "V100-32GB"),
    ("NVIDIA-H200", "H200-141GB"),
    ("NVIDIA Mystery GPU", "MYSTERY-GPU"),          # unknown: the cleaned string
])
def test_normalise_model_name(raw, expected):
    assert normalise_model_name(raw) == expected


def test_overrides_change_a_field_and_add_an_entry():
    cat = load_catalogue({"L4": {"speed": {"training": 0.25}, "gpus_per_node": 8},
                          "MI300X": {"memory_gb": 192, "speed": {"training": 2.0, "inference": 2.0},
                                     "gpus_per_node": 8}})
    assert cat["L4"].speed == {"training": 0.25, "inference": BUILTIN_CATALOGUE["L4"].speed["inference"]}
    assert cat["L4"].gpus_per_node == 8
    assert cat["MI300X"].memory_gb == 192 and cat["MI300X"].name == "MI300X"
    assert BUILTIN_CATALOGUE["L4"].gpus_per_node == 1  # the built-in is not changed
    with pytest.raises(ValidationError):
        load_catalogue({"L4": {"memory_gb": -1}})
    with pytest.raises(ValidationError):
        load_catalogue({"L4": {"colour": "green"}})
    with pytest.raises(ValidationError):
        load_catalogue({"X1": {"memory_gb": 10}})  # a new entry needs speed and gpus_per_node


def test_spec_for_and_unknown_model_message():
    assert spec_for(BUILTIN_CATALOGUE, "NVIDIA-A100-SXM4-40GB").name == "A100-40GB"
    with pytest.raises(UnknownGpuModel) as e:
        spec_for(BUILTIN_CATALOGUE, "B300")
    msg = str(e.value)
    assert "'B300'" in msg and "A100-80GB" in msg and "T4" in msg
    assert isinstance(e.value, KeyError)


def test_models_for_floor_and_list():
    assert models_for(BUILTIN_CATALOGUE, None, 80) == ["H200-141GB", "H100-80GB", "A100-80GB"]
    assert models_for(BUILTIN_CATALOGUE, ["L4", "A100-40GB", "A100-80GB"], 40) == ["A100-40GB", "A100-80GB"]
    assert models_for(BUILTIN_CATALOGUE, ["L4"], 48) == []
    assert set(models_for(BUILTIN_CATALOGUE)) == set(BUILTIN_CATALOGUE)
    with pytest.raises(UnknownGpuModel):
        models_for(BUILTIN_CATALOGUE, ["L4", "Z9"])


def test_price_book_prices_every_catalogue_model_and_keeps_old_entries():
    book = default_price_book()
    for name in BUILTIN_CATALOGUE:
        price, note = price_for(book, name)
        assert note is None, name
        assert price.on_demand > 0
    assert price_for(book, "A10G")[0] == book["A10G-24GB"]
    for key, value in {"V100-32GB": 3.90, "A100-40GB": 4.10, "A100-80GB": 5.12, "H100-80GB": 12.29,
                       "A10G-24GB": 1.01, "default": 4.10}.items():
        assert _ON_DEMAND[key] == value


def test_spec_refuses_unknown_fields_and_formats():
    with pytest.raises(ValidationError):
        GpuModelSpec(name="x", memory_gb=1, speed={"training": 1, "inference": 1}, gpus_per_node=1, formats=["fp4x"])
    with pytest.raises(ValidationError):
        GpuModelSpec(name="x", memory_gb=1, speed={"training": 1}, gpus_per_node=1)
