"""MIG layouts and sharing settings (optimizer.fleet.mig), on the catalogue's A100-40GB and H100-80GB profiles
(NVIDIA MIG user guide; optimizer.book.gpus): hand-checked cases."""

from __future__ import annotations

import pandas as pd
import pytest

from optimizer.book.gpus import BUILTIN_CATALOGUE, UnknownGpuModel
from optimizer.fleet.mig import (
    FractionalSeries,
    geometries,
    peak_demand,
    profile_for,
    recommend,
    recommend_layout,
    recommend_sharing,
)

A40 = BUILTIN_CATALOGUE["A100-40GB"]
H80 = BUILTIN_CATALOGUE["H100-80GB"]


def test_geometries_follow_the_placement_rule():
    geos = geometries(A40)
    assert {"1g.5gb": 7} in geos and {"3g.20gb": 2} in geos and {"2g.10gb": 3, "1g.5gb": 1} in geos
    assert {"4g.20gb": 1, "3g.20gb": 1} in geos and {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1} in geos
    assert {"3g.20gb": 2, "1g.5gb": 1} not in geos  # 45 GB of 40
    assert {"4g.20gb": 1, "2g.10gb": 2} not in geos  # 8 compute slices of 7
    assert all(sum(A40.profile(p).slices * k for p, k in g.items()) <= 7 for g in geos)
    assert {"1g.20gb": 4} in geometries(H80) and {"1g.20gb": 4, "1g.10gb": 1} not in geometries(H80)


@pytest.mark.parametrize("demand, gpus, name, stranded", [
    ({"3g.20gb": 2}, 1, "all-3g.20gb", 1),  # two 3g on one GPU: the 7th slice cannot be used
    ({"1g.5gb": 14}, 2, "all-1g.5gb", 0),
    ({"4g.20gb": 2}, 2, "all-4g.20gb", 6),  # one 4g per GPU: 3 slices each left over
    ({"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, 1, "all-balanced", 0),
    ({"1g.5gb": 7, "7g.40gb": 1}, 2, "custom", 0),
    ({"2g.10gb": 4, "1g.5gb": 1}, 2, "custom", 14 - 9),  # 3 + 1 GPUs' worth of 2g: two GPUs, 9 slices asked
])
def test_fewest_gpus_covering_the_peak_per_profile(demand, gpus, name, stranded):
    lay = recommend_layout(A40, demand)
    assert (lay.gpus, lay.name, lay.stranded_slices) == (gpus, name, stranded)
    for p, k in demand.items():
        assert lay.instances[p] >= k
    assert lay.stranded_slices == lay.unpartitioned_slices + lay.idle_instance_slices


def test_h100_layout_from_history_of_fractional_demand():
    """A 0.1 share with 8 GB (1g.10gb), a 0.4 share (3 of 7 slices: 3g.40gb), 25 GB (no 1g or 2g profile holds
    it: 3g.40gb) and one that names 1g.10gb. Peaks per profile: 1g.10gb 5 (3 + 2 at t1), 3g.40gb 2 (at t0)."""
    series = [FractionalSeries(series_id="a", share=0.1, memory_gb=8), FractionalSeries(series_id="b", share=0.4),
              FractionalSeries(series_id="c", memory_gb=25), FractionalSeries(series_id="d", profile="1g.10gb")]
    assert [profile_for(H80, s).name for s in series] == ["1g.10gb", "3g.40gb", "3g.40gb", "1g.10gb"]
    t = pd.to_datetime(["2026-01-01 00:00", "2026-01-01 01:00"], utc=True)
    hist = pd.DataFrame({"series_id": ["a", "a", "b", "b", "c", "c", "d", "d"], "timestamp": list(t) * 4,
                         "value": [1, 3, 1, 0, 1, 0, 0, 1.5]})
    assert peak_demand(hist, series, H80) == {"1g.10gb": 5, "3g.40gb": 2}
    lay = recommend(hist, series, H80)
    assert lay.gpus == 2  # 2 x 3 slices + 5 x 1 = 11 slices > 7; each GPU: one 3g.40gb and up to four 1g.10gb
    assert lay.instances["3g.40gb"] == 2 and lay.instances["1g.10gb"] >= 5
    assert lay.stranded_slices == 14 - 11
    cfg = lay.mig_parted_config()
    assert cfg["version"] == "v1" and cfg["mig-configs"]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="'big'"):
        profile_for(A40, FractionalSeries(series_id="big", memory_gb=60))
    with pytest.raises(UnknownGpuModel, match="9g.99gb"):
        recommend_layout(A40, {"9g.99gb": 1})
    with pytest.raises(ValueError):
        FractionalSeries(series_id="x", share=1.5)
    with pytest.raises(ValueError, match="no MIG"):
        geometries(BUILTIN_CATALOGUE["T4"])


def test_sharing_setting_on_a_model_without_mig():
    s = recommend_sharing("T4", [0.25, 0.5, 1.0, 0.3])
    assert (s.mode, s.replicas) == ("mps", 4)
    assert recommend_sharing("T4", [0.01]).replicas == 48  # MPS client limit
    assert recommend_sharing("T4", [1.0]).replicas == 1
    hist = pd.DataFrame({"series_id": ["a"], "timestamp": pd.to_datetime(["2026-01-01"], utc=True), "value": [2]})
    got = recommend(hist, [FractionalSeries(series_id="a", memory_gb=4)], BUILTIN_CATALOGUE["T4"])
    assert got.replicas == 4  # 4 GB of a 16 GB T4
