"""A real VictoriaMetrics single-node server for tests (Debian package ``victoria-metrics``).

Started on 127.0.0.1 on a free port from a temporary folder, with a 100-year
retention so old history is kept; history goes in through
``/api/v1/import/prometheus`` (exposition lines with millisecond timestamps)
and ``/internal/force_flush`` makes it searchable at once. When the binary is
missing, tests are skipped locally but FAIL under ``CI=true``
(:func:`tests.ci.unavailable`).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.ci import unavailable
from tests.prom_fixture import free_port


def require_victoria_metrics() -> str:
    """Path of ``victoria-metrics``; skip (locally) or fail (``CI=true``) when absent."""
    vm = shutil.which("victoria-metrics") or shutil.which("victoria-metrics-prod")
    if vm:
        return vm
    unavailable("victoria-metrics not found: install the Debian package `victoria-metrics`")


@dataclass
class VMServer:
    """A running VictoriaMetrics (``url``); ``stop()`` ends it."""

    proc: subprocess.Popen
    url: str
    log: Path

    def load(self, text: bytes) -> None:
        """Import Prometheus exposition lines (ms timestamps) and flush them to search."""
        r = requests.post(f"{self.url}/api/v1/import/prometheus", data=text, timeout=120)
        r.raise_for_status()
        requests.get(f"{self.url}/internal/force_flush", timeout=60).raise_for_status()
        requests.get(f"{self.url}/internal/resetRollupResultCache", timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_vm(binary: str, workdir: Path, timeout: float = 30, extra: tuple[str, ...] = ()) -> VMServer:
    """Start ``victoria-metrics`` on 127.0.0.1:<free port> with its data under ``workdir``;
    ``extra``: more flags (e.g. ``-search.maxPointsPerTimeseries=100000``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / "vm.log"
    args = [binary, f"-storageDataPath={workdir / 'data'}", "-retentionPeriod=100y",
            f"-httpListenAddr=127.0.0.1:{port}", "-search.disableCache", "-loggerLevel=ERROR", *extra]
    proc = subprocess.Popen(args, stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"victoria-metrics exited: {log.read_text()[-2000:]}")
        try:
            if requests.get(f"{url}/health", timeout=1).status_code == 200:
                return VMServer(proc, url, log)
        except requests.RequestException:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"victoria-metrics not ready after {timeout} s: {log.read_text()[-2000:]}")
