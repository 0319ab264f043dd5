"""One word for the recommendation: report.json carries ``recommendation`` only (an older report's
``recommended_policy`` is read into it), the plan table names it on the recommended row, and a rival
the exports cannot express is never the recommendation."""

from __future__ import annotations

import copy
import io
import json

import numpy as np
import pytest
from rich.console import Console

from capplan.cli.commands.plan import csv_rows, print_report
from capplan.report.model import Report, SeriesReport
from optimizer.exporters.dispatcher_policy import mix_comment
from optimizer.plan.policy import Metrics, SeriesPlan
from optimizer.search.tuning import SearchTask, Tuned, evaluate_policy
from tests.capplan.cli.test_cli_output import report


def _old(entry: dict, policy: str, kept: bool) -> dict:
    e = copy.deepcopy(entry)
    e.pop("recommendation", None)
    e["recommended_policy"] = policy
    e["tuning"] = {"incumbent_kept": kept}
    return e


@pytest.mark.parametrize(("policy", "kept", "word", "internal"), [
    ("searched", True, "rule", "searched"), ("searched", False, "searched", "searched"),
    ("reactive", False, "reactive", "reactive")])
def test_an_older_report_is_read_into_the_one_field(policy, kept, word, internal):
    entry = report()["series"]["infer/llm-chat"]
    s = SeriesReport.model_validate(_old(entry, policy, kept))
    assert s.recommendation == word and s.recommended_policy == internal
    dumped = s.model_dump()
    assert "recommended_policy" not in dumped and dumped["recommendation"] == word
    assert SeriesReport.model_validate(dumped).recommendation == word  # and written back the same
    schema = json.dumps(Report.model_json_schema())
    assert '"recommended_policy"' not in schema


def test_the_table_and_csv_name_the_recommendation():
    rep = report()
    rep["series"]["train/a-very-long-team-pool-name"] = _old(rep["series"]["train/a-very-long-team-pool-name"],
                                                            "searched", True)
    rep["series"]["infer/llm-chat"]["recommendation"] = "reactive"
    r = Report.model_validate(rep)
    c = Console(width=200, record=True, color_system=None, file=io.StringIO())
    print_report(r, c)
    text = c.export_text()
    assert "recommended (rule)" in text and "recommended (reactive)" in text
    assert "(recommended (reactive): the policy the exports carry" in text
    words = {(row["series_id"], row["recommendation"]) for row in csv_rows(r)}
    assert words == {("train/a-very-long-team-pool-name", "rule"), ("infer/llm-chat", "reactive")}


def test_policy_yaml_header_names_the_recommendation():
    m = Metrics(cost_usd=10.0, coverage=1.0, idle_ratio=0.0, unmet=0.0, scale_events=0, p95_utilization=0.5,
                mix={"reserved": {"gpu_hours": 0.0, "cost_usd": 0.0}, "spot": {"gpu_hours": 10.0, "cost_usd": 4.0},
                     "on_demand": {"gpu_hours": 0.0, "cost_usd": 0.0}})
    p = SeriesPlan(series_id="train/a", kind="training", unit="gpu", params={}, plan={}, recommended=m, baseline=m,
                   recommendation="rule")
    assert mix_comment(p).startswith("train/a (recommendation: rule): ")


def _task() -> SearchTask:
    from tests.optimizer.search.test_tuning import _task as flat_task

    return flat_task()


@pytest.mark.parametrize("rival", ["baseline", "reactive"])
def test_a_rival_the_exports_cannot_express_is_not_recommended(rival):
    """A stored tuning that chose such a rival (before the rule) evaluates to the searched policy, whose replay is
    what the exports carry: the recommended figures are the searched policy's, not the rival's."""
    from optimizer.search.tuning import tune_policy

    task = _task()
    tuned = tune_policy(task)
    kept = evaluate_policy(task, tuned)
    forced = evaluate_policy(task, Tuned(**{**tuned.__dict__, "recommended_policy": rival}))
    assert forced.recommended_policy == "searched" and forced.searched is None
    assert forced.params == kept.params
    assert forced.recommended.cost_usd == kept.recommended.cost_usd
    assert np.isfinite(forced.baseline.cost_usd) and forced.recommended.cost_usd != forced.baseline.cost_usd
