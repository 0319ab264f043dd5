"""benchmarks/seed_forecasts.py: how far the kept forecasts move from one seed to another."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.seed_forecasts import forecast_moves, relative_move


def _frame(sid: str, tier: str, p50, p95) -> pd.DataFrame:
    t = pd.date_range("2024-01-01", periods=len(p50), freq="5min", tz="UTC")
    return pd.DataFrame({"series_id": sid, "tier": tier, "issued_at": t[0], "timestamp": t,
                         "p50": np.asarray(p50, float), "p90": np.asarray(p95, float),
                         "p95": np.asarray(p95, float), "p99": np.asarray(p95, float)})


def test_the_move_is_the_mean_absolute_difference_over_the_first_seeds_mean_level():
    a = _frame("s", "daily", [10, 10, 20, 20], [12, 12, 24, 24])
    b = _frame("s", "daily", [11, 10, 20, 19], [12, 12, 24, 24])
    out = relative_move(a, b)
    assert out["daily"]["p50"] == pytest.approx(100 * 0.5 / 15)  # |1| + |1| over 4 rows, mean level 15
    assert out["daily"]["p95"] == 0.0


def test_only_models_that_move_are_listed_with_the_largest_move_over_the_seeds(tmp_path):
    base = pd.concat([_frame("train/a", "naive", [5, 5], [6, 6]), _frame("train/a", "daily", [10, 10], [12, 12])])
    moved = pd.concat([_frame("train/a", "naive", [5, 5], [6, 6]), _frame("train/a", "daily", [11, 10], [12, 12])])
    more = pd.concat([_frame("train/a", "naive", [5, 5], [6, 6]), _frame("train/a", "daily", [12, 10], [12, 15])])
    for seed, f in enumerate([base, moved, more]):
        f.to_parquet(tmp_path / f"seed-{seed}.parquet")
    out = forecast_moves(tmp_path, [0, 1, 2], ["train/a"])
    assert list(out["tier"]) == ["daily"]  # naive never moved
    assert out["p50_pct"].iloc[0] == pytest.approx(10.0)  # seed 2: 2 over 2 rows / 10
    assert out["p95_pct"].iloc[0] == pytest.approx(12.5)  # seed 2: 3 over 2 rows / 12
