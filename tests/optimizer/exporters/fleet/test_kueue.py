"""Kueue export of a fleet's quotas (optimizer.exporters.fleet.kueue) and the lint rules on it: every object validates
against the Kueue CRDs in schemas/, flavors come cheapest first, and a hand-raised quota is caught by
``capplan export --validate``."""

from __future__ import annotations

import pytest
import yaml

from optimizer.book.prices import default_price_book, price_for
from optimizer.exporters import render_all, write_all
from optimizer.exporters.base import render
from optimizer.exporters.checks.lint import lint
from optimizer.exporters.checks.validate import validate_object
from optimizer.exporters.fleet.kueue import FlavorSpec, FleetQuota, ModelQuota, TeamQuota, flavor_name, kueue_docs


def _fleet(**over) -> FleetQuota:
    raw = {
        "cohort": "gpu-fleet",
        "models": {"A100-80GB": FlavorSpec(gpu_product="NVIDIA-A100-SXM4-80GB", capacity_gpus=16),
                   "H100-80GB": FlavorSpec(gpu_product="NVIDIA-H100-80GB-HBM3", capacity_gpus=8),
                   "T4": FlavorSpec(gpu_product="Tesla-T4", capacity_gpus=32,
                                    node_labels={"node.kubernetes.io/instance-type": "g4dn.12xlarge"})},
        "teams": {
            "research": TeamQuota(models={"H100-80GB": ModelQuota(nominal=4),
                                          "A100-80GB": ModelQuota(nominal=8, borrowing_limit=4, lending_limit=2),
                                          "T4": ModelQuota(nominal=8)}),
            "serving": TeamQuota(namespace="llm-serving", models={"T4": ModelQuota(nominal=16),
                                                                  "A100-80GB": ModelQuota(nominal=4)}),
            "batch": TeamQuota(scheduler="volcano", models={"T4": ModelQuota(nominal=8, borrowing_limit=4),
                                                           "A100-80GB": ModelQuota(nominal=2, lending_limit=1)}),
        },
    }
    raw.update(over)
    return FleetQuota(**raw)


def _by_kind(docs):
    out: dict[tuple[str, str], dict] = {}
    for d in docs:
        out[(d.obj["kind"], d.obj["metadata"]["name"])] = d.obj
    return out


def test_every_object_validates_against_the_kueue_crds():
    docs = kueue_docs(_fleet())
    kinds = sorted(d.obj["kind"] for d in docs)
    assert kinds == ["ClusterQueue"] * 2 + ["LocalQueue"] * 2 + ["Queue"] + ["ResourceFlavor"] * 3
    for d in docs:
        assert validate_object(yaml.safe_load(render(d)), d.path) == [], d.path
    assert lint([(d.path, d.obj) for d in docs]) == []


def test_cluster_queues_hold_the_plan_in_one_cohort_cheapest_flavor_first():
    objs = _by_kind(kueue_docs(_fleet()))
    book = default_price_book()
    research = objs[("ClusterQueue", "research")]["spec"]
    assert research["cohortName"] == "gpu-fleet"
    assert research["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    names = [f["name"] for f in research["resourceGroups"][0]["flavors"]]
    prices = {flavor_name(m): price_for(book, m)[0].on_demand for m in ("A100-80GB", "H100-80GB", "T4")}
    assert names == sorted(prices, key=prices.get) and len(set(prices.values())) == 3
    a100 = next(f for f in research["resourceGroups"][0]["flavors"] if f["name"] == "a100-80gb")["resources"][0]
    assert a100 == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4", "lendingLimit": "2"}
    assert objs[("LocalQueue", "serving")]["metadata"]["namespace"] == "llm-serving"
    assert objs[("LocalQueue", "serving")]["spec"]["clusterQueue"] == "serving"
    t4 = objs[("ResourceFlavor", "t4")]
    assert t4["spec"]["nodeLabels"]["nvidia.com/gpu.product"] == "Tesla-T4"
    assert t4["metadata"]["annotations"]["capplan.io/capacity-gpus"] == "32"
    # the Volcano team gets a Queue and no Kueue objects
    assert ("ClusterQueue", "batch") not in objs
    q = objs[("Queue", "batch")]["spec"]
    assert q["guarantee"]["resource"]["nvidia.com/gpu"] == "1"  # A100: 2 nominal - 1 lendable
    assert q["deserved"]["nvidia.com/gpu"] == "10"
    assert q["capability"]["nvidia.com/gpu"] == str(8 + 4 + 16)  # T4 nominal + borrowing; A100 up to its capacity


def test_quota_above_capacity_is_a_finding_per_queue_and_per_cohort():
    docs = kueue_docs(_fleet())
    items = [(d.path, d.obj) for d in docs]
    cq = next(o for _, o in items if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "serving")
    a100 = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "a100-80gb")
    a100["resources"][0]["nominalQuota"] = "10"  # research holds 8: 18 of 16 in the cohort
    found = [p for p in lint(items) if p.rule == "kueue-quota-capacity"]
    assert {p.file for p in found} == {"manifests/research-clusterqueue.yaml", "manifests/serving-clusterqueue.yaml"}
    assert all("18" in p.message and "16" in p.message for p in found)
    a100["resources"][0]["nominalQuota"] = "17"  # one queue alone above the flavor's 16
    alone = [p for p in lint(items) if p.rule == "kueue-quota-capacity" and "above the flavor's capacity" in p.message]
    assert [p.file for p in alone] == ["manifests/serving-clusterqueue.yaml"]


