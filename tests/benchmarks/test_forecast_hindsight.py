"""The hindsight bound (diagnostic): least absolute deviations over the simplex."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.forecast_hindsight import hindsight_mase, lad_simplex
from forecasting.types import QCOLS


def test_lad_simplex_recovers_an_exact_convex_mix_and_beats_every_member():
    rng = np.random.default_rng(0)
    X = rng.normal(10, 3, (500, 3))
    y = X @ np.array([0.3, 0.7, 0.0])
    w = lad_simplex(X, y)
    np.testing.assert_allclose(w, [0.3, 0.7, 0.0], atol=1e-6)
    y2 = y + rng.normal(0, 1, len(y))
    mae = np.abs(y2 - X @ lad_simplex(X, y2)).mean()
    assert all(mae <= np.abs(y2 - X[:, j]).mean() for j in range(3))


def test_hindsight_mase_is_never_worse_than_the_best_model_per_band():
    idx = pd.date_range("2024-01-01", periods=288 * 3, freq="5min", tz="UTC")
    rng = np.random.default_rng(1)
    actual = pd.Series(np.round(50 + 10 * np.sin(np.arange(len(idx)) * 2 * np.pi / 288) + rng.normal(0, 2, len(idx))),
                       index=idx)
    origins = idx[288:-12:12]
    frames = {}
    for name, shift in (("a", 3.0), ("b", -3.0)):
        rows = []
        for o in origins:
            ts = idx[(idx > o) & (idx <= o + pd.Timedelta("1h"))]
            v = actual.reindex(ts).to_numpy() + shift
            rows.append(pd.DataFrame({"series_id": "s", "tier": name, "issued_at": o, "timestamp": ts,
                                      **{c: v for c in QCOLS}}))
        frames[name] = pd.concat(rows, ignore_index=True)
    got = hindsight_mase(frames, actual, 1.0, (idx[288], idx[-1]))
    assert set(got) == {"1h"}
    assert got["1h"] == pytest.approx(0.0, abs=1e-6)  # the even mix of +3 and -3 is exact
