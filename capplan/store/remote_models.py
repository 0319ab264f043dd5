"""The model registry (:class:`forecasting.registry.ModelRegistry`) on an object store
(``models: s3://...``, ``gs://``, ``file://``; :mod:`capplan.store.remote`).

Models are written and read in a local working folder (:func:`capplan.store.remote.local_mirror` of the
URL, ``/models``) and kept in step with the store:

* **save**: the version is written locally (temporary folder, then renamed), then uploaded file by
  file with ``meta.json`` last; a version without ``meta.json`` on the store is incomplete and
  never downloaded (manifest last). Versions beyond ``keep`` are removed there too;
* **latest** / **load_fresh**: first download the complete versions of that tier and key that are
  not local yet (each into a temporary folder, renamed into place).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from capplan.store.remote import local_mirror, open_root
from forecasting.keys import file_key
from forecasting.registry import ModelRegistry


class RemoteModelRegistry(ModelRegistry):
    """A :class:`~forecasting.registry.ModelRegistry` mirrored to the object store at ``url``."""

    def __init__(self, url: str, keep: int | None = None):
        super().__init__(local_mirror(url) / "models", keep)
        self.url = url
        self.fs, self.base = open_root(url)

    def _remote_dir(self, tier: str, key: str) -> str:
        return f"{self.base}/{tier}/{file_key(key)}"

    def _pull(self, tier: str, key: str) -> None:
        rd = self._remote_dir(tier, key)
        try:
            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(rd, detail=False)]
        except FileNotFoundError:
            return
        local = self._dir(tier, key)
        for v in names:
            if v.startswith(".") or (local / v).is_dir() or not self.fs.exists(f"{rd}/{v}/meta.json"):
                continue
            local.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=local))
            try:
                for f in self.fs.ls(f"{rd}/{v}", detail=False):
                    self.fs.get_file(f, str(tmp / f.rstrip("/").rsplit("/", 1)[-1]))
                os.replace(tmp, local / v)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise

    def _push(self, tier: str, key: str, version: str) -> None:
        src, rd = self._dir(tier, key) / version, f"{self._remote_dir(tier, key)}/{version}"
        self.fs.makedirs(rd, exist_ok=True)
        files = sorted(p for p in src.iterdir() if p.is_file())
        for p in sorted(files, key=lambda p: p.name == "meta.json"):  # meta.json last
            self.fs.put_file(str(p), f"{rd}/{p.name}")

    def save(self, tier, key, files, data_range, series, scores=None, now=None) -> str:
        """:meth:`ModelRegistry.save`, then upload the version (``meta.json`` last)."""
        version = super().save(tier, key, files, data_range, series, scores, now)
        self._push(tier, key, version)
        return version

    def prune(self, tier: str, key: str, keep: int) -> list[str]:
        """:meth:`ModelRegistry.prune` locally and on the object store (the store's complete versions
        downloaded first: this working folder may hold only the ones saved here)."""
        self._pull(tier, key)
        old = super().prune(tier, key, keep)
        for v in old:
            p = f"{self._remote_dir(tier, key)}/{v}"
            if self.fs.exists(p):
                self.fs.rm(p, recursive=True)
        return old

    def latest(self, tier: str, key: str):
        """:meth:`ModelRegistry.latest` after downloading the store's complete versions."""
        self._pull(tier, key)
        return super().latest(tier, key)

    def scores_update(self, tier: str, key: str, version: str, scores: dict) -> None:
        """:meth:`ModelRegistry.scores_update`, then upload the version's ``meta.json``."""
        super().scores_update(tier, key, version, scores)
        self.fs.put_file(str(self._dir(tier, key) / version / "meta.json"),
                         f"{self._remote_dir(tier, key)}/{version}/meta.json")


__all__ = ["RemoteModelRegistry"]
