"""The GPU inventory of ``capplan discover`` on answers a cluster without GPU Feature Discovery gives: nodes with no
``nvidia.com/gpu.product`` label are named in a note, never a KeyError."""

from __future__ import annotations

from types import SimpleNamespace

from capplan.prometheus.gpu_inventory import inventory


class _Client:
    """Answers every query with one range result per label set: GPU nodes without the product label."""

    cfg = SimpleNamespace(url="http://127.0.0.1:1")

    def query_range(self, query, start, end, step, series_id=""):
        if "kube_node_labels" in query:
            return [{"metric": {"node": "n1"}, "values": [[start, "1"]]},
                    {"metric": {"node": "n2", "label_nvidia_com_gpu_product": "NVIDIA-L4"}, "values": [[start, "1"]]}]
        if "allocatable" in query:
            return [{"metric": {"node": "n2", "resource": "nvidia_com_gpu"}, "values": [[start, "4"]]}]
        return []


def test_nodes_without_the_product_label_are_a_note_not_a_crash():
    inv = inventory(_Client(), at=1_700_000_000, lookback_s=86400)
    assert list(inv.models) == ["L4"] and inv.models["L4"]["gpus"] == 4
    assert any("without the nvidia.com/gpu.product label" in n and "n1" in n for n in inv.notes)
