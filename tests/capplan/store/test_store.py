"""The store (capplan/store/local.py), atomic writes (capplan/store/atomic.py) and the model registry with retention."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest

from forecasting.types import SeriesMeta


def _frame(sid: str, n: int = 5) -> pd.DataFrame:
    ts = pd.date_range("2024-01-01", periods=n, freq="5min", tz="UTC")
    return pd.DataFrame({"series_id": sid, "timestamp": ts, "value": range(n)}).astype({"value": "float64"})


def test_history_round_trip_and_ids_never_escape_the_folder(tmp_path):
    from capplan.store.local import Store, series_key

    s = Store(tmp_path)
    s.write_series("train/../x", _frame("train/../x"), SeriesMeta(kind="training", quota_gpus=8), {"cursor": 1})
    assert series_key("train/../x") == "train%2F..%2Fx"
    assert [p.name for p in (tmp_path / "history").iterdir()] and not (tmp_path / "x.parquet").exists()
    f, meta, state = s.read_series("train/../x")
    pd.testing.assert_frame_equal(f, _frame("train/../x"))
    assert meta.quota_gpus == 8 and state == {"cursor": 1}
    assert s.series_ids() == ["train/../x"]
    assert s.last_timestamp("train/../x") == f["timestamp"].max()
    with pytest.raises(KeyError):
        s.read_series("nope")


def test_a_damaged_history_file_is_an_input_error_naming_it(tmp_path):
    from capplan.errors import InputError
    from capplan.store.local import Store

    s = Store(tmp_path)
    s.write_series("train/a", _frame("train/a"), SeriesMeta(kind="training"))
    pq, doc = (tmp_path / "history" / f"train%2Fa.{x}" for x in ("parquet", "json"))
    good = doc.read_text()
    doc.write_text("{not json")
    with pytest.raises(InputError, match=r"train%2Fa\.json: cannot read the series document.*capplan ingest"):
        s.read_series("train/a")
    doc.write_text(good)
    pq.write_bytes(b"PAR1 truncated")
    with pytest.raises(InputError, match=r"train%2Fa\.parquet: cannot read the stored history"):
        s.read_history()


def test_runs_and_tier_forecast_layout(tmp_path):
    from capplan.store.local import Store

    s = Store(tmp_path / "store")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}")
    d = s.save_run(out, "r1")
    assert (d / "report.json").read_text() == "{}" and s.latest_run() == "r1" and s.list_runs() == ["r1"]
    assert s.latest_forecasts("hourly") is None
    roll, fin = _frame("a"), _frame("a", 3)
    s.write_tier_forecast("hourly", "K1", "a", roll, fin, {"tier": "hourly"})
    s.write_tier_forecast("hourly", "K1", "b", roll, fin, {"tier": "hourly"})
    man = s.record_forecasts("hourly", "K1", ["a"], ["a", "b"])
    assert man["ok"] == ["a"] and man["missing"] == ["b"]
    assert sorted(p.name for p in s.forecast_dir("hourly", "K1").iterdir()) == [
        "_manifest.json", "a.backtest.parquet", "a.json", "a.parquet"]  # b's files are gone
    key, m = s.latest_forecasts("hourly")
    assert key == "K1" and m["ok"] == ["a"]
    r, f, doc = s.read_tier_forecast("hourly", "K1", "a")
    assert len(r) == 5 and len(f) == 3 and doc == {"tier": "hourly"}


def test_atomic_writes_leave_the_old_file_when_the_write_fails(tmp_path):
    from capplan.store import atomic
    p = tmp_path / "d" / "x.txt"
    atomic.write_text(p, "old")
    with pytest.raises(TypeError):
        atomic.write_bytes(p, "not bytes")  # fails while writing the temporary file
    assert p.read_text() == "old" and sorted(q.name for q in p.parent.iterdir()) == ["x.txt"]
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep").write_text("good")
    with pytest.raises(RuntimeError):
        with atomic.replace_dir(target) as tmp:
            (tmp / "half").write_text("x")
            raise RuntimeError("boom")
    assert sorted(q.name for q in target.iterdir()) == ["keep"]
    assert sorted(q.name for q in tmp_path.iterdir()) == ["d", "out"]  # no temporary folder left
    with atomic.replace_dir(target) as tmp:
        (tmp / "new").write_text("y")
    assert sorted(q.name for q in target.iterdir()) == ["new"]


def test_registry_freshness_and_retention(tmp_path):
    from forecasting.registry import ModelRegistry

    reg = ModelRegistry(tmp_path, keep=2)
    t0 = dt.datetime(2024, 1, 10, tzinfo=dt.timezone.utc)
    end = pd.Timestamp("2024-01-09", tz="UTC")
    for i in range(4):
        reg.save("weekly", "train/a", {"model.json": json.dumps({"i": i}).encode()}, (end - pd.Timedelta("7D"), end),
                 ["train/a"], now=t0 + dt.timedelta(hours=i))
    vs = reg.versions("weekly", "train/a")
    assert len(vs) == 2  # the two newest kept
    d, meta = reg.latest("weekly", "train/a")
    assert json.loads((d / "model.json").read_text()) == {"i": 3} and meta["series"] == ["train/a"]
    now = t0 + dt.timedelta(hours=4)
    assert reg.load_fresh("weekly", "train/a", end, ["train/a"], now=now) is not None
    assert reg.load_fresh("weekly", "train/a", end - pd.Timedelta("1h"), now=now) is None  # newer data than asked
    assert reg.load_fresh("weekly", "train/a", end, ["train/b"], now=now) is None  # other series
    assert reg.load_fresh("weekly", "train/a", end, now=now + dt.timedelta(days=8)) is None  # stale for its cadence
    assert ModelRegistry(tmp_path).versions("weekly", "train/a") == vs  # keep=None removes nothing
    with pytest.raises(ValueError):
        ModelRegistry(tmp_path, keep=0)
