"""Kueue quotas from a fleet plan (optimizer.fleet.quota): nominal = committed GPUs held for the team at its
peak, borrowing = its peak use beyond that, lending = nominal less its least use; the cohort's nominal quotas
never exceed a flavor's capacity; teams by namespace add their members per hour."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from optimizer.book.gpus import load_catalogue
from optimizer.book.prices import default_price_book
from optimizer.exporters import render_all
from optimizer.exporters.checks.lint import lint
from optimizer.fleet.causal import FleetPlan
from optimizer.fleet.problem import build_problem
from optimizer.fleet.quota import fleet_quota, gfd_product, held_for_series


def _problem(n: int = 2, t: int = 4):
    return build_problem([f"train/s{i}" for i in range(n)], ["training"] * n, ["A100-80GB"] * n,
                         [["A100-80GB", "H100-80GB"]] * n, [80.0] * n, np.ones((n, t)), load_catalogue(),
                         default_price_book())


def _at(problem, j, value, t):
    """(M, t) zeros but ``value`` on model row ``j``."""
    out = np.zeros((len(problem.models), t))
    out[j] = value
    return out


def _plan(problem, placed, reserved, spot, on_demand):
    m, t = len(problem.models), problem.hours
    cap = {k: np.broadcast_to(np.asarray(v, float), (m, t)).copy() for k, v in
           (("reserved", reserved), ("spot", spot), ("on_demand", on_demand))}
    return FleetPlan(capacity=cap, placed=np.asarray(placed, float), unmet=np.zeros((len(problem.series), t)),
                     coverage=np.ones(len(problem.series)), cost_usd=0.0)


def test_one_series_nominal_borrowing_and_lending_follow_the_plan():
    p = _problem(1)
    a = p.models.index("A100-80GB")
    placed = np.zeros((1, len(p.models), 4))
    placed[0, a] = [2, 5, 3, 1]  # uses 1..5 A100s; 4 bought ahead (reserved 3 + spot 1), on-demand 1 at the peak
    res = _at(p, a, 3, 1)
    spot = _at(p, a, 1, 1)
    od = _at(p, a, [0, 1, 0, 0], 4)
    q = fleet_quota(p, _plan(p, placed, res, spot, od), {"team-a": (None, ["train/s0"])}, "research")
    mq = q.teams["team-a"].models["A100-80GB"]
    assert q.models["A100-80GB"].capacity_gpus == 5  # 3 + 1 + 1 at hour 1
    assert (mq.nominal, mq.borrowing_limit, mq.lending_limit) == (4, 1, 3)  # held at peak 4; peak use 5; min use 1
    assert "H100-80GB" not in q.teams["team-a"].models  # allowed, but the plan holds none
    assert q.models["A100-80GB"].gpu_product == gfd_product("A100-80GB") == "NVIDIA-A100-SXM4-80GB"


def test_peaks_at_different_hours_share_the_capacity_and_borrow_the_rest():
    p = _problem(2)
    a = p.models.index("A100-80GB")
    placed = np.zeros((2, len(p.models), 4))
    placed[0, a] = [6, 0, 6, 0]
    placed[1, a] = [0, 6, 0, 6]  # pooled: 6 GPUs serve both, each team peaks at 6
    res = _at(p, a, 6, 1)
    plan = _plan(p, placed, res, 0.0, 0.0)
    held = held_for_series(plan)
    assert held[:, a].sum(axis=0).max() <= 6 + 1e-9
    q = fleet_quota(p, plan, {"t0": (None, ["train/s0"]), "t1": (None, ["train/s1"])}, "research")
    n = [q.teams[t].models["A100-80GB"] for t in ("t0", "t1")]
    assert sum(x.nominal for x in n) <= q.models["A100-80GB"].capacity_gpus == 6
    assert [x.nominal for x in n] == [3, 3] and [x.borrowing_limit for x in n] == [3, 3]
    assert [x.lending_limit for x in n] == [3, 3]  # each sits idle some hour: all its nominal may be lent
    files = render_all([], None, q)
    assert "manifests/a100-80gb-resourceflavor.yaml" in files and "manifests/t0-clusterqueue.yaml" in files
    assert lint([(f, yaml.safe_load(x)) for f, x in files.items() if f.startswith("manifests/")]) == []


def test_a_namespace_team_adds_its_members_per_hour_and_bad_teams_are_refused():
    p = _problem(2)
    a = p.models.index("A100-80GB")
    placed = np.zeros((2, len(p.models), 4))
    placed[0, a] = [2, 2, 0, 0]
    placed[1, a] = [0, 0, 2, 2]
    res = _at(p, a, 2, 1)
    q = fleet_quota(p, _plan(p, placed, res, 0.0, 0.0), {"team-ml": ("team-ml", ["train/s0", "train/s1"])}, "c")
    mq = q.teams["team-ml"].models["A100-80GB"]
    assert (mq.nominal, mq.borrowing_limit, mq.lending_limit) == (2, 0, 0)  # the sum is 2 every hour
    assert q.teams["team-ml"].series == ["train/s0", "train/s1"]
    with pytest.raises(ValueError, match="train/s9"):
        fleet_quota(p, _plan(p, placed, res, 0.0, 0.0), {"x": (None, ["train/s9"])}, "c")
    with pytest.raises(ValueError, match="in teams"):
        fleet_quota(p, _plan(p, placed, res, 0.0, 0.0), {"x": (None, ["train/s0"]), "y": (None, ["train/s0"])}, "c")


def test_a_team_whose_models_hold_nothing_keeps_its_own_flavor_at_zero():
    p = _problem(1)
    plan = _plan(p, np.zeros((1, len(p.models), 4)), 0.0, 0.0, 0.0)
    q = fleet_quota(p, plan, {"idle": (None, ["train/s0"])}, "c")
    assert list(q.teams["idle"].models) == ["A100-80GB"] and q.teams["idle"].models["A100-80GB"].nominal == 0
