"""A full disk (ENOSPC) or an exceeded quota (EDQUOT) while writing output: exit 2 with one
line naming the folder and the space needed, and the previous files stay as they were
(capplan.store.diskfull, capplan.store.atomic, the CLI's error mapping).

One test fills a real tmpfs (mounted when this process may mount one, as root in CI's
container); the others simulate the error where a write happens."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from pathlib import Path

import pandas as pd
import pytest

from capplan.store import atomic
from capplan.store.diskfull import DiskFullError
from optimizer.exporters import write_all
from tests.conftest import run_cli
from tests.optimizer.exporters.test_exporters import PLANS


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _one_line_disk_full(err: str, folder: Path) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("error: no space left") and str(folder) in line and "MiB needed" in line, line
    assert "internal error" not in line and len(line) < 400


def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 512 KiB tmpfs, unmounted afterwards; skipped where this process may not mount."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the simulated ENOSPC tests cover the same paths")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_export_onto_a_full_tmpfs_exits_2_and_keeps_the_previous_output(small_tmpfs, capsys):
    out = small_tmpfs / "out"
    write_all(PLANS, out)
    (out / "notes.bin").write_bytes(os.urandom(300 * 1024))  # copied along by the re-render: does not fit twice
    before = _snapshot(out)
    code, _, err = run_cli(["export", "--out", str(out)], capsys)
    assert code == 2
    _one_line_disk_full(err, small_tmpfs)
    assert _snapshot(out) == before
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["out"]  # no temporary folder left


def test_simulated_enospc_during_export_exits_2(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    write_all(PLANS, out)
    before = _snapshot(out)
    monkeypatch.setattr("capplan.cli.commands.export.write_all", _enospc)
    code, _, err = run_cli(["export", "--out", str(out)], capsys)
    assert code == 2
    _one_line_disk_full(err, tmp_path)
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_atomic_file_writes_name_the_folder_and_keep_the_good_file(tmp_path, monkeypatch, code):
    good = tmp_path / "report.json"
    good.write_text("good\n")
    table = tmp_path / "t.parquet"
    atomic.write_parquet(table, pd.DataFrame({"a": range(1000)}))
    table_before = table.read_bytes()

    def full(_fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError) as ei:
        atomic.write_text(good, "x" * 3_000_000)
    assert str(tmp_path) in str(ei.value) and "2.9 MiB needed" in str(ei.value)
    with pytest.raises(DiskFullError):
        atomic.write_parquet(table, pd.DataFrame({"a": range(10)}))
    assert good.read_text() == "good\n" and table.read_bytes() == table_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "t.parquet"]


def test_replace_dir_reports_what_was_written(tmp_path):
    final = tmp_path / "run"
    final.mkdir()
    (final / "a.txt").write_text("old")
    with pytest.raises(DiskFullError) as ei:
        with atomic.replace_dir(final) as tmp:
            (tmp / "big.bin").write_bytes(b"\0" * (2 * 2**20))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp / "more.bin"))
    assert "2.0 MiB needed" in str(ei.value) and str(tmp_path) in str(ei.value)
    assert _snapshot(final) == {"a.txt": b"old"} and sorted(os.listdir(tmp_path)) == ["run"]


def test_a_library_write_outside_atomic_is_mapped_too(tmp_path, capsys, monkeypatch):
    """A full disk raised by other code (here: the export's validation step) still gives the one line."""
    out = tmp_path / "out"
    write_all(PLANS, out)
    (out / "manifests" / f"x-{uuid.uuid4().hex[:6]}.yaml").write_text("{}\n")

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out / "policy.yaml"))

    monkeypatch.setattr("capplan.cli.commands.export.validate_folder", full)
    code, _, err = run_cli(["export", "--validate", str(out)], capsys)
    assert code == 2 and "no space left" in err and str(out) in err and "internal error" not in err
