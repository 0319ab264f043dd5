"""``capplan serve`` under faults: a failed run read is tried again, ``LATEST`` never leads out of the store
(a path, a symlink, a FIFO), ``/readyz`` never shows the server's folders, HEAD is answered and idle
connections are closed. In-process, on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import struct
import threading
import time

import pandas as pd
import pytest
import requests

from capplan.serve.plan import PlanSource, check_run_id
from capplan.serve.server import API_LATEST, make_server
from capplan.store.local import Store
from tests.serve_fixture import forecasts, report_doc, write_run


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "srv" / "store")


def _serve(source, **kw):
    server = make_server(source, "127.0.0.1", 0, 150, **kw)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_a_failed_read_is_tried_again(store, monkeypatch):
    good = write_run(store, 10.0)
    source = PlanSource(str(store.root), poll_s=0)
    assert source.current().run_id == good
    newer = write_run(store, 20.0)
    real_open, fails = source.fs.open, []

    def flaky(path, *a, **kw):
        if path.endswith(f"{newer}/report.json") and not fails:
            fails.append(path)
            raise OSError(5, "Input/output error")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(source.fs, "open", flaky)
    assert source.current().run_id == good and fails and newer in source.last_error
    assert source.current().run_id == newer and source.last_error is None


def test_backoff_grows_but_the_run_is_tried_again(store):
    source = PlanSource(str(store.root), poll_s=0.05)
    bad = write_run(store, 10.0, report_text='{"run": ')
    source.current(force=True)
    assert source.plan is None and bad in source.last_error
    tries = source.reload_failures
    source.current(force=True)  # within the backoff: not read again
    assert source.reload_failures == tries
    time.sleep(0.12)
    source.current(force=True)
    assert source.reload_failures == tries + 1


@pytest.mark.parametrize("rid", ["../../evil", "/etc", "..", ".tmp-x", "a/b", "x\n../y", ""])
def test_check_run_id_refuses_paths(rid):
    if rid:
        with pytest.raises(ValueError):
            check_run_id(rid)


def test_latest_pointing_outside_the_store_is_refused_without_server_paths(store, tmp_path):
    good = write_run(store, 10.0)
    source = PlanSource(str(store.root), poll_s=0)
    assert source.current().run_id == good
    evil = "../../evil"  # a complete-looking run beside the store
    d = store.runs_dir / evil
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps(report_doc(evil, dt.datetime.now(dt.timezone.utc))))
    forecasts(pd.Timestamp.now(tz="UTC"), 99.0).to_parquet(d / "forecasts.parquet")
    (store.runs_dir / "LATEST").write_text(evil + "\n")
    assert source.current().run_id == good
    assert "not a run id" in source.last_error and str(tmp_path) not in source.last_error
    # a run folder that is a symlink out of the store
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "report.json").write_text(json.dumps(report_doc("20990101T000000Z-s0-00000000",
                                                               dt.datetime.now(dt.timezone.utc))))
    os.symlink(outside, store.runs_dir / "20990101T000000Z-s0-00000000")
    (store.runs_dir / "LATEST").write_text("20990101T000000Z-s0-00000000\n")
    assert source.current().run_id == good and "outside the store" in source.last_error
    assert str(tmp_path) not in source.last_error


def test_latest_as_a_fifo_does_not_hang(store, tmp_path):
    good = write_run(store, 10.0)
    source = PlanSource(str(store.root), poll_s=0)
    assert source.current().run_id == good
    (store.runs_dir / "LATEST").unlink()
    os.mkfifo(store.runs_dir / "LATEST")
    done = []
    th = threading.Thread(target=lambda: done.append(source.current()), daemon=True)
    th.start()
    th.join(5)
    assert done and done[0].run_id == good and "not a regular file" in source.last_error
    server, url = _serve(source)
    try:
        doc = requests.get(url + "/readyz", timeout=5).json()
        assert doc["run_id"] == good and str(tmp_path) not in json.dumps(doc)
    finally:
        server.shutdown()
        server.server_close()


def test_head_is_answered_on_every_route(store):
    source = PlanSource(str(store.root), poll_s=0)
    server, url = _serve(source)
    try:
        r = requests.head(url + "/readyz", timeout=5)
        assert r.status_code == 503 and r.content == b""
        write_run(store, 10.0)
        for route, code in (("/metrics", 200), ("/healthz", 200), ("/readyz", 200), (API_LATEST, 200),
                            ("/nope", 404)):
            h, g = requests.head(url + route, timeout=5), requests.get(url + route, timeout=5)
            assert h.status_code == g.status_code == code and h.content == b""
            assert h.headers["Content-Type"] == g.headers["Content-Type"]
    finally:
        server.shutdown()
        server.server_close()


def test_other_methods_get_405_with_allow(store):
    server, url = _serve(PlanSource(str(store.root), poll_s=0))
    try:
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            r = requests.request(method, url + "/metrics", timeout=5)
            assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    finally:
        server.shutdown()
        server.server_close()


def test_idle_and_aborted_connections_end_quietly(store, capfd):
    source = PlanSource(str(store.root), poll_s=0)
    server, url = _serve(source, idle_timeout_s=0.5)
    try:
        port = server.server_address[1]
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        t0 = time.monotonic()
        assert idle.recv(1024) == b""  # the server closed it
        assert time.monotonic() - t0 < 3
        idle.close()
        # a scrape aborted mid-request: reset by the client
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        time.sleep(0.3)
        assert requests.get(url + "/healthz", timeout=5).status_code == 200
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err
