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

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import fsspec
from fsspec.core import url_to_fs

from capplan.errors import InputError
from capplan.store.retention import runs_to_prune


def is_url(root: str | os.PathLike) -> bool:
    """Whether ``root`` is a URL (``scheme://``) rather than a local path."""
    return "://" in str(root)


def redact_url(text: str) -> str:
    """``text`` with the user-info part of a URL (between ``scheme://`` and the last ``@`` of the
    authority and path, which a secret holding ``/`` or ``@`` cannot escape) replaced by ``***``, and a
    query string or fragment replaced by ``?***``: ``s3://KEY:SECRET@bucket/p`` -> ``s3://***@bucket/p``."""
    scheme, sep, rest = str(text).partition("://")
    if not sep:
        return str(text)
    cut = min([i for i in (rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    head, tail = rest[:cut], rest[cut:]
    if "@" in head:
        head = "***@" + head.rsplit("@", 1)[1]
    return f"{scheme}://{head}" + ("?***" if tail else "")


def check_store_url(root: str | os.PathLike, what: str = "store") -> str:
    """The one rule for URLs of what capplan keeps (``store:``, ``models:``, ``--store``, ``capplan serve``):
    a store URL must not carry a secret and must outlive the process. Returns ``root`` as given (a local
    path is returned unchecked).

    Raises InputError naming ``what`` and the URL with the secret part replaced by ``***``
    (:func:`redact_url`), never the secret itself, when the URL holds credentials (``user:password@``;
    they would show in errors, run summaries, report.json and logs: give them through the object store's
    environment, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` or ``GOOGLE_APPLICATION_CREDENTIALS``), a
    query string or fragment (where tokens hide), or the scheme ``memory://`` (fsspec's in-process file
    system: everything written there is gone when the process exits)."""
    text = str(root)
    if not is_url(text):
        return text
    scheme, _, rest = text.partition("://")
    shown = redact_url(text)
    if "@" in rest.split("?", 1)[0].split("#", 1)[0]:
        raise InputError(f"{what} {shown}: credentials in a URL are refused (they would be printed and logged); "
                         "give them through the object store's environment (AWS_ACCESS_KEY_ID and "
                         "AWS_SECRET_ACCESS_KEY, or GOOGLE_APPLICATION_CREDENTIALS) and name the URL without them")
    if "?" in rest or "#" in rest:
        raise InputError(f"{what} {shown}: a query string or fragment is refused in a store URL (tokens hide "
                         "there); give credentials through the object store's environment")
    if scheme.lower() == "memory":
        raise InputError(f"{what} {shown}: memory:// is refused: it keeps data only inside this process and "
                         "loses it when the process exits; name a folder, or an s3://, gs:// or file:// URL")
    return text


def open_root(root: str | os.PathLike) -> tuple[fsspec.AbstractFileSystem, str]:
    """``(file system, path inside it)`` of a store root (path or URL).

    Raises InputError naming the root when it breaks the URL rule (:func:`check_store_url`: credentials,
    a query string, ``memory://``) or its scheme has no fsspec implementation installed (e.g. ``s3://``
    without s3fs)."""
    text = check_store_url(root)
    try:
        fs, path = url_to_fs(text)
    except (ImportError, ValueError) as exc:
        raise InputError(f"store {text}: cannot open it ({redact_url(str(exc))}); for s3:// install capplan[s3], "
                         "for gs:// capplan[gcs]") from None
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


def work_dir(kind: str = "store") -> Path:
    """A new private local working folder for an object-store root: created by
    :func:`tempfile.mkdtemp` (mode 0700, a random name made with ``O_EXCL`` semantics, so a name or
    symlink another user planted is never followed) under ``CAPPLAN_WORKDIR`` (default: the system
    temporary folder), and removed when the process exits (everything kept is on the object store).
    Returns its path."""
    base = os.environ.get("CAPPLAN_WORKDIR") or None
    if base:
        Path(base).mkdir(parents=True, exist_ok=True, mode=0o700)
    d = Path(tempfile.mkdtemp(prefix=f"capplan-{kind}-", dir=base))
    atexit.register(shutil.rmtree, d, True)
    return d


def local_mirror(root: str) -> Path:
    """The local working folder of an object-store root (:func:`work_dir`); ``root`` must pass
    :func:`check_store_url`."""
    check_store_url(root)
    return work_dir()


#: what a store keeps besides runs/ (runs go up whole, manifest last: :func:`publish_run`)
KEPT = ("history", "cache", "forecasts")


def _skip(rel: str) -> bool:
    """Temporaries and hidden names (``.x.tmp``, ``.old-*``) never travel."""
    return any(part.startswith(".") or part.endswith(".tmp") for part in rel.split("/"))


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_size, st.st_mtime_ns


def pull_tree(root: str, local: str | os.PathLike, parts: tuple[str, ...] = KEPT) -> dict[str, tuple[int, int]]:
    """Download every file under ``<root>/<part>/`` of the object store into ``local/<part>/``
    (each written under a temporary name, then renamed). Returns ``{relative path: (size, mtime_ns)}``
    of the local copies, the snapshot :func:`push_tree` compares against."""
    fs, base = open_root(root)
    local = Path(local)
    seen: dict[str, tuple[int, int]] = {}
    for part in parts:
        try:
            found = fs.find(f"{base}/{part}")
        except FileNotFoundError:
            continue
        for rp in found:
            rel = rp[len(base) + 1:] if rp.startswith(base + "/") else rp.split(f"/{part}/", 1)[-1]
            if _skip(rel):
                continue
            dest = local / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.pull.tmp")
            fs.get_file(rp, str(tmp))
            os.replace(tmp, dest)
            seen[rel] = _stat(dest)
    return seen


def push_tree(root: str, local: str | os.PathLike, seen: dict[str, tuple[int, int]],
              parts: tuple[str, ...] = KEPT, only: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """Upload every file under ``local/<part>/`` that is new or changed since ``seen`` (size or
    mtime), manifests (``_manifest.json``) and then ``LATEST`` files last, and remove from the object
    store the files of ``seen`` that are gone locally (pruned cache entries, dropped forecasts).
    With ``only`` (relative paths), just those files are uploaded and nothing is removed.
    Returns the new snapshot."""
    fs, base = open_root(root)
    local = Path(local)
    now: dict[str, tuple[int, int]] = {}
    if only is not None:
        now = {**seen, **{r: _stat(local / r) for r in only if (local / r).is_file()}}
    for part in parts if only is None else ():
        d = local / part
        if d.is_dir():
            for p in d.rglob("*"):
                rel = p.relative_to(local).as_posix()
                if p.is_file() and not _skip(rel):
                    now[rel] = _stat(p)
    todo = sorted((r for r in now if seen.get(r) != now[r]),
                  key=lambda r: (r.endswith("/LATEST"), r.endswith("/_manifest.json"), r))
    for rel in todo:
        fs.makedirs(f"{base}/{rel}".rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(local / rel), f"{base}/{rel}")
    for rel in sorted(set(seen) - set(now)):
        if fs.exists(f"{base}/{rel}"):
            fs.rm(f"{base}/{rel}")
    return now


__all__ = ["check_store_url", "redact_url", "open_root", "publish_run", "latest_run", "is_url", "prune_remote_runs",
           "local_mirror", "work_dir", "pull_tree", "push_tree", "KEPT"]
