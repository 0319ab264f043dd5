"""The store's cache of rolling-origin blocks and searches (capplan.run.cache): a warm run equals the cold one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from capplan.run.cache import RollingCache, fingerprint, prune
from capplan.run.search_cache import SearchCache

SERIES = ["infer/nasa-http"]
VOLATILE_RUN = {"run_id", "started_at", "duration_s", "stage_seconds", "models", "reuse", "published", "size_bytes"}


def _plan(tmp_path, store_dir, out, source="sample"):
    import yaml

    from capplan.config.settings import CapplanConfig
    from capplan.run import pipeline
    from capplan.run.executor import Executor
    from capplan.store.local import Store
    from tests.conftest import FAST_CONFIG

    cfg = CapplanConfig.model_validate(yaml.safe_load(FAST_CONFIG))
    cfg.models = str(store_dir.parent / f"models-{store_dir.name}")
    return pipeline.run_plan(source, cfg, out, series=SERIES, seed=3, store=Store(store_dir), executor=Executor())


def _source(d, drop_hours: int) -> str:
    """The sample's series as a parquet source, without its last ``drop_hours`` hours."""
    from capplan.sources import load_source

    loaded = load_source("sample")
    g = loaded.frame[loaded.frame["series_id"].isin(SERIES)].copy()
    g = g[g["timestamp"] <= g["timestamp"].max() - pd.Timedelta(hours=drop_hours)]
    g["kind"] = g["series_id"].map(lambda s: loaded.meta[s].kind)
    g["unit"] = g["series_id"].map(lambda s: loaded.meta[s].unit)
    p = d / f"src-{drop_hours}.parquet"
    g.to_parquet(p, index=False)
    return f"parquet:{p}"


@pytest.fixture(scope="module")
def cold_warm(tmp_path_factory):
    """On store A: a cold run an hour ago, the run an hour later, the same run again;
    on a fresh store B: a cold run on today's data (what the warm runs must equal)."""
    d = tmp_path_factory.mktemp("cache")
    before, now = _source(d, 1), _source(d, 0)
    _plan(d, d / "A", d / "out0", before)
    later = _plan(d, d / "A", d / "out1", now)
    files = sorted(p.relative_to(d / "A") for p in (d / "A" / "cache").rglob("*") if p.is_file())
    again = _plan(d, d / "A", d / "out2", now)
    cold = _plan(d, d / "B", d / "out3", now)
    return d, cold, later, again, files
def _payload(rep) -> dict:
    doc = json.loads(rep.to_json())
    doc["run"] = {k: v for k, v in doc["run"].items() if k not in VOLATILE_RUN}
    for s in doc["series"].values():
        s.pop("reused")
    return doc


def test_warm_runs_reuse_blocks_fits_and_searches_and_equal_a_cold_run(cold_warm):
    d, cold, later, again, files = cold_warm
    for kind in ("rolling", "search", "tuning", "models"):
        assert any(str(f).startswith(f"cache/{kind}/") for f in files), kind
    rc, rl, ra = cold.run.reuse, later.run.reuse, again.run.reuse
    n = rc["rolling_blocks"]["computed"]
    assert rc["rolling_blocks"] == {"reused": 0, "computed": n, "fit_reused": 0} and rc["search"]["computed"] == 1
    # an hour later: the blocks before the last are reused, the last ones predict with their stored fit
    assert 0 < rl["rolling_blocks"]["reused"] < n and rl["rolling_blocks"]["fit_reused"] > 0
    # ... and the tuning window (whole days) is unchanged: its tuned policy is replayed on the new evaluation window
    assert rl["search"] == {"reused": 0, "tuning_reused": 1, "computed": 0}
    assert ra["rolling_blocks"] == {"reused": n, "computed": 0, "fit_reused": 0} and ra["search"] == {
        "reused": 1, "tuning_reused": 0, "computed": 0}
    assert again.series[SERIES[0]].reused["search"] == "reused"
    assert _payload(later) == _payload(cold) == _payload(again)
    for name in ("backtest", "replay"):  # rolling-origin forecasts and the evaluation replays
        ref = pd.read_parquet(d / "out3" / f"{name}.parquet")
        for out in ("out1", "out2"):
            pd.testing.assert_frame_equal(pd.read_parquet(d / out / f"{name}.parquet"), ref, obj=f"{out}/{name}")
    # the plan forecasts of the warm runs come from the registry's models fitted an hour earlier (fresh for
    # their cadence, forecasting.registry_fit), so they are compared with each other, not with store B's fresh fits
    pd.testing.assert_frame_equal(pd.read_parquet(d / "out1" / "forecasts.parquet"),
                                  pd.read_parquet(d / "out2" / "forecasts.parquet"))


