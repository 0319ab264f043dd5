"""What the dashboard trusts (docs/dashboard.md): only its own host on the app's WebSocket
(DNS rebinding), only files inside the store, and no run started nor absolute path shown
in read-only mode.

The Host test starts a real ``capplan dashboard`` (a Streamlit server on a free port) and
sends WebSocket handshakes to it; the store tests use AppTest on a small hand-made store."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from capplan.errors import InputError
from tests.e2e.test_dashboard import ROOT, _app, _env, _free_port, _ok

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _handshake(port: int, host: str) -> int:
    """The HTTP status of a WebSocket upgrade to the app's stream with this ``Host`` header."""
    key = base64.b64encode(os.urandom(16)).decode()
    req = (f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: streamlit\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(req.encode())
        head = s.recv(4096).decode(errors="replace")
    return int(head.split()[1]) if head.startswith("HTTP/") else 0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dash")
    port = _free_port()
    log = open(tmp / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "capplan", "dashboard", "--port", str(port), "--store",
                             str(tmp / "store"), "--allowed-host", "capplan.example.com"], env=_env(),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"dashboard did not start: {(tmp / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_websocket_refuses_a_foreign_host(server):
    assert _handshake(server, "evil.example") != 101
    assert _handshake(server, f"evil.example:{server}") != 101
    assert _handshake(server, f"127.0.0.1:{server}") == 101
    assert _handshake(server, f"localhost:{server}") == 101
    assert _handshake(server, "capplan.example.com") == 101  # --allowed-host: a reverse proxy's name


def test_allowed_hosts_of_a_wildcard_bind():
    from capplan.cli.commands.dashboard import allowed_hosts, streamlit_command

    assert set(allowed_hosts("127.0.0.1")) == {"localhost", "127.0.0.1", "::1"}
    wide = allowed_hosts("0.0.0.0", ["*.example.com"])
    assert socket.gethostname().lower() in wide and "*.example.com" in wide and "*" not in wide
    with pytest.raises(InputError, match="any site"):
        allowed_hosts("0.0.0.0", ["*"])
    cmd = streamlit_command("127.0.0.1", 8501)
    assert cmd.count("--server.allowedHosts") == 3


# -- files inside the store only --------------------------------------------------------------
def _store(tmp_path: Path) -> tuple[Path, Path]:
    """A store whose one real run folder is 'r1', and a folder outside it with a report.json."""
    store = tmp_path / "store"
    (store / "runs" / "r1").mkdir(parents=True)
    (store / "runs" / "r1" / "report.json").write_text("{}")
    outside = tmp_path / "outside"
    (outside / "manifests").mkdir(parents=True)
    (outside / "report.json").write_text('{"secret": "OUTSIDE-SECRET"}')
    (outside / "manifests" / "a.yaml").write_text("secret: OUTSIDE-SECRET\n")
    return store, outside


def _page_text(at) -> str:
    parts = [e.value for kind in ("error", "warning", "info", "caption", "markdown", "code") for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def test_latest_holding_a_path_outside_the_store_is_refused(tmp_path, monkeypatch):
    from dashboards import paths

    store, outside = _store(tmp_path)
    (store / "runs" / "LATEST").write_text("../../outside\n")
    rid, why = paths.latest(store)
    assert rid is None and "refused" in why
    with pytest.raises(InputError, match="plain name"):
        paths.run_folder(store, "../../outside")
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    monkeypatch.delenv("CAPPLAN_CONFIG", raising=False)
    at = _app(ROOT / "dashboards" / "app.py").run()
    _ok(at)
    assert at.sidebar.selectbox(key="capplan_run_id").options == ["r1"]
    assert any("runs/LATEST" in w.value and "refused" in w.value for w in at.sidebar.warning)
    assert "OUTSIDE-SECRET" not in _page_text(at)


def test_symlinked_run_and_symlinked_manifest_are_refused(tmp_path, monkeypatch):
    from dashboards import paths

    store, outside = _store(tmp_path)
    (store / "runs" / "linked").symlink_to(outside, target_is_directory=True)
    (store / "runs" / "LATEST").write_text("linked\n")
    assert paths.run_ids(store) == ["r1"] and paths.latest(store) == (None, None)
    with pytest.raises(InputError, match="symbolic link"):
        paths.run_folder(store, "linked")
    run = store / "runs" / "r1"
    (run / "manifests").mkdir()
    (run / "manifests" / "a.yaml").symlink_to(outside / "manifests" / "a.yaml")
    with pytest.raises(InputError, match="manifests/a.yaml is a symbolic link"):
        paths.run_folder(store, "r1")
    with pytest.raises(InputError):
        paths.inside(run, "manifests/a.yaml")
    with pytest.raises(InputError):
        paths.inside(run, "../../outside/report.json")
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    monkeypatch.delenv("CAPPLAN_CONFIG", raising=False)
    at = _app(ROOT / "dashboards" / "views" / "manifests.py").run()
    _ok(at)
    assert any("symbolic link" in e.value for e in at.error)
    assert "OUTSIDE-SECRET" not in _page_text(at)


def test_read_only_hides_the_new_run_form_and_absolute_paths(tmp_path, monkeypatch):
    store, _ = _store(tmp_path)
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    monkeypatch.delenv("CAPPLAN_CONFIG", raising=False)
    at = _app(ROOT / "dashboards" / "app.py").run()
    _ok(at)
    assert any(e.label == "New run" for e in at.sidebar.expander)  # the default: runs can be started
    monkeypatch.setenv("CAPPLAN_DASHBOARD_READ_ONLY", "1")
    at = _app(ROOT / "dashboards" / "app.py").run()
    _ok(at)
    assert not [e for e in at.sidebar.expander if e.label == "New run"]
    assert not [b for b in at.sidebar.button if b.key == "newrun_start"]
    assert str(tmp_path) not in _page_text(at)
    from dashboards import jobs

    with pytest.raises(InputError, match="read-only"):
        jobs.start_job("sample", None, [], 4, quick=True)
