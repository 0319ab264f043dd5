"""Atomic writes: a failed run never leaves a half-written file or folder in
place of a good one (docs/method.md, "Data contracts").

* :func:`write_bytes` / :func:`write_parquet` write a temporary file in the
  same folder, ``fsync`` it and ``os.replace`` it onto the target (atomic on
  POSIX within one filesystem).
* :func:`replace_dir` builds a folder under a temporary name and swaps it in:
  the old folder is renamed aside, the new one renamed into place, and the old
  one deleted. Readers see either the old or the new set, never a mix; if the
  process dies between the two renames, the previous set is still there
  under ``<name>.old-*`` and is restored by the next call.
* Temporaries are named ``.<name>.<host>~<pid>.<random>.tmp``. A process
  killed mid-write (SIGKILL, OOM) cannot remove its own; :func:`clean_stale`
  removes those of this host whose process is gone, and :func:`replace_dir`
  calls it on the target's folder (the ``--out`` parent, the store's ``runs/``)
  before each swap. Temporaries of live processes or other hosts are kept.
* A full disk or an exceeded quota (``ENOSPC``, ``EDQUOT``) during any of these is a
  :class:`DiskFullError` (an :class:`capplan.errors.InputError`, CLI exit 2) whose one
  line names the folder, the space needed and the space free; the temporary is removed
  and the previous file or folder stays in place.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import uuid
from pathlib import Path

import pandas as pd

from capplan.errors import InputError
from capplan.store.diskfull import disk_full_error, is_disk_full, tree_bytes


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


_STALE_RE = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_-]+)~(?P<pid>\d+)\.[^.]+\.tmp$")


def _owner() -> str:
    """``<host>~<pid>`` of this process, for temporary names (dots of the host name as ``_``)."""
    host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"
    return f"{host}~{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(folder: str | os.PathLike) -> list[Path]:
    """Remove temporaries in ``folder`` left by processes of this host that are gone.
    Returns what was removed."""
    d = Path(folder)
    if not d.is_dir():
        return []
    host = _owner().split("~")[0]
    removed = []
    for p in d.iterdir():
        m = _STALE_RE.match(p.name)
        if m and m["host"] == host and int(m["pid"]) != os.getpid() and not _alive(int(m["pid"])):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            removed.append(p)
    return removed


def _parent_made(path: str | os.PathLike) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


@contextlib.contextmanager
def _renamed_onto(target: Path, tmp: Path, needed: int | None = None):
    """Yield ``tmp`` (a file beside ``target``) to be written; then ``fsync`` it and
    rename it onto ``target``. On an exception ``tmp`` is removed and ``target``
    is untouched; a full disk becomes :class:`DiskFullError` (``needed``: the bytes
    to write, if known)."""
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        written = tree_bytes(tmp)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if is_disk_full(exc):
            raise disk_full_error(target.parent, max(needed or 0, written) or None) from None
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Atomically write ``data`` to ``path`` (parents are created)."""
    p = _parent_made(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{_owner()}.", suffix=".tmp", dir=p.parent)
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; the result is an ordinary file
    with _renamed_onto(p, Path(tmp), len(data)), os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return p


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically write UTF-8 text."""
    return write_bytes(path, text.encode("utf-8"))


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame) -> Path:
    """Atomically write a frame as Parquet (zstd)."""
    p = _parent_made(path)
    old = p.stat().st_size if p.is_file() else None  # the file it replaces: a fair guess of the size
    with _renamed_onto(p, p.with_name(f".{p.name}.{_owner()}.{uuid.uuid4().hex}.tmp"), old) as tmp:
        frame.to_parquet(tmp, index=False, compression="zstd")
    return p


@contextlib.contextmanager
def replace_dir(final: str | os.PathLike):
    """Context manager yielding a temporary folder that replaces ``final`` on success.

    On an exception the temporary folder is removed and ``final`` is untouched; a full
    disk becomes :class:`DiskFullError` (the space needed: what was written before the
    disk filled, or the size of the folder it replaces, whichever is larger). A symlink at
    ``final`` (to a folder or dangling) is refused before anything is written: swapping it would
    replace the link by a folder, not fill the folder it names.

    Raises InputError (:class:`capplan.errors.InputError`) when ``final`` is a symlink.
    """
    final = Path(final)
    if final.is_symlink():
        raise InputError(f"{final}: is a symlink (to {os.readlink(final)}); the folder is replaced whole, which "
                         "would replace the link, not fill what it names: name the folder itself")
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f"{final.name}.old-*"):
        if not final.exists():
            os.replace(stale, final)  # a previous swap died half way: restore the good set
        else:
            shutil.rmtree(stale, ignore_errors=True)
    clean_stale(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.{_owner()}.", suffix=".tmp", dir=final.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; the result is an ordinary folder
    try:
        yield tmp
    except BaseException as exc:
        written = tree_bytes(tmp) if is_disk_full(exc) else 0
        shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(exc):
            raise disk_full_error(final.parent, max(written, tree_bytes(final)) or None) from None
        raise
    old = final.with_name(f"{final.name}.old-{uuid.uuid4().hex[:8]}")
    try:
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
    except BaseException:  # cleaned up and re-raised: the previous set goes back in place, no temporary is left
        if old.exists() and not final.exists():
            with contextlib.suppress(OSError):  # else the next call restores it (the stale ``.old-`` sets above)
                os.replace(old, final)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
