"""The export stage's fleet step: members from the config and the source, the report's fleet object and
run.gpu_models (valid against schemas/report.schema.json), the CLI's fleet table; no keys, no fleet."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from capplan.cli.fleet_table import print_fleet
from capplan.config.settings import CapplanConfig
from capplan.errors import InputError
from capplan.report.model import Report, RunInfo
from capplan.run.stages.fleet import fleet_section, members
from capplan.run.state import PlanState, Prepared
from forecasting.backtest import Windows
from forecasting.types import SeriesMeta

SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "report.schema.json"


def _state(cfg: CapplanConfig, meta: dict[str, SeriesMeta], days: int = 21) -> PlanState:
    rng = np.random.default_rng(1)
    ts = pd.date_range("2024-03-01", periods=24 * days, freq="1h", tz="UTC")
    frames = []
    for k, sid in enumerate(meta):
        v = np.round(8 + 4 * k + 3 * np.sin(np.arange(len(ts)) / 24 * 2 * np.pi) + rng.normal(0, 1, len(ts)))
        frames.append(pd.DataFrame({"series_id": sid, "timestamp": ts, "value": np.maximum(v, 0)}))
    h1 = pd.concat(frames, ignore_index=True)
    w = Windows(start=ts[0], tune_start=ts[-24 * 4], eval_start=ts[-24 * 2], end=ts[-1])
    state = PlanState(cfg)
    state.prep = Prepared(h5=h1, h1=h1, meta=meta, windows={s: w for s in meta}, report=None)
    return state


META = {"train/a": SeriesMeta(kind="training", gpu_model="V100-32GB"),
        "train/b": SeriesMeta(kind="training", gpu_model="A100-80GB"),
        "infer/c": SeriesMeta(kind="inference", unit="replica", gpu_model="A10G-24GB", gpus_per_replica=1)}


def test_no_fleet_keys_no_fleet_and_the_report_is_unchanged():
    state = _state(CapplanConfig(), dict(META))
    assert members(state) == {} and fleet_section(state) is None
    doc = Report(run=RunInfo(run_id="r", seed=0, started_at="t", source="s", coverage_target=0.95,
                             n_calls=1)).model_dump()
    assert "fleet" not in doc and "gpu_models" not in doc["run"]


def test_fleet_from_config_and_source_keys_reaches_the_report_and_the_cli():
    meta = dict(META)
    meta["infer/c"] = SeriesMeta(kind="inference", unit="replica", gpu_model="A10G-24GB",
                                 gpu_models=["A10G", "L4", "T4"])  # as a CSV's columns leave it
    cfg = CapplanConfig.model_validate({
        "series": [{"id": "train/a", "gpu_models": ["V100-32GB", "A100-40GB"]},
                   {"id": "train/b", "min_gpu_memory_gb": 80}],
        "fleet": {"name": "research"}})
    state = _state(cfg, meta)
    assert set(members(state)) == {"train/a", "train/b", "infer/c"}
    fleet, models = fleet_section(state)
    assert fleet.name == "research" and fleet.hours == 48 and fleet.violations == 0
    assert fleet.recommended.cost_usd <= fleet.pooled.cost_usd + 1e-6
    assert fleet.limit.bound_usd <= fleet.limit.cost_usd <= fleet.alone.limit_usd + 1e-6
    assert set(fleet.series["train/b"].placement) <= {"A100-80GB", "H100-80GB", "H200-141GB"}
    assert set(fleet.series["infer/c"].placement) <= {"A10G", "L4", "T4"}
    assert models["A10G"]["prices"]["on_demand"] == 1.01 and models["A100-80GB"]["memory_gb"] == 80
    report = Report(run=RunInfo(run_id="r", seed=0, started_at="t", source="s", coverage_target=0.95, n_calls=1,
                                gpu_models=models), fleet=fleet)
    doc = json.loads(report.to_json())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["fleet"]["limit"]["cost_usd"] > 0 and doc["fleet"]["mix"]
    assert Report.model_validate(doc).fleet.series["train/a"].coverage == fleet.series["train/a"].coverage
    buf = io.StringIO()
    print_fleet(report.fleet, Console(file=buf, width=140))
    text = buf.getvalue()
    assert "GPU model" in text and "GPU-hours" in text and "fleet 'research'" in text
    assert any(m in text for m in fleet.mix)


def test_a_member_without_a_catalogue_model_is_an_input_error():
    meta = {"train/a": SeriesMeta(kind="training", gpu_model="default")}
    cfg = CapplanConfig.model_validate({"series": [{"id": "train/a", "min_gpu_memory_gb": 40}]})
    with pytest.raises(InputError, match="train/a.*gpu_model"):
        fleet_section(_state(cfg, meta))
