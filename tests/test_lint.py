"""The linter is part of the suite: ``ruff check`` (configured under ``[tool.ruff]`` in pyproject.toml: pyflakes,
pycodestyle with lines of at most 120 characters, import order, a complexity limit) passes on the whole project."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: it is in the test extra (pip install -e '.[test]')"
    r = subprocess.run([ruff, "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]