@pytest.mark.parametrize("edit,rule,text", [
    ({"nominalQuota": "5e2"}, "kueue-quota-capacity", "above the flavor's capacity"),  # an exponent is a quantity
    ({"nominalQuota": "5.5"}, "kueue-quota-bounds", "not a whole number of GPUs"),
    ({"nominalQuota": "-5"}, "kueue-quota-bounds", "negative"),
    ({"borrowingLimit": "x"}, "kueue-quota-bounds", "not a quantity"),
])
def test_hand_edited_quantities_are_read_as_kubernetes_reads_them(edit, rule, text):
    items = [(d.path, d.obj) for d in kueue_docs(_fleet())]
    cq = next(o for _, o in items if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "serving")
    a100 = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "a100-80gb")
    a100["resources"][0].update(edit)
    assert any(p.rule == rule and text in p.message for p in lint(items)), [p.message for p in lint(items)]


def test_a_flavor_no_resource_flavor_defines_is_caught():
    items = [(d.path, d.obj) for d in kueue_docs(_fleet())]
    cq = next(o for _, o in items if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "serving")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "t4-nonexistent"
    found = [p for p in lint(items) if "t4-nonexistent" in p.message]
    assert found and found[0].rule == "kueue-quota-capacity" and "inactive" in found[0].message


def test_quota_bounds_and_schema_problems_are_caught():
    docs = kueue_docs(_fleet())
    cq = next(d.obj for d in docs if d.obj["kind"] == "ClusterQueue")
    res = cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]
    res["lendingLimit"] = "99"
    del cq["spec"]["cohortName"]
    rules = [(p.rule, p.path) for p in lint([("cq.yaml", cq)])]
    assert ("kueue-quota-bounds", "spec.resourceGroups[0].flavors[1].resources[0].lendingLimit") in rules
    assert ("kueue-quota-bounds", "spec.resourceGroups[0].flavors[1].resources[0].borrowingLimit") in rules
    res["nominalQuota"] = "lots"
    cq["spec"]["flavorFungibility"]["whenCanBorrow"] = "Borrow"  # the deprecated name
    cq["spec"]["unknownField"] = 1
    paths = {p.path for p in validate_object(cq, "cq.yaml")}
    assert {"spec.resourceGroups[0].flavors[1].resources[0].nominalQuota", "spec.flavorFungibility.whenCanBorrow",
            "spec"} <= paths


def test_fleet_quota_bad_input_is_named():
    with pytest.raises(ValueError, match="L40S"):
        _fleet(teams={"a": TeamQuota(models={"L40S": ModelQuota(nominal=1)})})
    with pytest.raises(ValueError, match="lending_limit"):
        ModelQuota(nominal=2, lending_limit=3)
    with pytest.raises(ValueError, match="Team_A"):
        _fleet(teams={"Team_A": TeamQuota(models={"T4": ModelQuota(nominal=1)})})


def test_no_fleet_writes_no_kueue_object():
    assert not any("clusterqueue" in p or "resourceflavor" in p for p in render_all([]))


def _cli(argv) -> int:
    from capplan.cli.app import main

    with pytest.raises(SystemExit) as ei:
        main(argv)
    return ei.value.code


def test_cli_validate_catches_a_hand_raised_quota(tmp_path, capsys):
    out = tmp_path / "out"
    write_all([], out, fleet=_fleet())
    assert _cli(["export", "--validate", str(out)]) == 0
    f = out / "manifests" / "research-clusterqueue.yaml"
    cq = yaml.safe_load(f.read_text())
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    j = next(i for i, fl in enumerate(flavors) if fl["name"] == "h100-80gb")
    flavors[j]["resources"][0]["nominalQuota"] = "12"  # the H100 flavor has 8
    f.write_text(yaml.safe_dump(cq, sort_keys=False))
    capsys.readouterr()
    assert _cli(["export", "--validate", str(out)]) == 2
    lines = capsys.readouterr().out.splitlines()
    want = (f"manifests/research-clusterqueue.yaml: spec.resourceGroups[0].flavors[{j}].resources[0].nominalQuota: "
            "[kueue-quota-capacity] nominalQuota 12 of nvidia.com/gpu in flavor h100-80gb is above the flavor's "
            "capacity of 8 GPUs (capplan.io/capacity-gpus)")
    assert want in lines
