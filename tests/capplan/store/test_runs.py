"""Runs: unique ids, stale temporaries cleaned, LATEST never behind --out after a kill,
and runs limited by --series (or written elsewhere) do not replace the fleet's plan unless --publish."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from capplan.store import atomic
from capplan.store.local import Store
from capplan.store.runs import new_run_id, should_publish
from tests.capplan.test_bad_input import T, demand
from tests.conftest import FAST_CONFIG, REPO, run_cli


def test_run_ids_unique_in_one_second_with_one_seed():
    t = dt.datetime(2026, 11, 30, 20, 0, 0, tzinfo=dt.timezone.utc)
    ids = {new_run_id(t, 0) for _ in range(2000)}
    assert len(ids) == 2000 and all(i.startswith("20261130T200000Z-s0-") for i in ids)


def test_publish_rule():
    assert should_publish(None, "capplan-out", None)
    assert not should_publish(["a"], "capplan-out", None)
    assert not should_publish(None, "/tmp/x", None)
    assert should_publish(["a"], "/tmp/x", True) and not should_publish(None, "capplan-out", False)


def _killed_writer(target: Path, kind: str) -> None:
    """A process killed (SIGKILL) inside an atomic write of ``target``."""
    code = ("import sys, time; from capplan.store import atomic\n"
            f"t = {str(target)!r}\n"
            + ("with atomic.replace_dir(t) as d:\n    (d / 'x').write_text('half')\n    print('in', flush=True)\n"
               "    time.sleep(60)\n" if kind == "dir" else
               "import capplan.store.atomic as a\n_o = a.os.replace\n"
               "def slow(*x):\n    print('in', flush=True); time.sleep(60)\n"
               "a.os.replace = slow\natomic.write_text(t, 'half')\n"))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.stdout.readline().strip() == b"in"
    p.send_signal(signal.SIGKILL)
    p.wait(10)


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_stale_temporaries_of_killed_runs_are_cleaned(tmp_path, kind):
    runs = tmp_path / "store" / "runs"
    runs.mkdir(parents=True)
    target = runs / ("20260101T000000Z-s0-aaaa" if kind == "dir" else "LATEST")
    _killed_writer(target, kind)
    left = [p for p in runs.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].name.startswith(f".{target.name}.")
    # a live process's temporary is kept
    live = runs / f".other.{atomic._owner()}.x.tmp"
    live.mkdir()
    with atomic.replace_dir(runs / "20260101T000001Z-s0-bbbb") as d:
        (d / "report.json").write_text("{}")
    assert not left[0].exists() and live.exists()
    assert Store(tmp_path / "store").list_runs() == ["20260101T000001Z-s0-bbbb"]


@pytest.mark.slow
def test_series_run_does_not_move_latest_and_latest_is_never_behind_out(tmp_path, capsys, monkeypatch):
    import pandas as pd

    rows = [pd.DataFrame({"timestamp": [t.isoformat() for t in T], "series_id": sid, "value": demand() * k})
            for sid, k in (("a", 1), ("b", 2))]
    src = tmp_path / "d.csv"
    pd.concat(rows).to_csv(src, index=False)
    cfg = tmp_path / "fast.yaml"
    cfg.write_text(FAST_CONFIG.replace("store: store", f"store: {tmp_path / 'store'}"))
    st = Store(tmp_path / "store")
    out = tmp_path / "o"
    base = ["plan", "--source", f"csv:{src}", "--config", str(cfg), "--out", str(out), "--n-calls", "4", "-q"]
    code, text, err = run_cli(base + ["--series", "a"], capsys)
    assert code == 0, err
    first = json.loads((out / "report.json").read_text())["run"]
    assert first["series_filter"] == ["a"] and first["published"] is False
    assert st.latest_run() is None and st.list_runs() == [first["run_id"]]
    assert "not published" in text
    # a publishing run killed while copying to --out: LATEST names it, --out still holds the previous run
    def killed(self, run_id, out):
        raise KeyboardInterrupt("killed during the --out copy")

    monkeypatch.setattr(Store, "copy_run", killed)
    code, _, err = run_cli(base + ["--publish", "--format", "json"], capsys)
    assert code != 0 and "internal error" not in err, err
    second = st.latest_run()
    assert second and second != first["run_id"] and len(st.list_runs()) == 2
    assert json.loads((st.run_dir(second) / "report.json").read_text())["run"]["published"] is True
    assert json.loads((out / "report.json").read_text())["run"]["run_id"] == first["run_id"]
    assert not [p for p in tmp_path.rglob("*.tmp")]
