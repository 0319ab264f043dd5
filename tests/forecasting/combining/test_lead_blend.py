"""The combined path steps at a lead-bucket boundary only as far as its members do."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.combining.lead_blend import MAX_STEPS, blend_boundaries, boundaries
from forecasting.types import QCOLS

ORIGIN = pd.Timestamp("2024-01-07 23:55", tz="UTC")
DAY = 288  # 5-minute steps


def frame(values: np.ndarray, tier: str, width: float = 0.0) -> pd.DataFrame:
    """A forecast frame of one origin with p50 = ``values`` at leads 1..len(values) steps."""
    k = np.arange(1, len(values) + 1)
    f = pd.DataFrame({"series_id": "s", "tier": tier, "issued_at": ORIGIN,
                      "timestamp": ORIGIN + pd.to_timedelta(5 * k, unit="min")})
    for i, q in enumerate(QCOLS):
        f[q] = values + i * width
    return f


def steps_at(f: pd.DataFrame, L: int, q: str = "p50") -> float:
    return float(f[q].iloc[L] - f[q].iloc[L - 1])  # row i is lead i + 1


def test_a_step_no_member_makes_is_spread_over_the_next_half_bucket():
    # two flat members at 200 and 250; the combination weights them 0.9/0.1 for the first day
    # and 0.1/0.9 after it: a 40-GPU jump at one day ahead that neither member predicts
    n = MAX_STEPS
    a, b = np.full(n, 200.0), np.full(n, 250.0)
    w = np.where(np.arange(1, n + 1) <= DAY, 0.9, 0.1)
    comb = frame(w * a + (1 - w) * b, "combined", width=5.0)
    out = blend_boundaries(comb, {"a": frame(a, "a"), "b": frame(b, "b")})
    for q in QCOLS:
        assert abs(steps_at(out, DAY, q)) < 1e-9  # no step where the buckets meet
    L, E = next(be for be in boundaries() if be[0] == DAY)
    assert E == DAY + DAY // 2  # the next bucket is 1-2 days: its middle is 1.5 days
    path = out["p50"].to_numpy()
    assert np.all(np.diff(path[L - 1:E + 1]) >= -1e-9)  # the jump is handed back gradually ...
    assert np.max(np.abs(np.diff(path[L - 1:E + 1]))) < 40.0 / (E - L) + 1e-9
    np.testing.assert_allclose(path[E:], comb["p50"].to_numpy()[E:])  # ... and is all there from the middle on
    np.testing.assert_allclose(path[:L], comb["p50"].to_numpy()[:L])  # nothing before the boundary moves
    # the band's width does not step either
    width = (out["p95"] - out["p50"]).to_numpy()
    np.testing.assert_allclose(width, 10.0)


def test_a_step_the_members_make_is_kept_up_to_their_largest_step():
    n = MAX_STEPS
    lead = np.arange(1, n + 1)
    a = np.where(lead <= DAY, 200.0, 210.0)  # a member that steps by +10 at one day
    b = np.full(n, 250.0)
    w = np.where(lead <= DAY, 0.9, 0.1)
    comb = frame(w * a + (1 - w) * b, "combined")
    out = blend_boundaries(comb, {"a": frame(a, "a"), "b": frame(b, "b")})
    assert abs(steps_at(out, DAY) - 10.0) < 1e-9
    # a combined step smaller than the members' largest is not touched
    comb2 = frame(np.where(lead <= DAY, 200.0, 205.0), "combined")
    out2 = blend_boundaries(comb2, {"a": frame(a, "a"), "b": frame(b, "b")})
    np.testing.assert_allclose(out2["p50"].to_numpy(), comb2["p50"].to_numpy())


def test_every_origin_is_blended_on_its_own_and_short_origins_are_left_alone():
    n = MAX_STEPS
    lead = np.arange(1, n + 1)
    a, b = np.full(n, 200.0), np.full(n, 250.0)
    w = np.where(lead <= DAY, 0.9, 0.1)
    long1 = frame(w * a + (1 - w) * b, "combined")
    long2 = long1.assign(issued_at=long1["issued_at"] + pd.Timedelta("4h"),
                         timestamp=long1["timestamp"] + pd.Timedelta("4h"), p50=long1["p50"] + 100.0)
    short = frame(np.full(12, 220.0), "combined").assign(issued_at=ORIGIN + pd.Timedelta("1h"),
                                                          timestamp=lambda f: f["timestamp"] + pd.Timedelta("1h"))
    comb = pd.concat([long1, short, long2], ignore_index=True)
    mem = {m: pd.concat([frame(v, m), frame(v, m).assign(issued_at=lambda f: f["issued_at"] + pd.Timedelta("4h"),
                                                             timestamp=lambda f: f["timestamp"] + pd.Timedelta("4h"))])
           for m, v in {"a": a, "b": b}.items()}
    out = blend_boundaries(comb, mem)
    assert len(out) == len(comb) and list(out.columns) == list(comb.columns)
    for o in (ORIGIN, ORIGIN + pd.Timedelta("4h")):
        g = out[out["issued_at"] == o].sort_values("timestamp")
        assert abs(steps_at(g, DAY)) < 1e-9
    np.testing.assert_allclose(out[out["issued_at"] == ORIGIN + pd.Timedelta("1h")]["p50"], 220.0)


@pytest.mark.slow
def test_the_assembled_plan_forecast_steps_at_no_boundary_beyond_its_members():
    """Through :func:`forecasting.combining.assemble.assemble`: demand ramps up 10 GPUs a day; the weekly
    member forecasts the ramp (smooth, 0.035 GPU per step), every other member the last value (flat).
    The weekly member earns more weight at longer leads, bucket by bucket; the plan forecast's p50
    and p95 must still not step at any boundary by more than the weekly member's own step."""
    from forecasting.combining.assemble import assemble
    from forecasting.tiers import ROLLING_MODELS

    start = pd.Timestamp("2024-01-01", tz="UTC")
    ts = pd.date_range(start, periods=21 * DAY, freq="5min")
    days = np.arange(len(ts)) / DAY
    h5 = pd.DataFrame({"series_id": "s", "timestamp": ts, "value": 100.0 + 10.0 * days})

    def forecasts(origins):
        rows = {m: [] for m in ROLLING_MODELS}
        lead = np.arange(1, MAX_STEPS + 1)
        for o in origins:
            last = 100.0 + 10.0 * ((o - start) / pd.Timedelta("1D"))
            targets = o + pd.to_timedelta(5 * lead, unit="min")
            for m in ROLLING_MODELS:
                p50 = last + (10.0 * lead / DAY if m == "weekly" else 0.0)
                f = pd.DataFrame({"series_id": "s", "tier": m, "issued_at": o, "timestamp": targets, "p50": p50})
                for q, w in zip(QCOLS[1:], (3.0, 5.0, 9.0)):
                    f[q] = p50 + w
                rows[m].append(f)
        return {m: pd.concat(v, ignore_index=True) for m, v in rows.items()}

    origins = [o - pd.Timedelta("5min") for o in pd.date_range(start + pd.Timedelta("7D"), ts[-1], freq="4h")]
    rolling = forecasts(origins)
    rolling = {m: f[f["timestamp"] <= ts[-1]] for m, f in rolling.items()}
    finals = forecasts([ts[-1]])
    out = assemble(h5, ["s"], rolling, finals)
    plan = out.final.sort_values("timestamp")
    w = out.combination["s"]["final"]["combination"]
    assert w["7d"]["7d:5D-7D"]["p50"]["weights"]["weekly"] > w["24h"]["24h:1h-3h"]["p50"]["weights"].get("weekly", 0)
    weekly_step = 10.0 / DAY
    for L, _ in boundaries():
        for q in ("p50", "p95"):
            step = float(plan[q].iloc[L] - plan[q].iloc[L - 1])
            assert abs(step) <= weekly_step + 1e-6, (L, q, step)
