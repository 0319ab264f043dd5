"""Atomic writes: a failed run never leaves a half-written file or folder in
place of a good one (DESIGN.md "Store").

* :func:`write_bytes` / :func:`write_parquet` write a temporary file in the
  same folder, ``fsync`` it and ``os.replace`` it onto the target (atomic on
  POSIX within one filesystem).
* :func:`replace_dir` builds a folder under a temporary name and swaps it in:
  the old folder is renamed aside, the new one renamed into place, and the old
  one deleted. Readers see either the old or the new set, never a mix; if the
  process dies between the two renames, the previous set is still there
  under ``<name>.old-*`` and is restored by the next call.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m

import pandas as pd


def _parent_made(path: str | os.PathLike) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


@contextlib.contextmanager
def _renamed_onto(target: Path, tmp: Path):
    """Yield ``tmp`` (a file beside ``target``) to be written; then ``fsync`` it and
    rename it onto ``target``. On an exception ``tmp`` is removed and ``target``
    is untouched."""
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Atomically write ``data`` to ``path`` (parents are created)."""
    p = _parent_made(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; the result is an ordinary file
    with _renamed_onto(p, Path(tmp)), os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return p


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically write UTF-8 text."""
    return write_bytes(path, text.encode("utf-8"))


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame) -> Path:
    """Atomically write a frame as Parquet (zstd)."""
    p = _parent_made(path)
    with _renamed_onto(p, p.with_name(f".{p.name}.{uuid.uuid4().hex}.tmp")) as tmp:
        frame.to_parquet(tmp, index=False, compression="zstd")
    return p


@contextlib.contextmanager
def replace_dir(final: str | os.PathLike):
    """Context manager yielding a temporary folder that replaces ``final`` on success.

    On an exception the temporary folder is removed and ``final`` is untouched.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f"{final.name}.old-*"):
        if not final.exists():
            os.replace(stale, final)  # a previous swap died half way: restore the good set
        else:
            shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; the result is an ordinary folder
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = final.with_name(f"{final.name}.old-{uuid.uuid4().hex[:8]}")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
