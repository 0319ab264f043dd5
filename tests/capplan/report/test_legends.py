"""The figures are explained where they are printed: a legend under the plan table (regret below 1 included)
and under `backtest --policies`, whose coverage and idle read as percent, as in `plan`."""

from __future__ import annotations

import io

from rich.console import Console

from capplan.cli.commands.plan import LEGEND, print_report
from capplan.report.model import Report
from capplan.report.policy_table import LEGEND as BACKTEST_LEGEND
from capplan.report.policy_table import print_tables
from tests.capplan.cli.test_cli_output import report


def _text(fn, doc) -> str:
    c = Console(width=200, record=True, color_system=None, file=io.StringIO())
    fn(doc, c)
    return c.export_text()


def test_the_plan_table_has_a_legend():
    text = _text(print_report, Report.model_validate(report()))
    assert " ".join(LEGEND.split()) in " ".join(text.split())
    assert "below 1 only for a policy that left demand unmet" in LEGEND


def test_backtest_policies_prints_ratios_as_percent_with_a_legend(monkeypatch):
    import capplan.report.policy_table as pt

    monkeypatch.setattr(pt, "_print_spread", lambda doc, console: None)  # the spread table: its own test
    fig = {"cost_usd": 1234.0, "coverage": 0.9474, "idle_ratio": 0.25, "unmet": 1.0, "regret": 1.0712}
    week = {"week": 2, "start": "2024-03-18T00:00:00+00:00", "end": "2024-03-25T00:00:00+00:00",
            "tuning": ["2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00"], "recommendation": "rule",
            "limit_usd": 1000.0, "policies": {"recommended": fig, "baseline": {**fig, "coverage": 1.0}},
            "rank": {"tuning": 1, "next_week": 3, "candidates": 11, "spearman": 0.5}}
    doc = {"series": {"train/pool": {"weeks": [week], "summary": {}}}, "summary": {}}
    text = _text(print_tables, doc)
    assert "94.7%" in text and "25.0%" in text and "1.07" in text and "0.947" not in text
    assert "recommended (rule)" in text and "1 → 3 of 11" in text
    assert "rank tune → next: the recommendation's rank" in text.replace("\n", " ")
    assert BACKTEST_LEGEND.startswith("(coverage: share of the week's intervals")
