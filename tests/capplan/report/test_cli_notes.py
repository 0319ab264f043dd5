"""The operator's view of `capplan plan`: grouped notes, the purchase mix, csv columns,
whole-word help at 80 columns, risk notes, the store line and one file count."""

from __future__ import annotations

import copy
import csv
import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from capplan.cli.commands.plan import csv_rows, print_report
from capplan.config.quick import QUICK, apply_quick
from capplan.config.settings import CapplanConfig
from capplan.report.model import Report
from capplan.report.notes import fold_informational, group_notes
from capplan.report.risk import risk_warnings
from capplan.report.summary import fleet_summary
from capplan.report.validation import checked_file_count
from capplan.run.stages.load import store_location
from tests.capplan.cli.test_cli_output import report

POOLS = [f"train/pool{i:02d}" for i in range(12)]
SHARED = "regularise: 311 points of a cluster-wide all-zero outage marked missing"


def twelve_pools() -> dict:
    """A report of 12 training pools that share one fallback, each with a note of its own,
    and one inference service with a warning and a policy note."""
    rep = report()
    base = rep["series"]["train/a-very-long-team-pool-name"]
    series = {}
    for i, sid in enumerate(POOLS):
        e = copy.deepcopy(base)
        e["fallbacks"] = [f"{sid}: {SHARED}", f"tuning: {i + 2} policies scored the same objective"]
        e["warnings"] = []
        series[sid] = e
    series["infer/llm-chat"] = rep["series"]["infer/llm-chat"]
    series["infer/llm-chat"]["fallbacks"] = ["policy: the naive_conformal policy beat the searched policy"]
    rep["series"] = series
    return rep


def rendered(rep: dict, width: int = 1000, verbose: bool = False) -> str:
    c = Console(width=width, record=True, color_system=None, file=io.StringIO())
    print_report(Report.model_validate(rep), c, verbose, rep)
    return c.export_text()


def test_a_note_shared_by_twelve_pools_prints_once_naming_them():
    text = rendered(twelve_pools())
    lines = [line for line in text.splitlines() if SHARED in line]
    assert len(lines) == 1
    assert lines[0].strip().startswith("12 pools (") and all(p in lines[0] for p in POOLS)
    # act on first, then which policy the manifests carry, then information
    act, policy, info = (text.index(h) for h in ("Act on", "Which policy the manifests carry", "For information"))
    assert act < policy < info
    assert text.index("KEDA serverAddress is a placeholder") < policy


def test_a_rival_kept_out_by_the_noise_margin_is_information_not_which_policy():
    from capplan.report.notes import rank
    from optimizer.rivals.judge import SEARCHED_KEPT

    kept = ("policy: the empirical policy was cheaper on the tuning window (objective 1.00 vs 2.00 USD) by less "
            f"than the days' noise (3.00; optimizer.rivals.judge), {SEARCHED_KEPT}")
    won = "policy: the naive_conformal policy beat the searched policy on the tuning window, so it is recommended"
    assert rank(kept, False) == 2 and rank(won, False) == 1 and rank(kept, True) == 0


def test_verbose_prints_every_note_per_series():
    rep = twelve_pools()
    text = rendered(rep, verbose=True)
    assert sum(SHARED in line for line in text.splitlines()) == 12
    for sid in POOLS:
        assert f"{sid}: {SHARED}" in text
    folded = rendered(rep)  # by default the single-series notes fold into lines that point at --verbose
    assert "--verbose lists every note per series" in folded
    assert len([line for line in folded.splitlines() if line.startswith("  ")]) <= 15


def test_backtest_and_plan_twins_fold_and_budget_is_kept():
    rows = [("s1", "backtest: daily: 1 hours of context < 168 needed", False),
            ("s1", "plan: daily: 1 hours of context < 168 needed", False)]
    notes = group_notes(rows)
    assert [n.text for n in notes] == ["backtest and plan: daily: 1 hours of context < 168 needed"]
    many = group_notes([(f"s{i}", f"tuning: note {i}-{j}", False) for i in range(5) for j in range(i + 1)] +
                       [("s9", "export: above its quota", True)])
    kept, folded = fold_informational(many, 4)
    assert folded and len(kept) <= 4 and kept[0].text == "export: above its quota"


