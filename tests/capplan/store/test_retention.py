"""Retention of runs and the compact backtest (capplan.store.retention)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd
import pytest

from capplan.store.local import Store
from capplan.store.retention import (
    RetentionConfig,
    compact_backtest,
    folder_bytes,
    prune_runs,
    run_started,
    runs_to_prune,
    write_backtest,
)
from capplan.store.runs import new_run_id

RUN_BYTES = 200_000  # one simulated run's files


def _simulate(store: Store, cfg: RetentionConfig, hours: int, publish_every: int) -> list[tuple[str, int, str]]:
    """An hourly schedule: each hour writes a run, moves LATEST only every ``publish_every`` runs
    (the others are --no-publish runs or failed publications), then prunes. Returns per hour
    (LATEST, store bytes, run id)."""
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rng = np.random.default_rng(0)
    seen = []
    for h in range(hours):
        now = t0 + dt.timedelta(hours=h)
        rid = new_run_id(now, 0)
        d = store.run_dir(rid)
        d.mkdir(parents=True)
        (d / "backtest.parquet").write_bytes(rng.bytes(RUN_BYTES))
        (d / "report.json").write_text("{}")
        if h % publish_every == 0:
            store.mark_latest(rid)
        prune_runs(store.runs_dir, store.latest_run(), cfg, now=now + dt.timedelta(minutes=10))
        seen.append((store.latest_run(), folder_bytes(store.root), rid))
    return seen


@pytest.mark.parametrize("keep_runs,keep_days", [(24, 1.0), (5, 0.0), (3, 0.25)])
def test_hourly_schedule_stays_bounded_and_latest_survives(tmp_path, keep_runs, keep_days):
    store = Store(tmp_path / "store")
    cfg = RetentionConfig(keep_runs=keep_runs, keep_days=keep_days)
    seen = _simulate(store, cfg, hours=48, publish_every=7)
    # kept: the newest keep_runs, those younger than keep_days (one per hour), and LATEST
    most = max(keep_runs, math.ceil(keep_days * 24) + 1) + 1
    bound = most * (RUN_BYTES + 2) + 4096
    for latest, size, _ in seen:
        assert latest is not None  # LATEST always names a run folder that still exists
        assert size <= bound
    # LATEST was published 41 hours before the end; it is still there, though older than any rule keeps
    assert seen[-1][0] == seen[42][2]
    assert store.run_dir(seen[42][2]).is_dir()
    assert len(store.list_runs()) <= most
    # the newest keep_runs are all there
    assert all(store.run_dir(r).is_dir() for _, _, r in seen[-keep_runs:])


def test_default_keeps_a_day_of_hourly_runs(tmp_path):
    store = Store(tmp_path / "store")
    seen = _simulate(store, RetentionConfig(), hours=48, publish_every=1)
    kept = store.list_runs()
    assert 24 <= len(kept) <= 25
    assert seen[-1][2] in kept and seen[-1][0] == seen[-1][2]
    assert seen[0][2] not in kept


def test_runs_without_a_time_count_as_old_and_latest_is_never_named():
    ids = ["airflow-20261101T000000Z-s0", "20261101T000000Z-s0-aaaaaaaa", "20261101T010000Z-s0-bbbbbbbb"]
    now = dt.datetime(2026, 11, 5, tzinfo=dt.timezone.utc)
    assert run_started("airflow-x") is None
    gone = runs_to_prune(ids, latest="20261101T000000Z-s0-aaaaaaaa", keep_runs=1, keep_days=1, now=now)
    assert gone == ["airflow-20261101T000000Z-s0"]


def test_prune_leaves_folders_being_written(tmp_path):
    runs = tmp_path / "runs"
    (runs / ".20261101T000000Z-s0-aaaaaaaa.host~1.x.tmp").mkdir(parents=True)
    (runs / "20261101T000000Z-s0-aaaaaaaa").mkdir()
    (runs / "20261101T010000Z-s0-bbbbbbbb").mkdir()
    now = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    assert prune_runs(runs, None, RetentionConfig(keep_runs=1, keep_days=0),
                      now=now) == ["20261101T000000Z-s0-aaaaaaaa"]
    assert sorted(p.name for p in runs.iterdir())[0].startswith(".")


def _rolling(n_origins: int = 20) -> pd.DataFrame:
    rows = []
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    for sid in ("a", "b"):
        for tier in ("combined", "hourly", "naive"):
            for k in range(n_origins):
                issued = t0 + pd.Timedelta(hours=k)
                ts = pd.date_range(issued + pd.Timedelta("5min"), periods=12, freq="5min")
                v = np.arange(12, dtype=float) + k + 0.123456789
                rows.append(pd.DataFrame({"series_id": sid, "tier": tier, "issued_at": issued, "timestamp": ts,
                                          "p50": v, "p90": v + 1, "p95": v + 2, "p99": v + 3}))
    return pd.concat(rows, ignore_index=True)


def test_compact_backtest_keeps_what_the_whatif_reads(tmp_path):
    r = _rolling(n_origins=40)
    ev = {"a": ("2026-01-01T10:00:00+00:00", "2026-01-01T15:00:00+00:00")}
    a, e = (pd.Timestamp(x) for x in ev["a"])
    c = compact_backtest(r, ev)
    assert set(c["series_id"]) == {"a"} and set(c["tier"]) == {"combined"}
    assert c["issued_at"].max() <= e  # nothing issued after the window
    comb = r[(r.series_id == "a") & (r.tier == "combined")]
    # every forecast within an hour of its origin over the window is kept (the hourly lookups) ...
    fresh = comb[(comb.timestamp >= a) & (comb.timestamp <= e)
                 & (comb.timestamp - comb.issued_at <= pd.Timedelta("1h"))]
    key = ["issued_at", "timestamp"]
    assert set(map(tuple, fresh[key].to_numpy())) <= set(map(tuple, c[key].to_numpy()))
    # ... and before the window only each hour's latest origin (the calibrated top-up's errors)
    pre = c[c.timestamp < a]
    assert len(pre) and (pre.groupby(pre.timestamp.dt.floor("1h"))["issued_at"].nunique() == 1).all()
    assert len(c) < len(comb)
    merged = c.merge(comb, on=key, suffixes=("", "_full"))
    np.testing.assert_array_equal(merged["p95"].to_numpy(), merged["p95_full"].to_numpy())  # exact values
    write_backtest(tmp_path / "c.parquet", [r], ev, "compact")
    write_backtest(tmp_path / "f.parquet", [r], ev, "full")
    back = pd.read_parquet(tmp_path / "c.parquet")
    assert len(back) == len(c)
    assert (back["tier"] == "combined").all()  # what capplan.backtest.whatif filters on reads back the same
    assert len(pd.read_parquet(tmp_path / "f.parquet")) == len(r)
    assert (tmp_path / "c.parquet").stat().st_size < (tmp_path / "f.parquet").stat().st_size
