"""Ctrl-C during a plan on the processes executor: one line and exit code 130, no traceback from the
parent or any worker, the workers gone, and nothing published."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "capplan", "plan", "--source", "sample", "--quick",
                             "--executor", "processes", "--workers", "2", "--out", str(tmp_path / "o"),
                             "--store", str(tmp_path / "store")],
                            cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)  # every line, in order
    reader.start()
    deadline = time.monotonic() + 240
    while not any("forecast: 1/" in x for x in list(lines)) and time.monotonic() < deadline:  # workers busy
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    reader.join(10)
    err = "".join(lines)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert sum("interrupted" in x for x in err.splitlines()) == 1, err[-3000:]
    assert not (tmp_path / "store" / "runs" / "LATEST").exists() and not (tmp_path / "o").exists()
