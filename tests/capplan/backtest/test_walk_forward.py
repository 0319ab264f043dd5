"""The walk-forward policy backtest's weeks, spread and one step on synthetic data: no step sees
demand or forecasts after what its decisions may use."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from capplan.backtest.walk_forward import WeekTask, complete_weeks, fleet_summary, series_summary, spread, week_one
from capplan.cli.commands.backtest import check_policy_options
from capplan.config.settings import CapplanConfig, PlanConfig
from capplan.errors import InputError
from capplan.report import jsonout
from forecasting.types import STEP, SeriesMeta

T0 = pd.Timestamp("2024-03-01", tz="UTC")
DAY = pd.Timedelta("1D")


def test_complete_weeks_end_at_the_last_midnight_after_a_training_week():
    idx = pd.date_range(T0 + pd.Timedelta("16h"), T0 + pd.Timedelta("31D 15:55:00"), freq=STEP)  # like the sample
    weeks = complete_weeks(idx)
    last = (idx[-1] + STEP).floor("1D")
    assert weeks[-1] == (last - pd.Timedelta("7D"), last)  # the trailing 16 hours are not a week
    assert all(e - s == pd.Timedelta("7D") for s, e in weeks)
    assert all(b[0] == a[1] for a, b in zip(weeks, weeks[1:]))  # back to back
    assert weeks[0][0] >= idx[0] + pd.Timedelta("7D")  # a training span before the first
    assert weeks[0][0] - pd.Timedelta("7D") < idx[0] + pd.Timedelta("7D")  # ... and no week more fits
    assert len(weeks) == 3
    # a series ending at 23:55 keeps its last day
    idx2 = pd.date_range(T0, T0 + pd.Timedelta("21D") - STEP, freq=STEP)
    assert complete_weeks(idx2) == [(T0 + pd.Timedelta("7D"), T0 + pd.Timedelta("14D")),
                                    (T0 + pd.Timedelta("14D"), T0 + pd.Timedelta("21D"))]
    assert complete_weeks(pd.date_range(T0, periods=12, freq=STEP)) == []  # an hour: no week
    assert complete_weeks(pd.DatetimeIndex([], tz="UTC")) == []


def test_spread_is_min_median_max_and_the_sample_std():
    v = [1.2, 1.0, 1.5, float("nan")]
    s = spread(v)
    assert s["weeks"] == 3 and s["min"] == 1.0 and s["max"] == 1.5 and s["median"] == 1.2
    assert math.isclose(s["std"], float(np.std([1.2, 1.0, 1.5], ddof=1)))
    assert spread([1.1])["std"] is None and spread([])["median"] is None


def _week(start: str, cost: dict[str, float], limit: float) -> dict:
    return {"start": start, "limit_usd": limit, "rank": {"next_week": 1},
            "policies": {p: {"cost_usd": c, "regret": c / limit} for p, c in cost.items()}}


def test_summaries_are_sums_of_cost_over_sums_of_limit():
    pols = ("recommended", "baseline", "reactive", "naive_conformal")
    a = [_week("w1", dict.fromkeys(pols, 110.0), 100.0), _week("w2", dict.fromkeys(pols, 330.0), 300.0)]
    b = [_week("w1", dict.fromkeys(pols, 50.0), 10.0)]
    sa = series_summary(a)
    assert math.isclose(sa["recommended"]["regret"], 440 / 400)
    fleet = fleet_summary({"a": {"weeks": a}, "b": {"weeks": b}})
    assert math.isclose(fleet["weeks"]["w1"]["recommended"], 160 / 110)  # the fleet's week: both series
    assert fleet["weeks"]["w1"]["series"] == 2 and fleet["weeks"]["w2"]["series"] == 1
    assert math.isclose(fleet["policies"]["baseline"]["regret"], 490 / 410)
    assert fleet["recommended_spread"]["weeks"] == 2


def test_policy_options_need_policies_and_a_count():
    check_policy_options(True, 2, 1, 8)
    check_policy_options(False, None, None, None)
    with pytest.raises(InputError, match="--weeks: only with --policies"):
        check_policy_options(False, 2, None, None)
    with pytest.raises(InputError, match="--tune-weeks 0: must be at least 1"):
        check_policy_options(True, None, 0, None)
    with pytest.raises(InputError, match="--n-calls 3: must be at least 4"):
        check_policy_options(True, None, None, 3)


def _history(days: int, seed: int = 0) -> pd.DataFrame:
    ts = pd.date_range(T0, T0 + days * DAY - STEP, freq=STEP)
    rng = np.random.default_rng(seed)
    hour = ts.hour.to_numpy() + ts.minute.to_numpy() / 60
    v = np.round(20 + 8 * np.sin(2 * np.pi * hour / 24) + rng.normal(0, 1.5, len(ts)))
    return pd.DataFrame({"series_id": "train/syn", "timestamp": ts, "value": np.maximum(v, 0.0)})


def _forecasts(h: pd.DataFrame, first: pd.Timestamp, last: pd.Timestamp) -> pd.DataFrame:
    """A profile forecast from every 4-hour origin: each target's value on the last day before
    the origin at the same time of day (7 days ahead at midnight, 1 day otherwise)."""
    actual = pd.Series(h["value"].to_numpy(), index=pd.DatetimeIndex(h["timestamp"]))
    parts = []
    for o in pd.date_range(first, last, freq="4h") - STEP:
        n = 2016 if (o + STEP).hour == 0 else 288
        k = np.arange(1, n + 1)
        t = o + pd.to_timedelta(k * 5, "min")
        lag = np.ceil(k / 288).astype(int)
        p50 = actual.reindex(t - pd.to_timedelta(lag, "D")).to_numpy()
        parts.append(pd.DataFrame({"series_id": "train/syn", "tier": "combined", "issued_at": o, "timestamp": t,
                                   "p50": p50, "p90": p50 * 1.1 + 1, "p95": p50 * 1.15 + 1.5, "p99": p50 * 1.25 + 2}))
    return pd.concat(parts, ignore_index=True)


TUNE, WEEK = (T0 + 7 * DAY, T0 + 8 * DAY), (T0 + 8 * DAY, T0 + 9 * DAY)  # short spans keep the test fast


def _item(h: pd.DataFrame, comb: pd.DataFrame) -> WeekTask:
    cfg = CapplanConfig(plan=PlanConfig(n_calls=4, executor="local"))
    return WeekTask("train/syn", 1, TUNE, WEEK, h, comb, SeriesMeta(kind="training"), cfg, 0, cfg.price_book())


@pytest.mark.slow
def test_a_step_sees_nothing_after_its_week_and_tunes_on_nothing_after_its_tuning_weeks():
    h = _history(11)
    comb = _forecasts(h, T0 + 7 * DAY, T0 + 11 * DAY)
    doc = week_one(_item(h, comb))
    assert doc["week"] == 2 and doc["start"] == WEEK[0].isoformat() and doc["end"] == WEEK[1].isoformat()
    assert doc["tuning"] == [TUNE[0].isoformat(), TUNE[1].isoformat()]
    limit = doc["limit_usd"]
    assert limit > 0
    for p in ("recommended", "baseline", "reactive", "naive_conformal"):
        f = doc["policies"][p]
        assert math.isclose(f["regret"], f["cost_usd"] / limit)
        assert 0 <= f["coverage"] <= 1 and 0 <= f["idle_ratio"] <= 1
    r = doc["rank"]
    assert r["candidates"] >= 3 and 1 <= r["tuning"] <= r["candidates"] and 1 <= r["next_week"] <= r["candidates"]

    # demand and forecasts after the scored week change nothing of it
    end = WEEK[1]
    h2 = h.copy()
    h2.loc[h2["timestamp"] >= end, "value"] *= 5
    comb2 = comb.copy()
    late = comb2["issued_at"] >= end
    comb2.loc[late, ["p50", "p90", "p95", "p99"]] *= 5
    assert jsonout.dumps(week_one(_item(h2, comb2))) == jsonout.dumps(doc)

    # demand and forecasts from the scored week on change its figures, never the tuning
    start = WEEK[0]
    h3 = h.copy()
    h3.loc[h3["timestamp"] >= start, "value"] += 10
    comb3 = comb.copy()
    comb3.loc[comb3["issued_at"] >= start - STEP, ["p50", "p90", "p95", "p99"]] += 10
    doc3 = week_one(_item(h3, comb3))
    assert doc3["params"] == doc["params"] and doc3["recommendation"] == doc["recommendation"]
    assert doc3["rank"]["tuning"] == doc["rank"]["tuning"]
    assert doc3["limit_usd"] > doc["limit_usd"]  # more demand, a dearer perfect-foresight plan
    assert doc3["policies"]["recommended"]["cost_usd"] != doc["policies"]["recommended"]["cost_usd"]
