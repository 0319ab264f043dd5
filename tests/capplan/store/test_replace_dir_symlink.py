"""A symlinked output folder (to a folder, or dangling) is refused before anything is written: the whole-
folder swap would replace the link by a folder (or fail and leave its temporary behind)."""

from __future__ import annotations

import pytest

from capplan.errors import InputError
from capplan.store import atomic
from tests.conftest import run_cli


def test_a_failed_swap_puts_the_previous_set_back(tmp_path, monkeypatch):
    final = tmp_path / "out"
    with atomic.replace_dir(final) as tmp:
        (tmp / "a").write_text("previous")
    real = atomic.os.replace

    def failing(a, b):  # the new set cannot be moved in; moving the previous set back still works
        if str(b) == str(final) and ".old-" not in str(a):
            raise OSError(5, "Input/output error")
        return real(a, b)

    monkeypatch.setattr(atomic.os, "replace", failing)
    with pytest.raises(OSError):
        with atomic.replace_dir(final) as tmp:
            (tmp / "a").write_text("new")
    assert (final / "a").read_text() == "previous" and [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("dangling", [False, True])
def test_replace_dir_refuses_a_symlink_and_leaves_nothing(tmp_path, dangling):
    target = tmp_path / "real"
    if not dangling:
        target.mkdir()
        (target / "keep.txt").write_text("mine")
    link = tmp_path / "out"
    link.symlink_to(target)
    with pytest.raises(InputError, match="is a symlink"):
        with atomic.replace_dir(link) as tmp:
            (tmp / "report.json").write_text("{}")
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == sorted(["out"] + (
        [] if dangling else ["real"]))
    if not dangling:
        assert [p.name for p in target.iterdir()] == ["keep.txt"]


def test_a_failed_swap_leaves_no_temporary(tmp_path, monkeypatch):
    final = tmp_path / "out"
    real = atomic.os.replace

    def failing(a, b):
        if str(b) == str(final):
            raise OSError(5, "Input/output error")
        return real(a, b)

    monkeypatch.setattr(atomic.os, "replace", failing)
    with pytest.raises(OSError):
        with atomic.replace_dir(final) as tmp:
            (tmp / "a").write_text("x")
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize("dangling", [False, True])
def test_plan_refuses_a_symlinked_out(tmp_path, capsys, dangling):
    target = tmp_path / "real"
    if not dangling:
        target.mkdir()
    (tmp_path / "out").symlink_to(target)
    code, out, err = run_cli(["plan", "--source", "sample", "--out", str(tmp_path / "out"), "--store",
                              str(tmp_path / "store")], capsys)
    assert code == 2 and "is a symlink" in err and (tmp_path / "out").is_symlink()
