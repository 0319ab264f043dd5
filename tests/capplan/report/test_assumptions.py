"""Assumptions first: the price book's assumptions that move the headline (no spot cap, the spot
interruptions, whose prices) are in report.json's summary, among the first three lines under the
plan table, and on the dashboard's Fleet page, each with the setting that changes it."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from capplan.cli.commands.plan import print_report
from capplan.config.settings import CapplanConfig
from capplan.report.assumptions import assumption_lines, assumptions
from capplan.report.model import Report, price_book_used
from capplan.report.summary import fleet_summary
from tests.capplan.cli.test_cli_output import report

MIX = {"reserved": {"gpu_hours": 0.0, "cost_usd": 0.0}, "spot": {"gpu_hours": 92.0, "cost_usd": 40.0},
       "on_demand": {"gpu_hours": 8.0, "cost_usd": 8.0}}


def _with_book(prices: dict | None = None) -> dict:
    cfg = CapplanConfig.model_validate({"prices": prices or {}})
    rep = report()
    rep["run"]["prices"] = price_book_used(cfg)
    for s in rep["series"].values():
        s["gpu_model"] = "A100-40GB"
    rep["series"]["train/a-very-long-team-pool-name"]["recommended"]["mix"] = MIX
    return rep


def test_the_built_in_book_states_no_spot_cap_first_with_the_interruptions_and_prices():
    rep = _with_book()
    got = assumptions(rep, MIX)
    assert [a.topic for a in got] == ["spot_cap", "spot_interruptions", "prices"]
    assert got[0].text.startswith("no spot cap for A100-40GB") and "92 % of the recommended GPU-hours" in got[0].text
    assert "0 vCPUs" in got[0].text and "spot_cap_share" in got[0].setting
    assert "0.01 per spot GPU-hour, 1,800 GPU-seconds" in got[1].text and "plan.interruption_rate" in got[1].setting
    assert "built-in" in got[2].text


def test_a_configured_cap_and_rate_are_stated_as_set():
    rep = _with_book({"A100-40GB": {"on_demand": 4.0, "reserved": 2.5, "spot": 1.5, "spot_cap_share": 0.3,
                                    "interruption_rate": 0.002, "recovery_s": 600}})
    got = {a.topic: a.text for a in assumptions(rep, MIX)}
    assert got["spot_cap"].startswith("spot capped at A100-40GB 30 % of the GPUs bought")
    assert got["spot_interruptions"] == "spot interruptions: 0.002 per spot GPU-hour, 600 GPU-seconds lost each"
    assert got["prices"] == "prices: the configuration's for A100-40GB"


def test_inference_only_or_an_older_report_says_what_it_can():
    rep = _with_book()
    rep["series"] = {k: v for k, v in rep["series"].items() if v["kind"] == "inference"}
    assert [a.topic for a in assumptions(rep)] == ["prices"]  # no spot is bought
    old = report()  # no price book recorded
    assert assumptions(old) == [] and fleet_summary(old).assumptions == []


@pytest.mark.parametrize("width", [200, 80])
def test_the_spot_assumption_is_among_the_first_three_lines_under_the_table(width):
    rep = _with_book()
    r = Report.model_validate(rep)
    r.summary = fleet_summary(r)
    assert json.loads(r.to_json())["summary"]["assumptions"][0]["topic"] == "spot_cap"
    c = Console(width=width, record=True, color_system=None, file=io.StringIO())
    print_report(r, c)
    lines = c.export_text().splitlines()
    end = max(i for i, line in enumerate(lines) if line.startswith("└"))
    under = " ".join(lines[end + 1:end + 4])  # wrapped at narrow widths: the first three printed lines
    assert "Assumes no spot cap for A100-40GB" in under, under
    assert lines[end + 1].startswith("Assumes no spot cap")
    assert assumption_lines(r.summary.assumptions)[0].endswith("Set prices.<gpu model>.spot_cap_share or "
                                                               "spot_cap_gpus")


def test_the_fleet_page_states_the_assumptions_before_the_saving(tmp_path, monkeypatch):
    from tests.e2e.test_dashboard import PAGES, _app, _ok
    from tests.e2e.test_dashboard_notes import synthetic_report, write_store

    rep = synthetic_report()
    rep["run"]["prices"] = price_book_used(CapplanConfig())
    for s in rep["series"].values():
        s["gpu_model"] = "A100-40GB"
    write_store(tmp_path / "store", rep)
    monkeypatch.setenv("CAPPLAN_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("CAPPLAN_CONFIG", raising=False)
    monkeypatch.delenv("CAPPLAN_CONFIG_DIR", raising=False)
    at = _app(PAGES / "fleet.py").run()
    _ok(at)
    first = at.warning[0].value.replace("\\", "")
    assert first.startswith("**The figures assume:**") and "no spot cap for A100-40GB" in first
    assert "prices.<gpu model>.spot_cap_share" in first and "0.01 per spot GPU-hour" in first
