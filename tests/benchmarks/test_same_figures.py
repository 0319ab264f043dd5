"""The same-figures comparison (benchmarks/same_figures.py) sees a changed figure and ignores a run's identity."""

from __future__ import annotations

import json

import pandas as pd

from benchmarks.same_figures import compare


def _folder(root, cost: float, run_id: str, replicas: int):
    root.mkdir()
    (root / "report.json").write_text(json.dumps({"run": {"run_id": run_id, "duration_s": 3.0},
                                                  "series": [{"id": "train/a", "cost_usd": cost}]}))
    pd.DataFrame({"t": [1, 2], "v": [1.0, float(replicas)]}).to_parquet(root / "replay.parquet")
    (root / "manifests").mkdir()
    (root / "manifests" / "q.yaml").write_text(f"# run id {run_id}\nspec:\n  capability: {replicas}\n")
    return root


def test_a_new_run_of_the_same_figures_is_the_same(tmp_path):
    a = _folder(tmp_path / "a", 10.5, "r1", 4)
    b = _folder(tmp_path / "b", 10.5, "r2", 4)
    assert compare(a, b) == {}


def test_a_changed_cost_parquet_cell_or_manifest_line_is_a_difference(tmp_path):
    a = _folder(tmp_path / "a", 10.5, "r1", 4)
    b = _folder(tmp_path / "b", 10.6, "r1", 5)
    diffs = compare(a, b)
    assert set(diffs) == {"report.json", "replay.parquet", "manifests/q.yaml"}
    assert "cost_usd" in diffs["report.json"][0]


def test_a_file_in_one_folder_only_is_a_difference(tmp_path):
    a = _folder(tmp_path / "a", 10.5, "r1", 4)
    b = _folder(tmp_path / "b", 10.5, "r1", 4)
    (b / "extra.yaml").write_text("x: 1\n")
    assert compare(a, b) == {"extra.yaml": ["only in new"]}
