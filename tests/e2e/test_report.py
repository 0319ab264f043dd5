"""The typed report (capplan.report.model), its published schema, and typed search bounds at config load."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.conftest import REPO


def test_published_schema_is_the_generated_one():
    from capplan.report.model import schema
    published = json.loads((REPO / "schemas" / "report.schema.json").read_text())
    assert published == json.loads(json.dumps(schema())), \
        "schemas/report.schema.json is stale: python -m capplan.report.model > schemas/report.schema.json"


def test_plan_report_validates_against_the_schema_and_loads_typed(plan_run):
    from capplan.report.model import Report, schema

    out, report, _ = plan_run
    doc = json.loads((out / "report.json").read_text())
    jsonschema.Draft202012Validator(schema()).validate(doc)
    rep = Report.load(out)
    assert set(rep.series) == set(report["series"])
    for sid, s in rep.series.items():
        assert s.recommended.cost_usd == pytest.approx(report["series"][sid]["recommended"]["cost_usd"])
        assert s.windows.evaluation == tuple(report["series"][sid]["evaluation_window"])
    assert "logical_date" not in doc["run"]  # Airflow-only fields are left out of CLI runs


def test_a_report_of_another_shape_is_an_input_error_naming_the_file(plan_run, tmp_path):
    """An edited or older report.json: InputError (exit 2) naming the file and the field, not a traceback."""
    from capplan.errors import InputError
    from capplan.report.model import Report

    out, _, _ = plan_run
    doc = json.loads((out / "report.json").read_text())
    sid = next(iter(doc["series"]))
    del doc["series"][sid]["recommended"]
    (tmp_path / "report.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"report\.json: not a report of this capplan version .*recommended"):
        Report.load(tmp_path)
    (tmp_path / "report.json").write_text("{truncated")
    with pytest.raises(InputError, match="not JSON"):
        Report.load(tmp_path)


def test_the_plan_section_is_typed_per_kind_and_keeps_its_json_keys(plan_run):
    """`plan` loads as TrainingPlan or InferencePlan by the series' kind, and dumps to the same JSON
    (same keys in the same order, no null added for an absent top-up)."""
    from capplan.report.model import InferencePlan, Report, TrainingPlan, jsonout

    out, report, _ = plan_run
    rep = Report.load(out)
    kinds = set()
    for sid, s in rep.series.items():
        want = TrainingPlan if s.kind == "training" else InferencePlan
        assert isinstance(s.plan, want), (sid, type(s.plan))
        raw = report["series"][sid]["plan"]
        again = json.loads(jsonout.dumps(s.plan.model_dump()))
        assert list(again) == list(raw) and again == raw, sid
        kinds.add(s.kind)
    assert kinds == {"training", "inference"}
    bad = dict(report["series"]["infer/nasa-http"]["plan"], min_replicas="many")
    with pytest.raises(ValueError):
        InferencePlan.model_validate(bad)


def test_nan_figures_are_written_as_null():
    from capplan.report.model import PolicyMetrics, Report, RunInfo

    run = RunInfo(run_id="r", seed=0, started_at="2024-01-01T00:00:00+00:00", source="x", coverage_target=0.95,
                  n_calls=4)
    rep = Report(run=run)
    m = PolicyMetrics(cost_usd=1.0, coverage=float("nan"), idle_ratio=0.0, unmet=0.0)
    doc = json.loads(rep.to_json(), parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))
    assert doc["series"] == {} and doc["missing"] == {}
    assert json.loads(m.model_dump_json())["coverage"] is None


@pytest.mark.parametrize("bounds, says", [
    ("training_bounds: {reservation_ratio: [1.0, 0.5]}", "low 1.0 must be below high 0.5"),
    ("training_bounds: {reservaton_ratio: [0, 1]}", "reservaton_ratio"),
    ("training_bounds: {headroom: [1.0]}", "headroom"),
    ("training_bounds: {quantile: [p42]}", "quantile"),
    ("inference_bounds: {scale_down_percent: [5, 200]}", "outside what the policy allows"),
])
def test_bad_search_bounds_fail_at_load_with_exit_2(tmp_path, capsys, bounds, says):
    from tests.conftest import run_cli

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"plan:\n  {bounds}\n")
    code, _, err = run_cli(["plan", "--config", str(cfg), "--out", str(tmp_path / "o")], capsys)
    assert code == 2, err
    assert says in err and str(cfg) in err and not (tmp_path / "o").exists()


def test_good_search_bounds_reach_the_search_space():
    from capplan.config.settings import PlanConfig
    from optimizer.search.tuning import PolicyReplay

    pc = PlanConfig.model_validate({"training_bounds": {"reservation_ratio": [0.2, 0.4], "quantile": ["p95"]},
                                    "inference_bounds": {"min_replicas": [2, 3], "max_replicas": 9}})
    s = pc.search_settings()
    sp = PolicyReplay("training", s).space(None)
    dims = {d.name: d for d in sp.dims}
    assert (dims["reservation_ratio"].low, dims["reservation_ratio"].high) == (0.2, 0.4)
    assert sp.labels["quantile"] == ["p95"]
    assert type(s).__name__ == "SearchSettings"  # what workers receive holds no capplan type
