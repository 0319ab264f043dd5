"""Which files the dashboard may show: only those inside its store.

Anyone who can write the store could otherwise point the dashboard elsewhere: a
``runs/LATEST`` holding ``../../etc``, a run folder that is a symbolic link, or a
manifest inside a run that links to ``/etc/shadow``. Every run folder the dashboard
opens is therefore checked here:

* a run id is one plain name (no ``/``, no ``..``, not hidden);
* ``runs/`` and the run folder are real folders, not links, and resolve inside the store;
* nothing inside the run folder is a link (checked without following any).

A run that fails a check is not listed, and opening it raises
:class:`capplan.errors.InputError` saying why; its files are never read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from capplan.errors import InputError

_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]{0,199}")


def _plain(rid: str) -> bool:
    return bool(_RUN_ID.fullmatch(rid)) and ".." not in rid


def runs_dir(root: Path) -> Path | None:
    """``<root>/runs`` when it is a real folder inside the store, else None."""
    d = root / "runs"
    if d.is_symlink() or not d.is_dir():
        return None
    return d


def run_ids(root: Path) -> list[str]:
    """Ids of the run folders that pass :func:`run_folder`'s checks on the folder itself
    (links inside a run are found when it is opened), sorted."""
    d = runs_dir(root)
    if d is None:
        return []
    return sorted(p.name for p in d.iterdir() if _plain(p.name) and p.is_dir() and not p.is_symlink())


def latest(root: Path) -> tuple[str | None, str | None]:
    """``(run id, None)`` from ``runs/LATEST``, or ``(None, why it was refused)``, or
    ``(None, None)`` when there is no LATEST (or it names a run that is gone)."""
    d = runs_dir(root)
    if d is None:
        return None, None
    p = d / "LATEST"
    if p.is_symlink():
        return None, "runs/LATEST is a symbolic link; refused"
    if not p.is_file():
        return None, None
    rid = p.read_text(errors="replace").strip()
    if not _plain(rid):
        return None, "runs/LATEST does not hold a plain run id (a path, or '..'); refused"
    if rid not in run_ids(root):
        return None, None
    return rid, None


def run_folder(root: Path, rid: str) -> Path:
    """The folder of run ``rid`` in the store ``root``, checked as described above.

    Raises InputError naming the run and the reason, never reading a file outside the store.
    """
    d = runs_dir(root)
    if d is None:
        raise InputError("the store's runs/ folder is missing or a symbolic link; refused")
    if not _plain(rid):
        raise InputError("that run id is not a plain name; refused")
    run = d / rid
    if run.is_symlink() or not run.is_dir():
        raise InputError(f"run {rid}: not a folder inside the store (or a symbolic link); refused")
    if not run.resolve().is_relative_to(root.resolve()):
        raise InputError(f"run {rid}: resolves outside the store; refused")
    for top, dirs, files in os.walk(run, followlinks=False):
        for name in dirs + files:
            if os.path.islink(os.path.join(top, name)):
                rel = os.path.relpath(os.path.join(top, name), run)
                raise InputError(f"run {rid}: {rel} is a symbolic link; the dashboard shows only files "
                                 "inside the store, so this run is not shown")
    return run


def inside(run: Path, rel: str) -> Path:
    """``run / rel`` for a file name read from the run (e.g. a manifest's), refusing an
    absolute name, ``..``, a link or anything resolving outside ``run``.

    Raises InputError."""
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts:
        raise InputError(f"{rel}: not a file inside the run; refused")
    p = run
    for part in parts:
        p = p / part
        if p.is_symlink():
            raise InputError(f"{rel}: a symbolic link; refused")
    if not p.resolve().is_relative_to(run.resolve()):
        raise InputError(f"{rel}: resolves outside the run; refused")
    return p
