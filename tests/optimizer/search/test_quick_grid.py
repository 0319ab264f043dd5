"""optimizer/search/quick_grid.py: the coarse scan a quick run replays, and that the search uses it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizer.search.policy_search import SearchResult
from optimizer.search.quick_grid import COARSE_INFERENCE_GRID, COARSE_TRAINING_GRID, scan_grid, scan_only
from optimizer.search.settings import SearchSettings
from optimizer.search.space import INFERENCE_GRID, TRAINING_GRID, inference_space, training_space
from optimizer.search.tuning import tune_policy
from tests.optimizer.search.test_tuning import _task


def _points(space) -> set[tuple]:
    return {tuple(p) for p in space.grid_points()}


@pytest.mark.parametrize("space", [training_space(), inference_space(peak=6.0)], ids=["training", "inference"])
def test_the_coarse_grid_is_a_small_subset_of_the_full_grid(space):
    full, coarse = _points(space), _points(scan_grid(space, "coarse"))
    assert scan_grid(space, "full") is space
    assert 0 < len(coarse) <= len(full) / 5
    assert coarse <= full  # a coarse scan can only find what a full one could
    # dimensions and anchors are the full space's: the Gaussian-process search is unchanged
    assert scan_grid(space, "coarse").dims == space.dims and scan_grid(space, "coarse").anchors == space.anchors


@pytest.mark.parametrize("coarse,full", [(COARSE_TRAINING_GRID, TRAINING_GRID),
                                         (COARSE_INFERENCE_GRID, INFERENCE_GRID)],
                         ids=["training", "inference"])
def test_every_coarse_value_is_a_full_grid_value(coarse, full):
    assert set(coarse) == set(full)
    assert all(set(coarse[k]) <= set(full[k]) for k in full)


def test_the_coarse_grid_keeps_both_inference_families():
    sp = scan_grid(inference_space(peak=6.0), "coarse")
    fam = sp.names.index("family")
    assert {p[fam] for p in sp.grid_points()} == {"hpa", "lookahead"}


def test_an_unknown_grid_is_refused():
    with pytest.raises(ValueError, match="use full or coarse"):
        scan_grid(training_space(), "fine")


def test_the_search_scans_the_grid_its_settings_name():
    task = _task()
    full = tune_policy(task)
    coarse = tune_policy(replace(task, settings=task.settings.model_copy(update={"scan_grid": "coarse"})))
    assert full.tuning["grid_points"] == len(training_space().grid_points())
    assert coarse.tuning["grid_points"] == len(scan_grid(training_space(), "coarse").grid_points())
    assert coarse.tuning["grid_points"] < full.tuning["grid_points"] / 10
    assert coarse.params and full.params


def test_without_gp_refinement_the_scan_policy_is_the_tuned_one_with_no_gp_replays():
    task = _task()
    coarse = task.settings.model_copy(update={"scan_grid": "coarse"})
    refined = tune_policy(replace(task, settings=coarse))
    scan = tune_policy(replace(task, settings=coarse.model_copy(update={"gp_refine": False})))
    # no Gaussian-process trials: the scan's own best point, never a refinement
    assert refined.trials and scan.trials == []
    assert scan.tuning["refinement_kept"] is False
    assert scan.tuning["gp_objective"] == scan.tuning["anchor_objective"]
    assert scan.tuning["grid_points"] == refined.tuning["grid_points"]
    if not refined.tuning["refinement_kept"]:  # the refined search kept the scan's policy too: the same one
        assert scan.params == refined.params


def test_scan_only_needs_a_scan_policy_and_the_setting_off():
    found = SearchResult("grid", object(), 1.0, None, [])
    none = SearchResult("grid", None, float("inf"), None, [])
    off, on = SearchSettings(gp_refine=False), SearchSettings()
    assert on.gp_refine is True  # a default plan refines
    assert scan_only(off, found) and not scan_only(on, found)
    assert not scan_only(off, none)  # a space with no grid point is still searched