def test_mix_is_shown_in_the_table_and_csv_and_absent_says_not_recorded():
    rep = report()
    mix = {"reserved": {"gpu_hours": 100.0, "cost_usd": 150.0}, "spot": {"gpu_hours": 300.0, "cost_usd": 90.0},
           "on_demand": {"gpu_hours": 100.0, "cost_usd": 60.0}}
    rep["series"]["train/a-very-long-team-pool-name"]["recommended"]["mix"] = mix
    rep["summary"] = {**fleet_summary(rep).model_dump(), "mix": mix}
    text = rendered(rep)
    assert "20/60/20" in text  # reserved/spot/on-demand percent of GPU-hours
    assert "share of GPU-hours / of USD: reserved 20 % / 50 %" in text
    assert "spot 60 % / 30 %" in text and "on demand 20 % / 20 %" in text
    rows = csv_rows(Report.model_validate(rep), rep)
    rec = next(r for r in rows if r["policy"] == "recommended" and r["kind"] == "training")
    assert rec["mix_recorded"] is True and rec["spot_share_gpu_hours"] == 0.6 and rec["reserved_share_cost_usd"] == 0.5
    other = next(r for r in rows if r["policy"] == "baseline")
    assert other["mix_recorded"] is False and other["spot_share_gpu_hours"] is None
    assert "mix not recorded" in rendered(report())


def test_csv_has_rounded_numbers_saving_and_regret(tmp_path, monkeypatch, capsys):
    from tests.capplan.cli.test_cli_output import _cli

    rep = report()
    rep["series"]["train/a-very-long-team-pool-name"]["recommended"]["coverage"] = 0.981234567
    rep["summary"] = fleet_summary(rep).model_dump()
    monkeypatch.setattr("capplan.cli.commands.plan.run_plan", lambda *a, **k: Report.model_validate(rep))
    f = tmp_path / "plan.csv"
    code, _, _ = _cli(["plan", "--out", str(tmp_path / "o"), "-q", "--format", "csv", "--output", str(f)], capsys)
    assert code == 0
    rows = list(csv.DictReader(f.open()))
    assert {"saving_usd", "saving_ratio", "regret", "mix_recorded", "recommendation"} <= set(rows[0])
    rec = next(r for r in rows if r["series_id"].startswith("train/") and r["policy"] == "recommended")
    base = rep["series"]["train/a-very-long-team-pool-name"]["baseline"]["cost_usd"]
    cost = rep["series"]["train/a-very-long-team-pool-name"]["recommended"]["cost_usd"]
    assert float(rec["saving_usd"]) == round(base - cost, 2)
    assert float(rec["saving_ratio"]) == round((base - cost) / base, 4)
    assert rec["regret"] == "1.37" and rec["coverage"] == "0.9812"
    for r in rows:  # no raw float: at most 4 decimals anywhere
        for v in r.values():
            assert not re.fullmatch(r"-?\d+\.\d{5,}", v), (r["policy"], v)


