"""Stores on object storage: ``store:`` and ``models:`` as ``s3://``, ``gs://`` or ``file://``
URLs through fsspec (a plain path is the local file system).

Object stores have no atomic rename of a folder, so a run is published **manifest last**
(:func:`publish_run`): every file of the run goes up first, then ``runs/LATEST``, the one small
object readers start from (:mod:`capplan.serve.plan`); a run killed while uploading leaves
``LATEST`` at the previous run, and its partial folder is never named by it. A single object's
PUT is atomic on S3 and GCS, so ``LATEST`` itself is never half-written. For a local path, the
folder is written under a temporary name and renamed (:mod:`capplan.store.atomic`).

``s3://`` needs ``s3fs`` and ``gs://`` ``gcsfs`` (extras ``capplan[s3]``, ``capplan[gcs]``);
credentials come from their usual environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``; ``GOOGLE_APPLICATION_CREDENTIALS``), never from capplan.yaml, and TLS is
verified by default.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import fsspec
from fsspec.core import url_to_fs

from capplan.errors import InputError
from capplan.store.retention import runs_to_prune


def is_url(root: str | os.PathLike) -> bool:
    """Whether ``root`` is a URL (``scheme://``) rather than a local path."""
    return "://" in str(root)


def open_root(root: str | os.PathLike) -> tuple[fsspec.AbstractFileSystem, str]:
    """``(file system, path inside it)`` of a store root (path or URL).

    Raises InputError naming the root when its scheme has no fsspec implementation installed
    (e.g. ``s3://`` without s3fs)."""
    text = str(root)
    try:
        fs, path = url_to_fs(text)
    except (ImportError, ValueError) as exc:
        raise InputError(f"store {text}: cannot open it ({exc}); for s3:// install capplan[s3], for gs:// "
                         "capplan[gcs]") from None
    return fs, path.rstrip("/")


def publish_run(local_dir: str | os.PathLike, root: str, run_id: str, publish: bool = True) -> str:
    """Upload the finished run folder ``local_dir`` to ``<root>/runs/<run_id>/`` and then, with
    ``publish``, write ``<root>/runs/LATEST`` (manifest last). Returns the run's path in the store."""
    fs, base = open_root(root)
    dest = f"{base}/runs/{run_id}"
    src = Path(local_dir)
    for p in sorted(src.rglob("*")):
        if p.is_file():
            target = f"{dest}/{p.relative_to(src).as_posix()}"
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(p), target)
    if publish:
        fs.pipe_file(f"{base}/runs/LATEST", (run_id + "\n").encode())
    return dest


def latest_run(root: str) -> str | None:
    """The id ``<root>/runs/LATEST`` names, or None."""
    fs, base = open_root(root)
    try:
        return fs.cat_file(f"{base}/runs/LATEST").decode().strip() or None
    except FileNotFoundError:
        return None


def prune_remote_runs(root: str, keep_runs: int, keep_days: float) -> list[str]:
    """Apply :func:`capplan.store.retention.runs_to_prune` to ``<root>/runs/`` on the object store
    (never the run ``LATEST`` names). Returns the removed ids."""
    fs, base = open_root(root)
    try:
        ids = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(f"{base}/runs", detail=False)]
    except FileNotFoundError:
        return []
    ids = [i for i in ids if i != "LATEST" and not i.startswith(".")]
    gone = runs_to_prune(ids, latest_run(root), keep_runs, keep_days)
    for r in gone:
        fs.rm(f"{base}/runs/{r}", recursive=True)
    return gone


def local_mirror(root: str) -> Path:
    """The local working folder of an object-store root: history, caches and runs are written here,
    and published runs are uploaded (:func:`publish_run`). ``CAPPLAN_WORKDIR`` (default: the system
    temporary folder) / ``capplan-store-<12 hex digits of the URL's SHA-256>``."""
    base = Path(os.environ.get("CAPPLAN_WORKDIR") or tempfile.gettempdir())
    return base / f"capplan-store-{hashlib.sha256(root.encode()).hexdigest()[:12]}"


__all__ = ["open_root", "publish_run", "latest_run", "is_url", "prune_remote_runs", "local_mirror"]
