"""Packing of fractional GPU requests (optimizer.fleet.sharing): hand-checked placements and stranded GPUs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optimizer.fleet.sharing import SharingSetting, place, shares_by_model


def _nodes(*rows):
    return pd.DataFrame(rows, columns=["node", "model", "gpus", "cpu_milli", "memory_mib"])


def _pods(*rows):
    """rows: (cpu_milli, num_gpu, gpu_milli, gpu_spec)"""
    return pd.DataFrame([{"pod": f"p{i}", "cpu_milli": c, "memory_mib": 1024, "num_gpu": g, "gpu_milli": m,
                          "gpu_spec": s, "creation_time": i} for i, (c, g, m, s) in enumerate(rows)])


ONE_NODE = _nodes(("a", "T4", 2, 10_000, 100_000))
# shares 0.3, 0.6, 0.4, 0.7 in that order
FOUR = _pods((1000, 1, 300, ""), (1000, 1, 600, ""), (1000, 1, 400, ""), (1000, 1, 700, ""))


def test_whole_gpu_placement_strands_the_rest_of_each_gpu_a_fractional_pod_holds():
    pl = place(ONE_NODE, FOUR, "whole")
    assert pl.node_of.tolist() == [0, 0, -1, -1]
    row = pl.per_model.iloc[0]
    assert row["idle_exclusive_gpus"] == pytest.approx(0.7 + 0.4)
    assert row["fragmented_gpus"] == pytest.approx(0.0)
    assert pl.stranded_gpus == pytest.approx(1.1)
    assert (pl.unplaced_pods, pl.unplaced_gpus) == (2, pytest.approx(1.1))


def test_shared_placement_follows_fragmentation_gradient_descent():
    """By hand, workload shapes 0.3/0.6/0.4/0.7 at 1/4 each: after 0.3 on GPU 0 (free 0.7, 1.0), 0.6 on GPU 0
    leaves (0.1, 1.0), expected fragmentation 0.1; on GPU 1 it leaves (0.7, 0.4), fragmentation 0.2 (0.4 is too
    small for 0.6 and 0.7). So 0.6 joins GPU 0, 0.4 goes to GPU 1, 0.7 fits nowhere; GPU 0's 0.1 is below every
    share (stranded), GPU 1's 0.6 still holds a 0.3 (not stranded)."""
    pl = place(ONE_NODE, FOUR, "shared")
    assert pl.node_of.tolist() == [0, 0, 0, -1]
    assert pl.gpus_of[0] == pl.gpus_of[1] != pl.gpus_of[2]
    row = pl.per_model.iloc[0]
    assert row["free_gpus"] == pytest.approx(0.7)
    assert row["fragmented_gpus"] == pytest.approx(0.1)
    assert row["idle_exclusive_gpus"] == 0
    assert row["max_pods_per_gpu"] == 2
    assert pl.stranded_gpus == pytest.approx(0.1)


def test_gpu_type_cpu_and_whole_gpu_requests_are_respected():
    nodes = _nodes(("t4", "T4", 4, 4000, 100_000), ("v", "V100M32", 2, 64_000, 100_000))
    pods = _pods((1000, 1, 500, "V100M32"), (8000, 1, 500, ""), (1000, 2, 1000, ""), (1000, 1, 500, "V100M32"),
                 (1000, 1, 600, "V100M32"))
    pl = place(nodes, pods, "shared")
    assert pl.node_of[0] == 1 and pl.node_of[3] == 1
    assert pl.node_of[1] == 1  # 8 cores: only the V100 node has them
    assert pl.node_of[2] == 0  # two whole GPUs: the T4 node (the V100s are shared)
    assert pl.node_of[4] == -1  # of the V100 GPUs one holds 0.5 + 0.5, the other 0.5: 0.6 fits nowhere
    v = pl.per_model.set_index("model").loc["V100M32"]
    assert v["placed_gpus"] == pytest.approx(1.5) and v["free_gpus"] == pytest.approx(0.5)


def test_replicas_bound_the_pods_per_gpu_and_strand_the_rest():
    pods = _pods((100, 1, 100, ""), (100, 1, 100, ""), (100, 1, 100, ""))
    pl = place(_nodes(("a", "T4", 1, 10_000, 100_000)), pods, "shared",
               settings={"T4": SharingSetting(model="T4", replicas=2)})
    assert pl.node_of.tolist() == [0, 0, -1]
    assert pl.stranded_gpus == pytest.approx(0.8)  # two pods hold the GPU, 0.8 free that no pod may use


def test_gpu_memory_need_raises_the_share_on_a_small_gpu():
    pods = _pods((100, 1, 100, ""), (100, 1, 100, "")).assign(gpu_memory_gb=[10.0, 10.0])
    pl = place(_nodes(("a", "T4", 1, 10_000, 100_000)), pods, "shared", gpu_memory_gb={"T4": 16.0})
    assert pl.node_of.tolist() == [0, -1]  # 10 GB of 16 is a 0.625 share: two do not fit one T4


def test_sharing_never_strands_more_on_random_inventories():
    rng = np.random.default_rng(7)
    for _ in range(3):
        nodes = _nodes(*[(f"n{i}", rng.choice(["A", "B"]), int(rng.choice([1, 2, 4, 8])), 32_000, 256_000)
                         for i in range(12)])
        rows = [(int(rng.integers(1, 8)) * 1000, int(g), int(m) if g == 1 else 1000, rng.choice(["", "A", "B"]))
                for g, m in zip(rng.choice([0, 1, 1, 1, 2], 120), rng.choice([1000, 500, 250, 800, 100], 120))]
        pods = _pods(*rows)
        whole, shared = place(nodes, pods, "whole"), place(nodes, pods, "shared")
        assert shared.stranded_gpus < whole.stranded_gpus
        assert shared.placed_pods >= whole.placed_pods


@pytest.mark.parametrize("bad, word", [({"gpu_milli": 1200}, "gpu_milli"), ({"num_gpu": 2, "gpu_milli": 500}, "whole"),
                                       ({"num_gpu": -1}, "num_gpu")])
def test_bad_pods_are_named(bad, word):
    pods = _pods((1000, 1, 300, "")).assign(**bad)
    with pytest.raises(ValueError, match=word) as e:
        place(ONE_NODE, pods)
    assert "p0" in str(e.value)


def test_a_model_no_node_has_is_named():
    with pytest.raises(ValueError, match=r"pod p0: gpu_spec names GPU model\(s\) \['H100'\]"):
        place(ONE_NODE, _pods((1000, 1, 300, "T4|H100")))


def test_shares_by_model_follow_the_type_constraint():
    got = shares_by_model(_pods((1, 1, 300, "A"), (1, 1, 1000, ""), (1, 1, 600, "")), ["A", "B"])
    assert sorted(got["A"].tolist()) == [0.3, 0.6] and got["B"].tolist() == [0.6]
