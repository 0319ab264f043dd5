"""The Fleet page's GPU fleet section: for a run with a fleet, its figures beside each series alone and pooled,
the mix per GPU model and purchase option, the members' placements and a capacity-against-demand chart per GPU
model (from fleet.parquet); a run without one shows no such section.

The run is the synthetic report of the dashboard-notes tests with a real fleet object and fleet.parquet from the
export stage's fleet step (capplan.run.stages.fleet.fleet_outputs on a small synthetic fleet), so no plan runs."""

from __future__ import annotations

import json

import pytest

from capplan.config.settings import CapplanConfig
from capplan.report.model import Report
from capplan.run.stages.fleet import fleet_outputs
from dashboards import fleet_tables as ft
from tests.capplan.run.test_fleet_outputs import META
from tests.capplan.run.test_fleet_stage import _state
from tests.e2e.test_dashboard import PAGES, _app, _ok
from tests.e2e.test_dashboard_notes import synthetic_report, write_store

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.fixture(scope="module")
def fleet_run():
    cfg = CapplanConfig.model_validate({
        "series": [{"id": "train/a", "gpu_models": ["A100-40GB", "A100-80GB"]},
                   {"id": "train/b", "min_gpu_memory_gb": 80, "gpu_models": ["A100-80GB", "H100-80GB"]},
                   {"id": "train/c", "min_gpu_memory_gb": 80}],
        "fleet": {"name": "research"}})
    return fleet_outputs(_state(cfg, dict(META)))


def _store(tmp_path, monkeypatch, fleet=None, hourly=None):
    rep = synthetic_report()
    if fleet is not None:
        rep["fleet"] = json.loads(fleet.model_dump_json())
        Report.model_validate(rep)
    store = tmp_path / "store"
    run = write_store(store, rep)
    if hourly is not None:
        hourly.to_parquet(run / "fleet.parquet", index=False)
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    monkeypatch.delenv("CAPPLAN_CONFIG", raising=False)
    monkeypatch.delenv("CAPPLAN_CONFIG_DIR", raising=False)
    return rep


def test_tables_hold_the_report_figures(fleet_run):
    f = json.loads(fleet_run.report.model_dump_json())
    fig = ft.figures_table(f).set_index("plan")
    assert fig.iloc[2]["vs alone"] == "+0.0 %" and fig.iloc[0]["cost"] == f"${f['recommended']['cost_usd']:,.0f}"
    mix = ft.mix_table(f)
    assert set(mix["GPU model"]) == set(f["mix"])
    total = mix[(mix["purchase"] == "total")].set_index("GPU model")["USD"]
    for m, opts in f["mix"].items():
        assert total[m] == f"${sum(v['cost_usd'] for v in opts.values()):,.0f}"
    assert list(ft.series_table(f)["series"]) == sorted(f["series"])
    shown = ft.shown_models(fleet_run.hourly)
    assert shown and set(shown) <= set(fleet_run.hourly["gpu_model"])
    assert all(fleet_run.hourly.loc[fleet_run.hourly["gpu_model"] == m, "capacity_gpus"].max() > 0
               or fleet_run.hourly.loc[fleet_run.hourly["gpu_model"] == m, "demand_gpus"].max() > 0 for m in shown)


def test_fleet_page_shows_the_gpu_fleet(fleet_run, tmp_path, monkeypatch):
    _store(tmp_path, monkeypatch, fleet_run.report, fleet_run.hourly)
    at = _app(PAGES / "fleet.py").run()
    _ok(at)
    assert "GPU fleet: research" in [s.value for s in at.subheader]
    frames = {tuple(d.value.columns)[:2]: d.value for d in at.dataframe}  # by their first columns
    mix = frames[("GPU model", "purchase")]
    assert set(mix["GPU model"]) == set(fleet_run.report.mix)
    figures = frames[("plan", "cost")].set_index("plan")
    assert figures.loc["each series alone on its own model (sum)", "cost"] == \
        f"${fleet_run.report.alone.cost_usd:,.0f}"
    assert figures.loc["pooled, each series on its own model", "cost"] == f"${fleet_run.report.pooled.cost_usd:,.0f}"
    assert set(frames[("series", "own model")]["series"]) == set(fleet_run.report.series)
    charts = [e for e in at.get("plotly_chart")]
    titles = [json.loads(e.proto.spec)["layout"]["title"]["text"] for e in charts]
    for m in ft.shown_models(fleet_run.hourly):
        assert f"{m}: capacity against demand" in titles


def test_a_run_without_a_fleet_shows_no_gpu_fleet(tmp_path, monkeypatch):
    _store(tmp_path, monkeypatch)
    at = _app(PAGES / "fleet.py").run()
    _ok(at)
    assert not [s for s in at.subheader if s.value.startswith("GPU fleet")]
    assert not [d for d in at.dataframe if "GPU model" in d.value.columns]
