"""The benchmarks' shared stage helpers (benchmarks/common.py) and the modules built on them
(benchmarks/predictive.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks import common, predictive
from capplan.config.settings import CapplanConfig
from capplan.run import pipeline
from capplan.run.state import PlanState, Prepared
from capplan.sources import LoadedHistory
from forecasting.types import SeriesMeta


def _first(state: PlanState) -> None:
    state.run_notes.append("first")


def _second(state: PlanState) -> None:
    state.run_notes.append("second")


def _broken(state: PlanState) -> None:
    raise RuntimeError("stage failed")


def test_stage_meter_times_each_stage_under_its_own_name_and_restores_the_list():
    stages = [_first, _second]
    with common.stage_meter(stages) as rows:
        assert [s.__name__ for s in stages] == ["_first", "_second"] and stages[0] is not _first
        state = pipeline.run(stages, PlanState(CapplanConfig()))
    assert stages == [_first, _second]
    assert state.run_notes == ["first", "second"]
    assert list(rows) == ["_first", "_second"] == list(state.timings)  # run.stage_seconds keeps its names
    for v in rows.values():
        assert v["s"] >= 0 and v["peak_mib"] >= common.peak_rss_mib() * 0.5 > 0


def test_stage_meter_restores_the_list_when_a_stage_raises():
    stages = [_first, _broken]
    with pytest.raises(RuntimeError, match="stage failed"), common.stage_meter(stages):
        pipeline.run(stages, PlanState(CapplanConfig()))
    assert stages == [_first, _broken]


def test_stage_meter_wraps_the_plan_list_in_place():
    original = list(pipeline.PLAN)
    with common.stage_meter(pipeline.PLAN, children=True):
        assert [s.__name__ for s in pipeline.PLAN] == [s.__name__ for s in original]
        assert all(a is not b for a, b in zip(pipeline.PLAN, original))
    assert pipeline.PLAN == original


def _history(sid: str, days: int = 24) -> LoadedHistory:
    ts = pd.date_range("2024-01-01", periods=days * 288, freq="5min", tz="UTC")
    rng = np.random.default_rng(0)
    value = np.round(40 + 20 * np.sin(np.arange(len(ts)) * 2 * np.pi / 288) + rng.normal(0, 2, len(ts)))
    frame = pd.DataFrame({"series_id": sid, "timestamp": ts, "value": value.astype(float)})
    return LoadedHistory(frame, {sid: SeriesMeta(kind="training", unit="gpu")}, [], label="synthetic")


def test_prepared_state_is_the_load_stage_on_a_history_in_memory():
    loaded = _history("train/synthetic")
    state = common.prepared_state(CapplanConfig(), loaded, seed=3)
    assert state.loaded is loaded and state.seed == 3
    assert list(state.prep.windows) == ["train/synthetic"]
    w = state.prep.windows["train/synthetic"]
    assert w.tune_start < w.eval_start < w.end
    assert set(state.prep.h5["series_id"]) == {"train/synthetic"} and len(state.prep.h1) == 24 * 24


def test_with_forecasts_from_a_folder_names_the_series_it_lacks(tmp_path):
    cols = {"series_id": ["a"], "tier": ["combined"], "issued_at": [pd.Timestamp("2024-01-01", tz="UTC")],
            "timestamp": [pd.Timestamp("2024-01-01 00:05", tz="UTC")], "p50": [1.0], "p90": [2.0], "p95": [2.0],
            "p99": [3.0]}
    pd.DataFrame(cols).to_parquet(tmp_path / "backtest.parquet")
    empty = pd.DataFrame(columns=["series_id", "timestamp", "value"])
    state = PlanState(CapplanConfig(), prep=Prepared(empty, empty, {}, {"a": None, "b": None}, None))
    with pytest.raises(SystemExit, match="no forecasts for b; plan them first"):
        common.with_forecasts(state, tmp_path)
    state.prep = Prepared(empty, empty, {}, {"a": None}, None)
    assert common.with_forecasts(state, tmp_path) is state
    assert list(state.fc.rolling) == ["combined"] and state.fc.rolling["combined"]["series_id"].tolist() == ["a"]


def test_predictive_refuses_a_folder_that_is_not_a_plan(tmp_path):
    with pytest.raises(SystemExit, match="no report.json; pass a capplan plan output folder"):
        predictive.main(["--forecasts", str(tmp_path)])
