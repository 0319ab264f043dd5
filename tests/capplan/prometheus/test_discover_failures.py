"""``capplan discover`` when the store fails: exit codes as its help says (2 for refused credentials and
other 4xx, 1 for unreachable or failing), one ``error:`` line naming the URL and the cause, a connection
refused at once, ``--timeout``/``--retries`` bounding a server that never answers, progress on stderr."""

from __future__ import annotations

import socket
import time

import pytest

from tests.capplan.prometheus.test_prometheus_faults import fake_server, send
from tests.conftest import run_cli


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line.lower()]


def test_nothing_listening_fails_at_once_naming_url_and_cause(tmp_path, capsys):
    url = f"http://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    code, out, err = run_cli(["discover", "--prometheus-url", url, "--out", str(tmp_path / "c.yaml")], capsys)
    took = time.monotonic() - t0
    assert code == 1 and took < 5, (code, took, err)
    lines = _errors(err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and url in lines[0], err
    assert "cannot connect" in lines[0] and "refused" in lines[0].lower()
    assert "internal error" not in err and "query" not in lines[0]
    assert not (tmp_path / "c.yaml").exists()


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_exit_2(tmp_path, capsys, status):
    with fake_server(lambda h, q: send(h, status, b'{"status":"error","error":"no org id"}')) as url:
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--out", str(tmp_path / "c.yaml")], capsys)
    lines = _errors(err)
    assert code == 2 and len(lines) == 1 and url in lines[0] and "refused the credentials" in lines[0], err
    assert "internal error" not in err


def test_server_error_exits_1_after_the_retries_with_progress(tmp_path, capsys):
    with fake_server(lambda h, q: send(h, 503, b"overloaded", "text/plain")) as url:
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--retries", "1", "--out",
                                  str(tmp_path / "c.yaml")], capsys)
    assert code == 1 and "internal error" not in err
    assert "asking" in err and "retry 1 of 1" in err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "HTTP 503" in lines[0] and url in lines[0]


def test_silent_server_is_bounded_by_timeout_and_retries(tmp_path, capsys):
    def silent(h, q):
        time.sleep(3)

    with fake_server(silent) as url:
        t0 = time.monotonic()
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--timeout", "0.5", "--retries", "1",
                                  "--out", str(tmp_path / "c.yaml")], capsys)
        took = time.monotonic() - t0
    assert code == 1 and took < 4, (took, err)
    assert "timed out" in err and "retry 1 of 1" in err and "asking" in err
    assert len([x for x in err.splitlines() if x.startswith("error:")]) == 1


def test_quiet_prints_only_the_error(tmp_path, capsys):
    url = f"http://127.0.0.1:{_free_port()}"
    code, out, err = run_cli(["discover", "--prometheus-url", url, "-q", "--out", str(tmp_path / "c.yaml")], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1
