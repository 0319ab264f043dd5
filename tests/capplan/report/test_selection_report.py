"""The multi-week selection's line in the fleet summary (capplan.report.selection_report)."""

from __future__ import annotations

import pytest

from capplan.report.selection_report import selection_lines, selection_summary
from capplan.report.summary import fleet_summary, summary_lines


def _weeks(r1: float, r2: float, rho: float, nxt: float) -> dict:
    return {"weeks": 2, "limit_usd": [100.0, 120.0], "chosen_week_regret": [r1, r2],
            "spread": {"weeks": 2, "min": min(r1, r2), "max": max(r1, r2), "mean": (r1 + r2) / 2,
                       "range": abs(r1 - r2)},
            "walk_forward": [{"week": 2, "spearman": rho, "one_week_pick_next": nxt}]}


def _entry(weeks: dict | None) -> dict:
    m = {"cost_usd": 100.0, "coverage": 0.97, "idle_ratio": 0.1, "unmet": 0.0}
    return {"recommended": m, "baseline": {**m, "cost_usd": 120.0}, "tuning": {} if weeks is None else {"weeks": weeks}}


def test_the_summary_names_the_widest_week_to_week_spread_and_the_rank_correlation():
    series = {"train/a": _entry(_weeks(1.10, 1.15, 0.9, 1.01)), "train/b": _entry(_weeks(1.30, 1.10, 0.5, 1.09)),
              "train/c": _entry(_weeks(1.05, 1.06, 0.7, 1.02)), "infer/d": _entry(None)}
    sel = selection_summary(series)
    assert sel["series"] == 3 and sel["weeks"] == 2 and sel["widest"] == "train/b"
    assert sel["spread_range_max"] == pytest.approx(0.2) and sel["spread_range_median"] == pytest.approx(0.05)
    assert sel["spearman_median"] == pytest.approx(0.7) and sel["one_week_pick_next_median"] == pytest.approx(1.02)
    lines = summary_lines(fleet_summary({"run": {"coverage_target": 0.95}, "series": series}))
    assert any("widest 0.200, train/b" in line and "Spearman 0.70" in line for line in lines)


def test_no_line_without_a_pool_ranked_on_weeks():
    assert selection_summary({"infer/d": _entry(None)}) is None and selection_lines(None) == []
    summary = fleet_summary({"run": {"coverage_target": 0.95}, "series": {"infer/d": _entry(None)}})
    assert summary.selection is None and not any("Selection" in line for line in summary_lines(summary))