COMMANDS = ["", "plan", "backtest", "ingest", "export", "dashboard", "discover", "serve"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_at_80_columns_wraps_whole_words(cmd, capsys, monkeypatch):
    from tests.capplan.cli.test_cli_output import _cli

    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = _cli(([cmd] if cmd else []) + ["--help"], capsys)
    assert code == 0 and out.strip()
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    if cmd == "plan":  # long tokens stay whole; sentences are not broken at the source's line ends
        flat = " ".join(out.split())
        assert "timestamp,series_id,value[,kind,unit])" in flat
        assert "next to the rules of thumb" in flat
        assert re.search(r"--quick\s+A first look", out)


@pytest.mark.parametrize("cmd", ["plan", "export"])
def test_wide_help_keeps_rich_panels_without_cuts(cmd, capsys, monkeypatch):
    from tests.capplan.cli.test_cli_output import _cli

    monkeypatch.setenv("COLUMNS", "140")
    code, out, _ = _cli([cmd, "--help"], capsys)
    assert code == 0 and "╭─ Options" in out and "…" not in out


def test_risk_rules_flag_aggressive_autoscaler_settings():
    plan = {"min_replicas": 1, "max_replicas": 250, "target_utilization": 0.95}
    params = {"family": "hpa", "scale_down_window_s": 0}
    w = risk_warnings("inference", plan, params)
    assert len(w) == 3 and all(x.startswith("risk:") for x in w)
    assert "minReplicas 1" in w[0] and "95 % utilisation target" in w[1] and "stabilizationWindowSeconds 0" in w[2]
    safe = risk_warnings("inference", {"min_replicas": 2, "target_utilization": 0.7},
                         {"family": "hpa", "scale_down_window_s": 300})
    assert safe == []
    assert risk_warnings("training", {"reserved_gpus": 0, "on_demand_gpus": 0, "spot_gpus": 40})
    assert not risk_warnings("training", {"reserved_gpus": 30, "on_demand_gpus": 0, "spot_gpus": 10})
    rep = report()
    rep["series"]["infer/llm-chat"]["warnings"] = w
    assert "risk: a 95 % utilisation target" in rendered(rep)  # shown without --verbose


def test_quick_preset_caps_the_search_and_epochs():
    cfg = apply_quick(CapplanConfig())
    assert cfg.plan.quick and cfg.plan.random_search is False
    for section, fields in QUICK.items():
        for name, most in fields.items():
            assert getattr(getattr(cfg, section), name) == most
    small = CapplanConfig()
    small.forecast.lstm_epochs = 1
    assert apply_quick(small).forecast.lstm_epochs == 1  # a smaller configured value is kept


def test_store_location_says_when_a_config_moves_the_store(tmp_path):
    from capplan.config.settings import load_config

    d = tmp_path / "elsewhere"
    d.mkdir()
    f = d / "capplan.yaml"
    f.write_text("plan:\n  n_calls: 8\n")
    cfg = load_config(f)
    lines = store_location(cfg, f, cwd=tmp_path)
    assert lines[0] == f"store: {d / '.capplan/store'}; models: {d / 'models'}"
    assert any("does not set `store:`" in line and str(tmp_path / ".capplan/store") in line for line in lines)
    f.write_text(f"store: {tmp_path / 'shared'}\nmodels: {tmp_path / 'm'}\n")
    assert store_location(load_config(f), f, cwd=tmp_path) == [
        f"store: {tmp_path / 'shared'}; models: {tmp_path / 'm'}"]


def test_store_option_overrides_the_config_and_is_the_store_the_run_uses(tmp_path, monkeypatch, capsys):
    from tests.capplan.cli.test_cli_output import _cli

    seen = {}

    def fake_run_plan(source, cfg, out, **kw):
        seen["cfg"], seen["store"] = cfg.store, kw["store"].root
        return Report.model_validate(report())

    monkeypatch.setattr("capplan.cli.commands.plan.run_plan", fake_run_plan)
    monkeypatch.chdir(tmp_path)
    cfgf = tmp_path / "capplan.yaml"
    cfgf.write_text(f"store: {tmp_path / 'from-config'}\n")
    code, _, errout = _cli(["plan", "--config", str(cfgf), "--out", str(tmp_path / "o"), "--store", "mine",
                            "--format", "json", "--output", str(tmp_path / "r.json")], capsys)
    assert code == 0
    assert seen["cfg"] == str(tmp_path / "mine") and Path(seen["store"]) == tmp_path / "mine"
    assert f"store: {tmp_path / 'mine'};" in errout
    (tmp_path / "afile").write_text("x")
    code, _, errout = _cli(["plan", "--out", str(tmp_path / "o2"), "--store", "afile"], capsys)
    assert code == 2 and "--store afile" in errout and "is a file" in errout


def test_one_file_count_for_plan_output_and_export_validate(tmp_path, capsys):
    from tests.capplan.cli.test_cli_output import _cli

    (tmp_path / "manifests").mkdir()
    for name in ("manifests/a.yaml", "manifests/b.yml", "report.json", "policy.yaml", "forecasts.parquet"):
        (tmp_path / name).write_text("{}\n")
    assert checked_file_count(tmp_path) == 4
    _, _, err = _cli(["export", "--validate", str(tmp_path)], capsys)
    assert re.search(r"in 4 file\(s\)", err)


def test_narrow_table_drops_columns_in_the_documented_order():
    from capplan.cli.commands.plan import table_rows
    from capplan.cli.table import fit_columns

    rep = report()
    rep["series"]["infer/llm-chat"]["recommended"]["mix"] = {"on_demand": {"gpu_hours": 5.0, "cost_usd": 9.0}}
    cols, rows = table_rows(Report.model_validate(rep), rep)
    seen: list[str] = []
    for width in range(200, 30, -1):
        kept = fit_columns(cols, rows, width)
        seen += [cols[i].header for i in range(len(cols)) if i not in kept and cols[i].header not in seen]
    assert seen == ["mix % R/S/D", "regret", "kind", "unmet", "idle ratio", "saving"]  # docs/cli-output.md


def test_a_note_shared_by_thousands_of_series_names_twenty_and_counts_the_rest():
    from capplan.report.notes import NAMED, Note

    ids = [f"train/s{i:04d}" for i in range(2006)]
    line = Note("regularise: too short", ids).line({s: "training" for s in ids})
    assert line.startswith("2006 pools (train/s0000, ") and f"and {2006 - NAMED} more)" in line
    assert "train/s0020" not in line and len(line) < 400
