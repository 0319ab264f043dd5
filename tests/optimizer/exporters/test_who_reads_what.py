"""Say who reads what: policy.yaml's header names the objects that enforce the plan and what the
policy is for, and docs/objects.md covers every object the exporters write."""

from __future__ import annotations

from pathlib import Path

from optimizer.exporters.dispatcher_policy import POLICY_ROLE, write
from optimizer.exporters.settings import ExportSettings

REPO = Path(__file__).resolve().parents[3]


def test_the_policy_header_says_what_enforces_the_plan_and_what_it_is_for():
    from optimizer.exporters.base import Context
    from optimizer.plan.policy import Metrics, SeriesPlan

    m = Metrics(cost_usd=1.0, coverage=1.0, idle_ratio=0.0, unmet=0.0, scale_events=0, p95_utilization=0.5)
    p = SeriesPlan(series_id="train/a", kind="training", unit="gpu", params={}, plan={"reserved_gpus": 1,
                   "on_demand_gpus": 0, "spot_gpus": 2, "capability_gpus": 4}, recommended=m, baseline=m)
    doc = write([p], Context(settings=ExportSettings(), names={"train/a": "a"}))[0]
    header = doc.header
    for word in ("Volcano Queue", "KEDA ScaledObject or HPA", "PriorityClasses", "Kueue", "No controller",
                 "purchase mix per lead time", "docs/objects.md"):
        assert word in header, word
    assert all(len(line) <= 120 for line in POLICY_ROLE)


def test_docs_objects_names_every_object_the_exporters_write():
    text = (REPO / "docs" / "objects.md").read_text()
    for obj in ("Queue", "ScaledObject", "TriggerAuthentication", "HorizontalPodAutoscaler", "prometheus-adapter",
                "PriorityClass", "ResourceFlavor", "ClusterQueue", "LocalQueue", "DispatcherPolicy", "policy.yaml"):
        assert obj in text, obj
    assert "docs/objects.md" in (REPO / "README.md").read_text()
