"""The fleet step's outputs for the export stage: the Kueue quota of the recommended plan (teams per series or
per namespace, nominal quotas within each flavor's capacity) and fleet.parquet's hourly frame, whose served
GPU-hours per model equal the report's placements."""

from __future__ import annotations

import numpy as np
import pytest

from capplan.config.settings import CapplanConfig
from capplan.errors import InputError
from capplan.run.stages.fleet import fleet_outputs, teams_of
from forecasting.types import SeriesMeta
from optimizer.exporters.names import assign_names
from tests.capplan.run.test_fleet_stage import _state

META = {"train/a": SeriesMeta(kind="training", gpu_model="A100-40GB"),
        "train/b": SeriesMeta(kind="training", gpu_model="A100-80GB"),
        "train/c": SeriesMeta(kind="training", gpu_model="A100-80GB")}


def test_quota_and_hourly_frame_of_a_fleet():
    cfg = CapplanConfig.model_validate({
        "series": [{"id": "train/a", "gpu_models": ["A100-40GB", "A100-80GB"]},
                   {"id": "train/b", "min_gpu_memory_gb": 80, "gpu_models": ["A100-80GB", "H100-80GB"]},
                   {"id": "train/c", "min_gpu_memory_gb": 80}],
        "export": {"targets": {"train/b": {"namespace": "team-ml"}, "train/c": {"namespace": "team-ml"}}},
        "fleet": {"name": "Research Fleet"}})
    out = fleet_outputs(_state(cfg, dict(META)))
    q, rep, hourly = out.quota, out.report, out.hourly
    assert q.cohort.startswith("research-fleet-")  # an RFC 1123 label (optimizer.exporters.names.k8s_name)
    own = assign_names(list(META))["train/a"]  # a team of its own is named as the series' other manifests
    assert set(q.teams) == {"team-ml", own} and q.teams["team-ml"].series == ["train/b", "train/c"]
    assert q.teams["team-ml"].namespace == "team-ml" and q.teams[own].namespace == "default"
    assert set(q.teams["team-ml"].models) <= {"A100-80GB", "H100-80GB", "H200-141GB"}  # never below 80 GB
    for m, f in q.models.items():
        held = sum(t.models[m].nominal for t in q.teams.values() if m in t.models)
        assert held <= f.capacity_gpus
        assert f.capacity_gpus == int(hourly.loc[hourly["gpu_model"] == m, "capacity_gpus"].max())
        assert f.mix == {k: v.model_dump() for k, v in rep.mix[m].items()}
        for t in q.teams.values():
            if m in t.models:
                mq = t.models[m]
                assert mq.lending_limit <= mq.nominal and mq.nominal + mq.borrowing_limit <= f.capacity_gpus
    assert list(hourly.columns) == ["timestamp", "gpu_model", "capacity_gpus", "reserved_gpus", "spot_gpus",
                                    "on_demand_gpus", "demand_gpus"]
    assert str(hourly["timestamp"].dt.tz) == "UTC" and len(hourly) == rep.hours * hourly["gpu_model"].nunique()
    assert hourly["timestamp"].max().isoformat() == rep.evaluation_window[1]
    served = hourly.groupby("gpu_model")["demand_gpus"].sum()
    placed = {m: sum(s.placement.get(m, 0.0) for s in rep.series.values()) for m in served.index}
    assert np.allclose([served[m] for m in served.index], [placed[m] for m in served.index])
    parts = hourly[["reserved_gpus", "spot_gpus", "on_demand_gpus"]].sum(axis=1)
    assert np.allclose(parts, hourly["capacity_gpus"])


def test_no_fleet_no_outputs():
    assert fleet_outputs(_state(CapplanConfig(), dict(META))) is None


def test_a_namespace_named_as_a_series_team_is_an_input_error():
    taken = assign_names(["train/a"])["train/a"]
    cfg = CapplanConfig.model_validate({
        "series": [{"id": "train/a", "gpu_models": ["A100-40GB", "A100-80GB"]},
                   {"id": "train/b", "min_gpu_memory_gb": 80, "namespace": taken}]})
    state = _state(cfg, {k: META[k] for k in ("train/a", "train/b")})
    with pytest.raises(InputError, match=f"team '{taken}'.*train/a, train/b"):
        teams_of(state, ["train/a", "train/b"])
    assert teams_of(state, ["train/b"]) == {taken: (taken, ["train/b"])}
