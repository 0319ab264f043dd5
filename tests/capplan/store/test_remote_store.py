"""Object-store roots (capplan.store.remote): runs published manifest last, read by capplan serve, pruned
there; on file:// URLs and on a local S3-compatible server (moto); fsspec's in-memory file system is refused."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from capplan.serve.plan import PlanSource
from capplan.store.local import Store
from capplan.store.remote import latest_run, open_root, prune_remote_runs, publish_run
from capplan.store.retention import RetentionConfig
from tests.ci import unavailable
from tests.serve_fixture import write_run


def _roundtrip(root: str, monkeypatch, tmp_path):
    monkeypatch.setenv("CAPPLAN_WORKDIR", str(tmp_path / "work"))
    store = Store(root)
    assert store.remote == root and str(tmp_path / "work") in str(store.root)
    first = write_run(store, 10.0)  # writes locally, then uploads and writes LATEST there last
    assert latest_run(root) == first
    source = PlanSource(root, poll_s=0)
    assert source.current().run_id == first
    # a run whose upload stopped half-way is never named by LATEST: serve keeps the published one
    half = "20991231T000000Z-s0-deadbeef"
    fs, base = open_root(root)
    fs.makedirs(f"{base}/runs/{half}", exist_ok=True)
    fs.pipe_file(f"{base}/runs/{half}/report.json", b'{"run": ')
    assert latest_run(root) == first and source.current().run_id == first
    second = write_run(store, 20.0)
    assert source.current().run_id == second and source.reload_failures == 0
    # retention on the object store: the newest run and LATEST stay, an old one goes
    old = "20200101T000000Z-s0-00000000"
    fs.makedirs(f"{base}/runs/{old}", exist_ok=True)
    fs.pipe_file(f"{base}/runs/{old}/report.json", b"{}")
    gone = prune_remote_runs(root, keep_runs=2, keep_days=0)
    assert old in gone and second not in gone
    assert latest_run(root) == second
    assert store.prune_runs(RetentionConfig(keep_runs=1, keep_days=0)) is not None
    assert latest_run(root) == second and fs.exists(f"{base}/runs/{second}/report.json")


def test_memory_filesystem_is_refused(tmp_path):
    from capplan.errors import InputError

    with pytest.raises(InputError, match="memory://"):
        Store(f"memory://capplan-{uuid.uuid4().hex[:8]}/store")


def test_file_url(monkeypatch, tmp_path):
    _roundtrip(f"file://{tmp_path / 'bucket'}/store", monkeypatch, tmp_path)


def test_publish_uploads_every_file_before_latest(tmp_path):
    root = f"file://{tmp_path / 'bucket'}"
    run = tmp_path / "run"
    (run / "manifests").mkdir(parents=True)
    (run / "report.json").write_text("{}")
    (run / "manifests" / "a.yaml").write_text("a: 1\n")
    fs, base = open_root(root)
    order = []
    put, pipe = fs.put_file, fs.pipe_file

    def rec_put(lpath, rpath, **kw):
        order.append(rpath)
        return put(lpath, rpath, **kw)

    def rec_pipe(path, value, **kw):
        order.append(path)
        return pipe(path, value, **kw)

    fs.put_file, fs.pipe_file = rec_put, rec_pipe
    try:
        publish_run(run, root, "20261201T000000Z-s0-aaaaaaaa")
    finally:
        fs.put_file, fs.pipe_file = put, pipe
    assert order[-1].endswith("runs/LATEST") and len(order) == 3


@pytest.fixture
def s3(monkeypatch):
    try:
        import s3fs  # noqa: F401
        from moto.server import ThreadedMotoServer
    except ImportError:
        unavailable("moto[server] and s3fs not installed (pip install -e .[test])")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                 "AWS_ENDPOINT_URL": f"http://{host}:{port}"}.items():
        monkeypatch.setenv(k, v)
    fsspec.config.conf.pop("s3", None)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(endpoint_url=f"http://{host}:{port}", key="test", secret="test")
    bucket = f"capplan-test-{uuid.uuid4().hex[:8]}"  # moto's state is per process: a bucket per test
    fs.mkdir(bucket)
    yield f"s3://{bucket}/store"
    s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


def test_s3_compatible_server(s3, monkeypatch, tmp_path):
    _roundtrip(s3, monkeypatch, tmp_path)


def test_model_registry_on_an_object_store(monkeypatch, tmp_path):
    import datetime as _dt

    import pandas as pd

    from capplan.config.settings import ForecastConfig
    from capplan.store.remote_models import RemoteModelRegistry

    url = f"file://{tmp_path / 'bucket'}/models"
    monkeypatch.setenv("CAPPLAN_WORKDIR", str(tmp_path / "a"))
    reg = ForecastConfig().registry(url)
    assert isinstance(reg, RemoteModelRegistry)
    rng = (pd.Timestamp("2026-01-01", tz="UTC"), pd.Timestamp("2026-01-02", tz="UTC"))
    t0 = _dt.datetime(2026, 1, 2, tzinfo=_dt.timezone.utc)
    versions = [RemoteModelRegistry(url, keep=2).save("weekly", "s/1", {"model.json": b"{}"}, rng, ["s/1"],
                                                       now=t0 + _dt.timedelta(hours=h)) for h in range(3)]
    fs, base = open_root(url)
    # an upload that stopped before meta.json is not a version
    fs.makedirs(f"{base}/weekly/s%2F1/29990101T000000000000Z", exist_ok=True)
    fs.pipe_file(f"{base}/weekly/s%2F1/29990101T000000000000Z/model.json", b"{}")
    monkeypatch.setenv("CAPPLAN_WORKDIR", str(tmp_path / "b"))  # another pod: an empty working folder
    other = RemoteModelRegistry(url, keep=2)
    d, meta = other.latest("weekly", "s/1")
    assert meta["version"] == versions[-1] and (d / "model.json").read_bytes() == b"{}"
    assert str(tmp_path / "b") in str(d)
    # keep=2: the oldest version is gone from the store as well
    assert not fs.exists(f"{base}/weekly/s%2F1/{versions[0]}")
    assert fs.exists(f"{base}/weekly/s%2F1/{versions[1]}/meta.json")
