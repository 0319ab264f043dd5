"""A full disk or an exceeded quota (``ENOSPC``, ``EDQUOT``) as one clear line: the folder,
the space needed and the space free (:class:`DiskFullError`, an InputError: CLI exit 2).

Standard library only, so the CLI can map such an error without loading pandas.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

from capplan.errors import InputError

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL_TEXT = ("No space left on device", "Disk quota exceeded")


class DiskFullError(InputError):
    """No space left (``ENOSPC``) or disk quota exceeded (``EDQUOT``) while writing; the
    message names the folder, the space needed and the space free."""


def is_disk_full(exc: BaseException | None) -> bool:
    """True when ``exc``, or an exception it was raised from, is ENOSPC or EDQUOT (also as
    the text of a library's own I/O error, e.g. Arrow's, which carries no errno)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        if any(t in str(exc)[:2000] for t in _DISK_FULL_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def tree_bytes(p: Path) -> int:
    """Bytes in the file or folder ``p`` (0 when it is absent)."""
    if p.is_file():
        return p.stat().st_size
    total = 0
    for f in p.rglob("*") if p.is_dir() else ():
        with contextlib.suppress(OSError):
            total += f.lstat().st_size
    return total


def disk_full_error(folder: str | os.PathLike, needed: int | None) -> DiskFullError:
    """The one-line :class:`DiskFullError` for a write into ``folder`` of about ``needed``
    bytes (None: unknown); the free space is read from the folder's file system."""
    folder = Path(folder)
    try:
        free = f"{_mib(shutil.disk_usage(folder).free)} free"
    except OSError:
        free = "free space unknown"
    need = f"about {_mib(needed)} needed, " if needed else ""
    return DiskFullError(f"no space left (or disk quota exceeded) writing to {folder}: {need}{free}; "
                         "free some space or write elsewhere (the previous files there are unchanged)")
