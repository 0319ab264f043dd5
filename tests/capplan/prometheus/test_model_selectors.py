"""Model selectors of the PromQL templates, without a server: bad input is a clear error naming the
template and key before any query is sent, and nothing in a selector value can change the query."""

from __future__ import annotations

import pytest

from capplan.config.settings import CapplanConfig
from capplan.errors import InputError
from capplan.promql.models import base_products, patterns
from capplan.promql.render import render


@pytest.mark.parametrize("selector, match", [
    ({}, "needs one of selector.gpu_product"),
    ({"namespace": "team-a"}, "needs one of selector.gpu_product"),
    ({"gpu_product": 'NVIDIA-L4"} or vector(1000) or x{y="'}, "not a GPU product label value"),
    ({"gpu_product": "NVIDIA-L4|"}, "not a GPU product label value"),
    ({"gpu_model": "B9000-1TB"}, "not a catalogue GPU model"),
    ({"gpu_model": "L4", "gpu_product": "NVIDIA-L4"}, "not both"),
])
def test_a_bad_model_selector_is_refused(selector, match):
    with pytest.raises(InputError, match=match) as exc:
        render("k8s_gpus_requested_by_model", selector)
    assert "k8s_gpus_requested_by_model" in str(exc.value)


def test_a_model_selector_where_no_model_can_be_selected_is_refused():
    with pytest.raises(InputError, match="selects a GPU model only in"):
        render("kueue_admitted_gpus", {"gpu_product": "NVIDIA-L4"})
    with pytest.raises(InputError, match="shared_replicas must be a whole number"):
        render("k8s_gpus_allocatable_by_model", {"gpu_product": "NVIDIA-L4"}, {"shared_replicas": "2.5"})


def test_the_config_names_the_series_and_the_key():
    with pytest.raises(Exception, match="series 'gpu/x'.*selector.gpu_model 'X1'"):
        CapplanConfig.model_validate({"prometheus": {"url": "http://127.0.0.1:9090"}, "series": [
            {"id": "gpu/x", "template": "k8s_gpus_allocatable_by_model", "selector": {"gpu_model": "X1"}}]})


def test_products_lose_their_sharing_suffixes_and_match_both_spellings():
    assert base_products("NVIDIA-L4-SHARED|NVIDIA-L4|NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "t") == [
        "NVIDIA-L4", "NVIDIA-A100-SXM4-80GB"]
    node, dcgm = patterns("gpu_product", "NVIDIA-A100-SXM4-80GB", "t")
    assert (node, dcgm) == ("(NVIDIA-A100-SXM4-80GB)", "(NVIDIA[- ]A100[- ]SXM4[- ]80GB)")
    q = render("dcgm_gpus_busy", {"gpu_product": "NVIDIA-A100-SXM4-80GB", "Hostname": "n1"})
    # the alive term carries the same selection as the series, model included
    alive = q[q.rindex(" or 0 * group("):]
    assert 'modelName=~"(NVIDIA[- ]A100[- ]SXM4[- ]80GB)"' in alive and 'Hostname="n1"' in alive


def test_the_alive_term_of_every_template_carries_its_selection():
    cases = {"k8s_gpus_requested": {"namespace": "team-a"}, "volcano_queue_allocated_gpus": {"queue_name": "q"},
             "kueue_admitted_gpus": {"flavor": "a100"}, "kueue_local_queue_gpus": {"name": "lq", "namespace": "n"},
             "kueue_pending_workloads_gpus": {"cluster_queue": "cq"},
             "k8s_gpus_allocatable_by_model": {"gpu_product": "NVIDIA-L4"}}
    for template, sel in cases.items():
        q = render(template, sel)
        alive = q[q.rindex(" or 0 * "):]
        for v in sel.values():
            assert f'"{v}"' in alive or v in alive, (template, alive)
