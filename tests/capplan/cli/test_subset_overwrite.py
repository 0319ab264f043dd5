"""No silent overwrite: a `plan --series` run refuses (exit 2, before any work) to replace an --out
folder that holds a plan of series it leaves out, naming the folder and the two ways on (--out OTHER,
--force); a run of every series, a run of the same or more series, and --force go ahead."""

from __future__ import annotations

import json

import pytest

from capplan.cli.commands.output import check_subset_overwrite
from capplan.errors import InputError
from tests.conftest import run_cli

FLEET = ["train/vc6YE", "train/vcJLV", "infer/azure-llm-conv"]


def _previous(out, series=FLEET):
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"run": {"run_id": "r-full", "files": ["report.json"]},
                                                 "series": {s: {} for s in series}}))
    return out


def test_a_subset_run_refuses_to_replace_a_fuller_plan_before_any_work(tmp_path, capsys):
    out = _previous(tmp_path / "capplan-out")
    before = (out / "report.json").read_text()
    code, stdout, err = run_cli(["plan", "--series", "infer/azure-llm-conv", "--out", str(out), "-q"], capsys)
    assert code == 2 and stdout == ""
    line = err.strip()
    assert len(line.splitlines()) == 1, err
    assert f"--out {out}: holds a plan of 3 series (run r-full)" in line
    assert "train/vc6YE, train/vcJLV" in line and "--out OTHER" in line and "--force" in line
    assert (out / "report.json").read_text() == before  # left as it was


def test_what_goes_ahead(tmp_path):
    out = _previous(tmp_path / "out")
    for ids, force in [(None, False), (FLEET, False), (FLEET + ["train/vcMod"], False), (["train/vc6YE"], True)]:
        check_subset_overwrite(out, ids, force)  # every series, the same or more, or --force
        check_subset_overwrite(tmp_path / "new", ids, force)  # nothing there: nothing to lose
    with pytest.raises(InputError, match=r"without train/vcJLV, infer/azure-llm-conv; .*--force"):
        check_subset_overwrite(out, ["train/vc6YE"], False)


def test_force_is_offered_in_plan_help(capsys):
    code, out, _ = run_cli(["plan", "--help"], capsys)
    assert code == 0 and "--force" in out
