"""An object-store ``store:`` keeps everything capplan stores (history, cache, forecasts, runs, published
or not), so a pod with an empty working folder starts where the last one stopped; the local working
folder is private (mode 0700, a fresh random name, never a planted symlink). On moto's S3 server."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile

import pandas as pd
import pytest

from capplan.store.local import Store
from capplan.store.remote import latest_run, open_root
from capplan.store.retention import RetentionConfig
from forecasting.types import SeriesMeta
from tests.capplan.store.test_remote_store import s3  # noqa: F401 (fixture)
from tests.serve_fixture import write_run


def _history(n: int = 12) -> pd.DataFrame:
    ts = pd.date_range("2026-01-01", periods=n, freq="5min", tz="UTC")
    return pd.DataFrame({"series_id": "train/a", "timestamp": ts, "value": [float(i) for i in range(n)]})


@pytest.mark.slow  # a local S3-compatible server (moto)
def test_history_cache_and_runs_are_on_the_object_store(s3, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("CAPPLAN_WORKDIR", str(tmp_path / "pod1"))
    one = Store(s3)
    one.write_series("train/a", _history(), SeriesMeta(kind="training", unit="gpu"))
    fs, base = open_root(s3)
    assert fs.exists(f"{base}/history/train%2Fa.parquet") and fs.exists(f"{base}/history/train%2Fa.json")
    entry = one.root / "cache" / "rolling" / "ets" / "abc.json"
    entry.parent.mkdir(parents=True)
    entry.write_text('{"fp": "abc"}')
    first = write_run(one, 10.0)  # published: cache uploaded before the run and LATEST
    assert fs.exists(f"{base}/cache/rolling/ets/abc.json") and latest_run(s3) == first
    kept = write_run(one, 20.0, publish=False)
    one.keep_run(kept)  # an unpublished run is kept on the store too, LATEST unchanged
    assert fs.exists(f"{base}/runs/{kept}/report.json") and latest_run(s3) == first

    monkeypatch.setenv("CAPPLAN_WORKDIR", str(tmp_path / "pod2"))  # the next CronJob pod: an empty folder
    two = Store(s3)
    assert two.root != one.root and str(tmp_path / "pod2") in str(two.root)
    frame, meta, _ = two.read_series("train/a")
    assert len(frame) == 12 and meta.kind == "training"
    assert (two.root / "cache" / "rolling" / "ets" / "abc.json").read_text() == '{"fp": "abc"}'
    # an entry pruned locally is pruned on the store at the end of the run
    (two.root / "cache" / "rolling" / "ets" / "abc.json").unlink()
    two.prune_runs(RetentionConfig(keep_runs=5, keep_days=0))
    assert not fs.exists(f"{base}/cache/rolling/ets/abc.json")


def test_working_folder_is_private_and_never_a_planted_symlink(tmp_path, monkeypatch):
    url = f"file://{tmp_path / 'bucket'}/store"
    work = tmp_path / "tmp"
    work.mkdir()
    monkeypatch.setenv("CAPPLAN_WORKDIR", str(work))
    victim = tmp_path / "victim"
    victim.mkdir()
    # another user plants a symlink under the name a URL's hash would give
    os.symlink(victim, work / f"capplan-store-{hashlib.sha256(url.encode()).hexdigest()[:12]}")
    a, b = Store(url), Store(url)
    for st in (a, b):
        assert not st.root.is_symlink() and st.root.parent == work
        assert stat.S_IMODE(st.root.stat().st_mode) == 0o700
    assert a.root != b.root
    a.write_series("train/a", _history(), SeriesMeta(kind="training", unit="gpu"))
    assert list(victim.iterdir()) == []
    assert (tmp_path / "bucket" / "store" / "history" / "train%2Fa.parquet").exists()


def test_default_working_folder_is_under_the_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("CAPPLAN_WORKDIR", raising=False)
    st = Store(f"file://{tmp_path / 'bucket'}/store")
    assert st.root.parent == type(st.root)(tempfile.gettempdir()) and st.root.name.startswith("capplan-store-")
    assert stat.S_IMODE(st.root.stat().st_mode) == 0o700
