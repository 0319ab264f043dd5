"""CLI output that reads well anywhere."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from capplan.cli.commands.output import split_ids
from capplan.cli.commands.plan import print_report
from capplan.cli.console import StageProgress
from capplan.errors import InputError
from capplan.report.model import Report
from capplan.report.summary import exported_metrics, fleet_summary

REPO = Path(__file__).resolve().parents[3]


def metrics(cost, cov, idle=0.25, unmet=12.5, **extra):
    return {"cost_usd": cost, "coverage": cov, "idle_ratio": idle, "unmet": unmet, "scale_events": 3, **extra}


WIN = {"training": ["2020-05-01T00:00:00Z", "2020-05-17T00:00:00Z"],
       "tuning": ["2020-05-17T00:00:00Z", "2020-05-24T00:00:00Z"],
       "evaluation": ["2020-05-24T00:00:00Z", "2020-05-31T00:00:00Z"]}
PLANS = {
    "training": {"reserved_gpus": 100, "on_demand_gpus": 0, "spot_gpus": 20, "capability_gpus": 140,
                 "deserved_gpus": 110, "quota_gpus": 160, "last_peak_gpus": 130, "valid_from": "2020-05-31T00:00:00Z",
                 "baseline": {"capacity_gpus": 156, "reserved_gpus": 130}},
    "inference": {"min_replicas": 2, "max_replicas": 40, "target_utilization": 0.7, "fallback_replicas": 20,
                  "valid_from": "2020-05-31T00:00:00Z",
                  "baseline": {"floor_replicas": 3, "scale_up_percent_util": 70, "scale_down_percent_util": 30}},
}


def entry(kind: str, unit: str, **policies) -> dict:
    """One series of a valid plan report (capplan.report.model.SeriesReport) with these policies."""
    return {"kind": kind, "unit": unit, "gpu_model": "A100-80GB", "windows": WIN,
            "evaluation_window": WIN["evaluation"], "plan": PLANS[kind], **policies}


def report() -> dict:
    """A plan report (the document of capplan.report.model.Report) with long ids, large costs, an extra
    policy family and a regret figure."""
    series = {
        "train/a-very-long-team-pool-name": entry(
            "training", "gpu", recommended=metrics(3_456_789.4, 0.981, regret=1.37),
            baseline=metrics(4_108_237.9, 0.962), random_search=metrics(3_500_000.0, 0.97),
            peers={"reactive": metrics(3_900_123.0, 0.91), "naive_conformal": metrics(3_700_456.0, 0.95)},
            fallbacks=["daily: 12 hours of context < 168 needed; seasonal-naive used"],
            warnings=["policy: the baseline is cheaper on the evaluation window"]),
        "infer/llm-chat": entry(
            "inference", "replica", recommended=metrics(108_765.0, 0.912),
            baseline=metrics(98_001.0, 0.999), random_search=metrics(99_000.0, 0.99),
            peers={"reactive": metrics(101_000.0, 0.93), "naive_conformal": metrics(100_500.0, 0.96)},
            fallbacks=[], warnings=["export: KEDA serverAddress is a placeholder"]),
    }
    return {"run": {"run_id": "r1", "seed": 0, "started_at": "2020-05-31T00:00:00Z", "source": "sample",
                    "coverage_target": 0.95, "n_calls": 8, "files": ["a"], "duration_s": 3.0}, "series": series}


def rendered(rep: dict, width: int) -> str:
    c = Console(width=width, record=True, color_system=None, file=io.StringIO())
    print_report(Report.model_validate(rep), c)  # the CLI prints the typed report
    return c.export_text()


# 11 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 60])
def test_table_keeps_numbers_whole_at_narrow_widths(width):
    rep = report()
    text = rendered(rep, width)
    assert max(len(line) for line in text.splitlines()) <= width
    for s in rep["series"].values():
        for m in (s["recommended"], s["baseline"], *s["peers"].values()):
            assert f"{m['cost_usd']:,.0f}" in text  # 3,456,789 whole, never "3,4…"
            assert f"{100 * m['coverage']:.1f}%" in text
    assert "…" not in text
    assert re.search(r"not shown at \d+ columns: .*kind", text.replace("\n", " "))
    wide = rendered(rep, 200)
    assert "not shown" not in wide and "1.37" in wide and "12.5 GPU-h" in wide  # regret and unmet come back


# 12 -----------------------------------------------------------------------------------------------
def test_fleet_summary_totals_saving_and_misses():
    rep = report()
    s = fleet_summary(rep).model_dump()
    assert s["cost_usd"]["recommended"] == pytest.approx(3_456_789.4 + 108_765.0)
    assert s["cost_usd"]["baseline"] == pytest.approx(4_108_237.9 + 98_001.0)
    assert s["cost_usd"]["reactive"] == pytest.approx(3_900_123.0 + 101_000.0)
    assert list(s["cost_usd"])[:2] == ["recommended", "baseline"]
    assert s["saving_usd"] == pytest.approx(4_108_237.9 + 98_001.0 - 3_456_789.4 - 108_765.0, abs=0.01)
    assert s["saving_ratio"] == pytest.approx(s["saving_usd"] / s["cost_usd"]["baseline"], abs=1e-4)
    assert [m["series_id"] for m in s["missing_target"]] == ["infer/llm-chat"]  # 0.912 < 0.95
    text = rendered(rep, 80).replace("\n", " ")
    assert f"Overall saving against the baseline: {s['saving_usd']:,.0f} USD" in text
    assert "infer/llm-chat (91.2 %)" in text
    rep["series"]["infer/llm-chat"]["recommended"]["cost_usd"] = 2_000_000.0  # now the plan costs more
    text = rendered(rep, 100).replace("\n", " ")
    assert re.search(r"Overall extra cost against the baseline: [\d,]+ USD \(\d+\.\d % of the baseline\)", text)


def test_report_json_has_the_summary(plan_run):
    out, rep, _ = plan_run
    on_disk = json.loads((out / "report.json").read_text())
    s = on_disk["summary"]
    assert s == rep["summary"] and s["series"] == len(rep["series"])
    total = sum(exported_metrics(v)["cost_usd"] for v in rep["series"].values())  # held to a binding quota
    assert s["cost_usd"]["recommended"] == pytest.approx(total, abs=0.01)
    assert {"recommended", "baseline", "random_search"} <= set(s["cost_usd"])
    for sid, v in rep["series"].items():  # one word: the rule a training pool kept is named so, not "searched"
        assert "recommended_policy" not in v, sid
        kept = v["tuning"].get("incumbent_kept", False)
        assert (v["recommendation"] == "rule") == (kept and v["searched"] is None), sid


# 13 -----------------------------------------------------------------------------------------------
def test_fallbacks_and_warnings_are_listed_under_the_table():
    text = rendered(report(), 100)
    assert "For information (1):" in text
    assert "train/a-very-long-team-pool-name: daily: 12 hours of context < 168 needed" in text
    assert "infer/llm-chat: export: KEDA serverAddress is a placeholder" in text


# 14 -----------------------------------------------------------------------------------------------
def test_series_ids_repeated_and_comma_separated():
    assert split_ids(["a,b", "c", " d , ,a"]) == ["a", "b", "c", "d"]
    assert split_ids(None) is None and split_ids([]) is None
    with pytest.raises(InputError, match="--series: no series id given"):  # never "every series"
        split_ids([" , "])


def _cli(argv, capsys):
    from capplan.cli.app import main

    with pytest.raises(SystemExit) as ei:
        main(argv)
    cap = capsys.readouterr()
    return ei.value.code, cap.out, cap.err


def test_plan_formats_output_file_and_series_flags(tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_run_plan(source, cfg, out, series=None, **kw):  # run_plan returns a capplan.report.model.Report
        seen["series"] = series
        rep = report()
        rep["summary"] = fleet_summary(rep).model_dump()
        return Report.model_validate(rep)

    monkeypatch.setattr("capplan.cli.commands.plan.run_plan", fake_run_plan)
    base = ["plan", "--out", str(tmp_path / "o"), "-q", "--series", "train/a,infer/b", "--series", "infer/c"]
    code, out, _ = _cli(base + ["--format", "yaml"], capsys)
    assert code == 0 and seen["series"] == ["train/a", "infer/b", "infer/c"]
    assert yaml.safe_load(out)["summary"]["missing_target"][0]["series_id"] == "infer/llm-chat"
    code, out, _ = _cli(base + ["--format", "json"], capsys)
    assert code == 0 and json.loads(out)["series"].keys() == report()["series"].keys()
    f = tmp_path / "plan.csv"
    code, out, _ = _cli(base + ["--format", "csv", "--output", str(f)], capsys)
    assert code == 0 and out == ""
    rows = list(csv.DictReader(f.open()))
    assert len(rows) == 2 * 5 and {r["policy"] for r in rows} == {"recommended", "baseline", "random_search",
                                                                  "reactive", "naive_conformal"}
    g = tmp_path / "plan.txt"
    assert _cli(base + ["--output", str(g)], capsys)[0] == 0
    assert "3,456,789" in g.read_text() and "\x1b[" not in g.read_text()
    assert _cli(base + ["--format", "xml"], capsys)[0] == 2


@pytest.mark.parametrize("cmd", ["plan", "backtest", "export", "ingest", "dashboard", "discover"])
def test_help_shows_defaults_and_no_bool_labels(cmd, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = _cli([cmd, "--help"], capsys)
    assert code == 0 and "<bool>" not in out and "list[" not in out
    if cmd in ("plan", "backtest"):
        assert "[default: table]" in out and "[default: sample]" in out
        assert "table|json|yaml|csv" in out and "--output" in out and "ID[,ID...]" in out


# 15 -----------------------------------------------------------------------------------------------
def test_progress_plain_lines_when_not_a_tty():
    buf = io.StringIO()
    p = StageProgress(console=Console(file=buf, force_terminal=False, width=200))
    assert p.live is False
    with p:
        p("search", "15 series")
        p("search", "[3/15] train/vc6YE")
        p("search", "[15/15] infer/x")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 and all(re.match(r"^\[\s*\d+\.\d+s\] search: ", x) for x in lines)
    assert re.search(r"search: 3/15 \(eta \d+ s\) train/vc6YE$", lines[1])
    assert lines[2].endswith("search: 15/15 infer/x") and "\x1b[" not in buf.getvalue()


def test_progress_bar_with_counts_on_a_terminal():
    buf = io.StringIO()
    c = Console(file=buf, force_terminal=True, width=120, color_system=None)
    p = StageProgress(console=c)
    assert p.live is True
    with p:
        p("forecast", "rolling origins: hourly")
        p("search", "[3/15] train/vc6YE")
        task = p._bar.tasks[p._tasks["search"]]
        assert (task.completed, task.total, task.description) == (3, 15, "train/vc6YE")
        assert p._bar.tasks[p._tasks["forecast"]].finished  # the previous stage is complete
        p._bar.refresh()
        assert "3/15" in buf.getvalue()
    text = buf.getvalue()
    assert "search" in text and "eta" in text and "train/vc6YE" in text and "15/15" in text


# 16 -----------------------------------------------------------------------------------------------
def test_setup_messages_say_only_what_happens():
    script = (REPO / "scripts/setup.sh").read_text()
    fn = script[script.index("setup_message() {"):]
    fn = fn[:fn.index("\n}\n") + 3]
    said = {m: subprocess.run(["bash", "-c", fn + f"setup_message {m}"], capture_output=True, text=True).stdout
            for m in ("core", "test")}
    assert "Airflow" not in said["core"] and "TensorFlow" in said["core"]
    assert "Airflow" in said["test"]
    assert "setup.sh core" in (REPO / "scripts/plan.sh").read_text()
    readme = (REPO / "README.md").read_text()
    assert "does not install Airflow" in " ".join(readme.split())
