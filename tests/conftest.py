"""Shared fixtures: a fast planning config and one end-to-end run on a slice of the real sample."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAST_CONFIG = """\
store: store
plan:
  n_calls: 8
  executor: local
forecast:
  lstm_epochs: 2
  lstm_max_windows: 400
  lstm_members: 2
  prophet_samples: 60
"""
E2E_SERIES = ["train/vc6YE", "infer/nasa-http", "infer/azure-llm-conv"]


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    """Run the capplan CLI in-process; returns (exit code, stdout, stderr)."""
    from capplan.cli.app import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture(scope="session")
def fast_config(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cfg")
    p = d / "fast.yaml"
    p.write_text(FAST_CONFIG)
    return p


@pytest.fixture(scope="session")
def plan_run(tmp_path_factory, fast_config):
    """The session's one real plan: `capplan plan --format json` on three real series (executor local,
    store and models beside ``fast_config``); returns (out_dir, report, stderr). Shared by the
    end-to-end, report, executor and dashboard tests (which read its store run)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("plan") / "out"
    args = [sys.executable, "-m", "capplan", "plan", "--config", str(fast_config), "--out", str(out),
            "--format", "json", "--seed", "7", "--publish"]
    for s in E2E_SERIES:
        args += ["--series", s]
    r = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    return out, report, r.stderr


@pytest.fixture(autouse=True)
def _restore_main_module():
    """streamlit's script runner (AppTest in the dashboard tests) installs a fake ``__main__`` and
    leaves it there; process pools with the ``spawn`` context (capplan.run.executor, dask's nanny)
    re-import ``__main__`` in every child, so the children of later tests would run the dashboard
    script and die. Put the real one back after every test."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


#: fixtures that start a real service or run a real plan: a test that uses one is end-to-end (marked slow)
SLOW_FIXTURES = {"plan_run", "prom", "prom_data", "prom_factory", "cold_warm", "awkward", "engines"}
#: folders whose tests are end-to-end or service-backed as a whole
SLOW_DIRS = ("e2e",)


def pytest_collection_modifyitems(config, items):
    """The fast lane (``pytest -m "not slow"``): every test under :data:`SLOW_DIRS`, and every test that uses
    a fixture of :data:`SLOW_FIXTURES` (a real Prometheus, a real plan), carries the ``slow`` mark; the default
    suite and CI still run them all."""
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts[0] in SLOW_DIRS or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


from tests.prom_fixture import prom, prom_data, prom_factory  # noqa: F401,E402