def test_a_corrupt_entry_is_recomputed_with_a_note_not_trusted(tmp_path):
    c = RollingCache(tmp_path, "naive")
    f = pd.DataFrame({"series_id": ["a"], "timestamp": [pd.Timestamp("2026-01-01", tz="UTC")], "p50": [1.5]})
    c.put("k1", f, {"a": "fell back"}, {"a": ["w"]})
    got = c.get("k1", ["a"])
    pd.testing.assert_frame_equal(got[0], f)
    assert got[1:] == ({"a": "fell back"}, {"a": ["w"]})
    pq = tmp_path / "cache" / "rolling" / "naive" / "k1.parquet"
    pq.write_bytes(pq.read_bytes()[:-20] + b"x" * 20)
    assert c.get("k1", ["a"]) is None
    assert "SHA-256" in c.notes["a"][0] and "recomputed" in c.notes["a"][0]
    assert c.stats["a"] == {"reused": 1, "computed": 1, "fit_reused": 0}
    (tmp_path / "cache" / "search").mkdir(parents=True)
    (tmp_path / "cache" / "search" / "k2.json").write_text("{not json")
    oc, why = SearchCache(tmp_path).get("k2")
    assert oc is None and why.startswith("JSONDecodeError")


def test_fingerprints_see_every_input_change():
    df = pd.DataFrame({"t": pd.date_range("2026-01-01", periods=4, freq="5min", tz="UTC"), "v": [1.0, 2, 3, 4]})
    base = fingerprint(df, {"a": 1}, np.arange(3))
    assert base == fingerprint(df.copy(), {"a": 1}, np.arange(3))
    df2 = df.copy()
    df2.loc[3, "v"] = 4.0000001
    assert fingerprint(df2, {"a": 1}, np.arange(3)) != base
    assert fingerprint(df, {"a": "1"}, np.arange(3)) != base
    assert fingerprint(df, {"a": 1}, np.arange(3, dtype="int32")) != base
    with pytest.raises(TypeError):
        fingerprint(object())


def test_prune_removes_entries_unused_for_keep_days(tmp_path):
    import os
    import time

    c = RollingCache(tmp_path, "naive")
    f = pd.DataFrame({"p50": [1.0]})
    c.put("old", f, {}, {})
    c.put("new", f, {}, {})
    old = time.time() - 30 * 86400
    for p in (tmp_path / "cache" / "rolling" / "naive").glob("old.*"):
        os.utime(p, (old, old))
    assert prune(tmp_path, keep_days=14) == 1
    assert sorted(p.name for p in (tmp_path / "cache" / "rolling" / "naive").iterdir()) == ["new.json", "new.parquet"]


def test_the_search_cache_stores_every_field_of_a_search_outcome():
    import dataclasses

    from capplan.run.search_cache import OUTCOME_FIELDS
    from optimizer.search.tuning import SearchOutcome

    assert {f.name for f in dataclasses.fields(SearchOutcome)} == set(OUTCOME_FIELDS)


def test_a_tuned_policy_round_trips_and_a_tampered_one_is_not_trusted(tmp_path):
    from optimizer.search.tuning import Tuned

    c = SearchCache(tmp_path)
    t = Tuned(params={"a": 1.5, "q": "p90"}, tuning={"gp_objective": np.float64(12.25)},
              trials=[{"params": {"a": 1.5}, "objective": 3.0}], notes=["tuning: n"], random_params=None,
              recommended_policy="reactive")
    c.put_tuned("k", t)
    got, why = c.get_tuned("k")
    assert why == "" and got == Tuned(**{**t.__dict__, "tuning": {"gp_objective": 12.25}})
    doc = tmp_path / "cache" / "tuning" / "k.json"
    doc.write_text(doc.read_text().replace("reactive", "baseline"))
    got, why = c.get_tuned("k")
    assert got is None and "SHA-256" in why
    assert c.get_tuned("absent") == (None, "")
