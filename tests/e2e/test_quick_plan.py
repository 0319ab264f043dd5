"""`capplan plan --quick` runs end to end and says it was a quick run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO


def test_quick_plan_runs_and_says_so(tmp_path, fast_config):
    out = tmp_path / "out"
    env = {**os.environ, "COLUMNS": "120"}
    r = subprocess.run([sys.executable, "-m", "capplan", "plan", "--quick", "--config", str(fast_config), "--out",
                        str(out), "--series", "infer/azure-llm-conv", "-q"],
                       capture_output=True, text=True, cwd=REPO, timeout=1800, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    text = " ".join(r.stdout.split())
    assert text.startswith("quick run (--quick)") and "for a first look" in text
    assert text.count("quick run (--quick)") == 2  # before the table and after the file count
    assert f"store: {fast_config.parent / 'store'}" in text
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["quick"] is True and report["run"]["n_calls"] == 8
    assert report["series"]["infer/azure-llm-conv"].get("random_search") is None
