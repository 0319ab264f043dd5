"""The combination's guarantee (forecasting.combining.weights.guard): naive before any evidence, never more
than the margin behind its best member on the evidence, and members that never earned weight cannot move it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.combining import weights as combination
from tests.forecasting.combining.test_weights import actual_series, naive, rolling, seasonal


def _cycle(seed=1, days=12):
    rng = np.random.default_rng(seed)
    t = np.arange(288 * days)
    return actual_series(np.round(40 + 30 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 1, len(t))))


def _p50(frame: pd.DataFrame) -> pd.Series:
    return frame.set_index(["issued_at", "timestamp"])["p50"]


def test_one_good_member_among_bad_ones_the_combination_ends_within_the_margin_of_the_good_one():
    """A weighting that learns nothing (eta 0: the prior forever, 70 % of the mass on members that are
    far off) is still brought within the margin of the one good member once evidence exists."""
    a = _cycle()
    frames = {"naive": rolling(a, naive, name="naive"), "seasonal_naive": rolling(a, seasonal, name="seasonal_naive"),
              "high": rolling(a, lambda y, o, k: seasonal(y, o, k) + 25.0, name="high"),
              "low": rolling(a, lambda y, o, k: seasonal(y, o, k) - 25.0, name="low")}
    c, _ = combination.combine_online(frames, a, "s", eta=0.0)
    c_off, _ = combination.combine_online(frames, a, "s", eta=0.0, margin=np.inf)  # the same weighting, unguarded
    late = (c["issued_at"] >= a.index[0] + pd.Timedelta("6D")).to_numpy()
    key = list(zip(c["issued_at"][late], c["timestamp"][late]))
    y = a.reindex(c["timestamp"][late]).to_numpy()

    def mae(p):
        return float(np.mean(np.abs(y - p)))

    comb = mae(c["p50"].to_numpy()[late])
    members = {m: mae(_p50(f).loc[key].to_numpy()) for m, f in frames.items()}
    best = min(members, key=members.get)
    assert best == "seasonal_naive", members
    assert comb <= 1.10 * members[best], (comb, members)
    assert mae(c_off["p50"].to_numpy()[late]) > 1.5 * members[best]  # without the guard it is far behind


def test_with_no_evidence_the_combination_is_naive():
    a = _cycle(days=6)
    frames = {"naive": rolling(a, naive, name="naive"), "seasonal_naive": rolling(a, seasonal, name="seasonal_naive"),
              "high": rolling(a, lambda y, o, k: seasonal(y, o, k) + 25.0, name="high")}
    c, _ = combination.combine_online(frames, a, "s")
    first = c[c["issued_at"] == c["issued_at"].min()]
    key = list(zip(first["issued_at"], first["timestamp"]))
    np.testing.assert_allclose(first["p50"].to_numpy(), _p50(frames["naive"]).loc[key].to_numpy())
    spec = combination.learn_combination(frames, a, at=a.index[200])  # before any forecast target
    for bucket in spec["24h"].values():
        assert bucket["p50"]["weights"]["naive"] == 1.0 and bucket["p50"]["fallback"] == "naive"
        assert bucket["p50"]["evidence_days"] == 0


def test_a_member_that_never_earned_weight_does_not_move_a_near_idle_series():
    """A near-idle pool (flat at 2 GPUs): naive is exact, a noisy member (the LSTM's role) must leave the
    combined p50 at naive once evidence exists."""
    rng = np.random.default_rng(3)
    a = actual_series(np.full(288 * 8, 2.0))
    noisy = rolling(a, lambda y, o, k: naive(y, o, k) + rng.normal(0, 0.5, (k, 1)), name="daily")
    frames = {"naive": rolling(a, naive, name="naive"), "daily": noisy}
    c, _ = combination.combine_online(frames, a, "s")
    late = c[c["issued_at"] >= a.index[0] + pd.Timedelta("3D")]
    assert len(late) > 0
    np.testing.assert_allclose(late["p50"].to_numpy(), 2.0)
    spec = combination.learn_combination(frames, a)
    assert all(b["p50"]["weights"]["naive"] == 1.0 for band in spec.values() for b in band.values())


def test_the_guard_keeps_a_mixture_that_is_within_the_margin():
    names = ["naive", "a", "b"]
    w = np.full((3, 1), 1 / 3)
    loss = np.array([[1.0], [0.9], [1.2]])
    kept, fell = combination.guard(w, loss, np.array([0.94]), 2.0, names, margin=0.05)
    np.testing.assert_allclose(kept, w)
    assert fell == [None]
    moved, fell = combination.guard(w, loss, np.array([0.96]), 2.0, names, margin=0.05)
    np.testing.assert_allclose(moved[:, 0], [0.0, 1.0, 0.0])
    assert fell == ["a"]
