"""One set of figures per pool: where the quota binds, the headline (the table's recommended row, the
fleet summary, the missed targets) is the plan held to the quota, as the exported Volcano Queue holds it,
with what raising the quota buys beside it; every pool above its quota is named under "Act on", and the
notes under the table stay within their budget."""

from __future__ import annotations

import copy
import io

import pytest
from rich.console import Console

from capplan.cli.commands.plan import NOTE_BUDGET, csv_rows, print_report, table_rows
from capplan.report.model import Report
from capplan.report.notes import fold_informational, group_notes
from capplan.report.summary import fleet_summary, quota_note
from tests.capplan.cli.test_cli_output import metrics, report

POOL = "train/a-very-long-team-pool-name"


def _quota_report(held: bool = True, pools: int = 1) -> dict:
    rep = report()
    base = rep["series"][POOL]
    base["quota"] = {"quota_gpus": 208, "need_gpus": 369, "capped": metrics(2_000_000.0, 0.21), "held": held}
    for i in range(1, pools):
        e = copy.deepcopy(base)
        e["quota"]["need_gpus"] = 300 + i
        rep["series"][f"train/pool{i}"] = e
    return rep


def test_the_headline_is_held_to_the_quota_and_the_raise_is_beside_it():
    rep = _quota_report()
    s = fleet_summary(rep)
    uncapped = rep["series"][POOL]["recommended"]["cost_usd"]
    other = rep["series"]["infer/llm-chat"]["recommended"]["cost_usd"]
    assert s.cost_usd["recommended"] == pytest.approx(2_000_000.0 + other, abs=0.01)
    assert s.cost_usd["quota_raised"] == pytest.approx(uncapped + other, abs=0.01)
    assert s.saving_usd == pytest.approx(s.cost_usd["baseline"] - s.cost_usd["recommended"], abs=0.01)
    assert {m.series_id: m.coverage for m in s.missing_target}[POOL] == 0.21  # the held coverage misses the target
    q = s.quota[0]
    assert (q.capped_cost_usd, q.raised_cost_usd, q.raised_coverage) == (2_000_000.0, uncapped, 0.981)
    r = Report.model_validate(rep)
    assert r.series[POOL].exported().cost_usd == 2_000_000.0
    cols, rows = table_rows(r)
    labels = [row[1] for row in rows]
    i = labels.index("recommended (searched)")
    assert rows[i][0] == POOL and rows[i][3] == "2,000,000" and rows[i][4] == "21.0%"
    assert labels[i + 1] == "quota raised to 369" and rows[i + 1][3] == f"{uncapped:,.0f}"
    csv = {(row["series_id"], row["policy"]): row for row in csv_rows(r)}
    assert csv[POOL, "recommended"]["cost_usd"] == 2_000_000.0 and csv[POOL, "quota_raised"]["coverage"] == 0.981


def test_a_queue_not_held_to_the_quota_keeps_the_uncapped_plan():
    rep = _quota_report(held=False)
    s = fleet_summary(rep)
    assert "quota_raised" not in s.cost_usd and s.quota[0].held is False
    assert Report.model_validate(rep).series[POOL].exported().cost_usd == rep["series"][POOL]["recommended"]["cost_usd"]
    assert "not held to it" in quota_note(s)


def test_every_pool_above_its_quota_is_under_act_on_and_notes_keep_the_budget():
    rep = _quota_report(pools=9)
    for i, e in enumerate(rep["series"].values()):  # shared and own informational notes, as a fleet has
        e["fallbacks"] = [f"regularise: shared note {k}" for k in range(8)] + [f"tuning: own note {i}"]
    r = Report.model_validate(rep)
    r.summary = fleet_summary(r)
    c = Console(width=400, record=True, color_system=None, file=io.StringIO())
    print_report(r, c)
    text = c.export_text()
    act = text[text.index("Act on"):text.index("For information")]
    pools = [sid for sid, e in rep["series"].items() if e.get("quota")]
    assert len(pools) == 9 and all(f"{sid} 208 -> " in act for sid in pools)
    assert "quota: 9 pools are above the quota" in act
    lines = [line for line in text[text.index("Act on"):].splitlines() if line.startswith("  ")]
    assert len(lines) <= NOTE_BUDGET == 15
    assert "--verbose lists every note per series" in text


def test_folding_keeps_every_action_and_folds_the_last_shared_notes():
    rows = [(f"s{i}", f"regularise: shared {k}", False) for i in range(3) for k in range(10)]
    rows += [("s0", "export: above its quota", True), ("s1", "policy: recommended coverage low", True)]
    notes, folded = fold_informational(group_notes(rows), 5)
    assert folded and len(notes) == 5
    assert [n.rank for n in notes[:2]] == [0, 0] and notes[-1].text == "more notes (24), see --verbose"
