"""The store's cache of rolling-origin blocks and searches (capplan.cache): a warm run equals the cold one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from capplan.cache import RollingCache, SearchCache, fingerprint, prune

SERIES = ["infer/nasa-http"]
VOLATILE_RUN = {"run_id", "started_at", "duration_s", "stage_seconds", "models", "reuse", "published"}


def _plan(tmp_path, store_dir, out):
    from capplan import pipeline
    from capplan.config import CapplanConfig
    from capplan.executor import Executor
    from capplan.store import Store
    from tests.conftest import FAST_CONFIG
    import yaml

    cfg = CapplanConfig.model_validate(yaml.safe_load(FAST_CONFIG))
    cfg.models = str(tmp_path / "models")
    return pipeline.run_plan("sample", cfg, out, series=SERIES, seed=3, store=Store(store_dir), executor=Executor())


@pytest.fixture(scope="module")
def cold_warm(tmp_path_factory):
    d = tmp_path_factory.mktemp("cache")
    cold = _plan(d, d / "store", d / "out1")
    files = sorted(p.relative_to(d / "store") for p in (d / "store" / "cache").rglob("*") if p.is_file())
    warm = _plan(d, d / "store", d / "out2")
    return d, cold, warm, files


def _payload(rep) -> dict:
    doc = json.loads(rep.to_json())
    doc["run"] = {k: v for k, v in doc["run"].items() if k not in VOLATILE_RUN}
    for s in doc["series"].values():
        s.pop("reused")
    return doc


def test_a_warm_run_reuses_blocks_and_searches_and_equals_the_cold_run(cold_warm):
    d, cold, warm, files = cold_warm
    assert any(str(f).startswith("cache/rolling/") for f in files) and any(str(f).startswith("cache/search/")
                                                                          for f in files)
    rc, rw = cold.run.reuse, warm.run.reuse
    assert rc["rolling_blocks"]["reused"] == 0 and rc["rolling_blocks"]["computed"] > 0
    assert rw["rolling_blocks"] == {"reused": rc["rolling_blocks"]["computed"], "computed": 0}
    assert rc["search"] == {"reused": 0, "computed": 1} and rw["search"] == {"reused": 1, "computed": 0}
    assert warm.series[SERIES[0]].reused["search"] == "reused"
    assert _payload(warm) == _payload(cold)
    a = pd.read_parquet(d / "out1" / "backtest.parquet")
    b = pd.read_parquet(d / "out2" / "backtest.parquet")
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(pd.read_parquet(d / "out1" / "replay.parquet"),
                                  pd.read_parquet(d / "out2" / "replay.parquet"))


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
    assert c.stats["a"] == {"reused": 1, "computed": 1}
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
    assert prune(tmp_path, keep_days=14) == 2
    assert sorted(p.name for p in (tmp_path / "cache" / "rolling" / "naive").iterdir()) == ["new.json", "new.parquet"]
