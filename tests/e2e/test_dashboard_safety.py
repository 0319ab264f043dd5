"""The dashboard's safety: the New-run config box offers only the dashboard's configs, errors never
show file content, no temporary run folder is left behind, pages open on the series with the most
at stake, and scores on too few points are marked. Same AppTest style as tests/e2e/test_dashboard.py,
on its session fixture run."""

from __future__ import annotations

import json
import shutil
import tempfile
import time

import pytest

from capplan.errors import InputError
from tests.conftest import run_cli
from tests.e2e.test_dashboard import PAGES, ROOT, SERIES, _app, _ok, fixture_run, store_env  # noqa: F401

SHADOW = "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def test_config_box_offers_only_the_dashboards_configs(store_env, tmp_path, monkeypatch):
    cdir = tmp_path / "configs"
    cdir.mkdir()
    (cdir / "a.yaml").write_text("plan: {n_calls: 5}\n")
    (cdir / "notes.txt").write_text("not a config\n")
    monkeypatch.setenv("CAPPLAN_CONFIG_DIR", str(cdir))
    at = _app(ROOT / "dashboards" / "app.py").run()
    _ok(at)
    at.sidebar.radio(key="newrun_source").set_value("config").run()
    _ok(at)
    assert not at.sidebar.text_input  # no free-form server path
    assert at.sidebar.selectbox(key="newrun_config").options == [str((cdir / "a.yaml").resolve())]


@pytest.mark.parametrize("path", ["/etc/shadow", "shadow", "missing.yaml"])
def test_start_job_refuses_other_paths_without_echo(store_env, tmp_path, monkeypatch, path):
    from dashboards import jobs

    (tmp_path / "shadow").write_text(SHADOW)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAPPLAN_CONFIG_DIR", raising=False)
    with pytest.raises(InputError) as ei:
        jobs.start_job("config", path, [], 4, quick=True)
    msg = str(ei.value)
    assert "not one this dashboard offers" in msg and "root" not in msg and "not found" not in msg


def test_cli_config_error_never_echoes_content(tmp_path, capsys):
    p = tmp_path / "shadow"
    p.write_text(SHADOW)
    code, _, err = run_cli(["plan", "--config", str(p), "-q"], capsys)
    assert code == 2 and str(p) in err and "unknown key at line 1" in err
    rest = err.replace(str(p), "")
    assert "root" not in rest and "saltsalt" not in rest and "daemon" not in rest


def test_failed_run_leaves_no_temporary_folder(store_env, tmp_path, monkeypatch):
    from dashboards import jobs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    orphan = tmp_path / f"{jobs.WORK_PREFIX}999999999-old"  # of a dashboard server that is gone
    orphan.mkdir()
    assert jobs.clean_orphans(str(tmp_path)) == [orphan] and not orphan.exists()
    job = jobs.start_job("sample", None, ["train/no-such-series"], 4, quick=True)
    assert "--no-publish" in job.args
    job.proc.wait(300)
    t_end = time.monotonic() + 30
    while job.final_tail is None and time.monotonic() < t_end:
        time.sleep(0.1)
    assert job.rc == 2 and "train/no-such-series" in job.tail()
    assert not list(tmp_path.glob(f"{jobs.WORK_PREFIX}*"))
    jobs._registry().clear()


def test_pages_open_on_the_series_with_most_at_stake(store_env):
    from capplan.report.model import Report
    from dashboards.common import most_at_stake

    rep = store_env["report"]
    top = max(SERIES, key=lambda s: rep["series"][s]["recommended"]["cost_usd"])
    assert most_at_stake(Report.model_validate(rep)) == top
    for page, key in (("forecasts.py", "fc_series"), ("plan.py", "plan_series"), ("whatif.py", "wi_series")):
        at = _app(PAGES / page).run()
        _ok(at)
        assert at.selectbox(key=key).value == top, page


def test_scores_on_too_few_points_are_marked(fixture_run, tmp_path, monkeypatch):
    from capplan.report.model import Report
    from dashboards.common import MIN_SCORE_POINTS, most_at_stake

    store = tmp_path / "store"
    shutil.copytree(fixture_run["store"], store)
    run_dir = store / "runs" / fixture_run["run_id"]
    doc = json.loads((run_dir / "report.json").read_text())
    sid = most_at_stake(Report.model_validate(doc))
    for model in doc["series"][sid]["backtest"].values():
        for b in model.get("bands", {}).values():
            b["n"] = 3
    (run_dir / "report.json").write_text(json.dumps(doc))
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    at = _app(PAGES / "forecasts.py").run()
    _ok(at)
    table = next(d.value for d in at.dataframe if "note" in d.value.columns)  # the backtest table
    assert len(table) and (table["note"] == f"too few points (< {MIN_SCORE_POINTS})").all()
    assert any("fewer than 24 points" in w.value for w in at.warning)
    assert not any("Lowest MASE" in c.value for c in at.caption)


def test_a_report_of_another_version_shows_an_error_not_a_traceback(fixture_run, tmp_path, monkeypatch):
    store = tmp_path / "store"
    shutil.copytree(fixture_run["store"], store)
    run_dir = store / "runs" / fixture_run["run_id"]
    doc = json.loads((run_dir / "report.json").read_text())
    for s in doc["series"].values():
        del s["recommended"]  # e.g. a report.json written before a field existed
    (run_dir / "report.json").write_text(json.dumps(doc))
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    at = _app(PAGES / "plan.py").run()
    _ok(at)
    assert any("not a report of this capplan version" in e.value and "capplan plan" in e.value for e in at.error)
