"""The local store: history per series and results per run, columnar and atomic.

Layout under the store root (default ``.capplan/store``)::

    history/<series-key>.parquet     one file per series (series_id, timestamp, value)
    history/<series-key>.json        its metadata (SeriesMeta) and pull state
    runs/<run-id>/                   one folder per run: report.json, forecasts.parquet,
                                     trials.parquet, replay.parquet, manifests/ ...
    runs/LATEST                      the id of the fleet's published run (capplan.store.runs)
    forecasts/<tier>/<key>/<series-key>.parquet
                                     one tier's plan forecast of one series (forecast contract),
                                     written by a scheduled forecast job for run key ``<key>``
    forecasts/<tier>/<key>/<series-key>.backtest.parquet
                                     its rolling-origin forecasts over the tuning and evaluation
                                     windows (what the policy search replays)
    forecasts/<tier>/<key>/<series-key>.json
                                     fallbacks, warnings, data range, versions
    forecasts/<tier>/<key>/_manifest.json
                                     series ok / missing in that run (written last)
    forecasts/<tier>/LATEST          the last key whose manifest is complete
    cache/rolling/<model>/<fp>.parquet|.json
                                     one refit block's rolling-origin forecasts, keyed by the
                                     fingerprint of its inputs (capplan.run.cache)
    cache/models/<model>/<fp>/       one refit block's fitted model (Forecaster.save) and _entry.json
    cache/search/<fp>.parquet|.json  one series' search outcome (evaluation replay + JSON document)

``<series-key>`` is :func:`forecasting.keys.file_key` of the id: percent-encoded
(``train/vc6YE`` -> ``train%2Fvc6YE``), a leading dot encoded (``..`` ->
``%2E.``), long ids hashed; ids never escape the folder, never hide, and the
id itself is kept in ``<series-key>.json``. Every file is written
atomically (:mod:`capplan.store.atomic`); parallel writers of different series or
runs never touch the same file, and a reader always sees the last complete
version.

With an object-store root (``s3://``, ``gs://``, ``file://``; :mod:`capplan.store.remote`) everything
above lives there: the store works in a private local folder (:func:`capplan.store.remote.work_dir`,
mode 0700, removed at exit) filled from the object store when opened; a series' history and a tier
forecast are uploaded as soon as written, and history, cache and forecasts changed by a run are uploaded
before its run folder and ``runs/LATEST`` (:meth:`Store.sync`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from urllib.parse import quote, unquote

import pandas as pd

from capplan.errors import InputError
from capplan.report import jsonout
from capplan.store import atomic, remote
from capplan.store.retention import RetentionConfig, prune_runs
from forecasting.keys import file_key
from forecasting.types import HISTORY_COLUMNS, SeriesMeta


def series_key(series_id: str) -> str:
    """File-name-safe, bounded key of a series id (:func:`forecasting.keys.file_key`)."""
    return file_key(series_id)


class Store:
    """A store rooted at ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike):
        remote.check_store_url(root)  # no secret in a URL, no memory:// (InputError)
        self.remote = str(root) if remote.is_url(root) else None
        self._seen: dict[str, tuple[int, int]] = {}
        if self.remote:  # a private working folder, filled from the object store (history, cache, forecasts)
            self.root = remote.local_mirror(self.remote)
            self._seen = remote.pull_tree(self.remote, self.root)
        else:
            self.root = Path(root)

    def sync(self, only: list[Path] | None = None) -> None:
        """On an object-store root, upload what changed in the working folder since it was filled
        (history, cache, forecasts; :func:`capplan.store.remote.push_tree`), and remove there what was
        removed here; with ``only``, just those files. Nothing to do for a local root."""
        if self.remote:
            rels = None if only is None else [Path(p).relative_to(self.root).as_posix() for p in only]
            self._seen = remote.push_tree(self.remote, self.root, self._seen, only=rels)

    def check_writable(self) -> None:
        """Fail now, not after hours of forecasting, when the store cannot be written: the root is
        created if missing and a temporary file is made and removed in it (its working folder for an
        object-store root).

        Raises InputError naming the store and the cause (read-only file system, permission denied,
        a file in the way)."""
        import tempfile

        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".write-check-", suffix=".tmp", dir=self.root)
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise InputError(f"store {self.root}: cannot write there ({exc.strerror or exc}); name a writable "
                             "folder with --store or store: in the config") from None

    # -- history ----------------------------------------------------------
    @property
    def history_dir(self) -> Path:
        return self.root / "history"

    def write_series(self, series_id: str, frame: pd.DataFrame, meta: SeriesMeta, state: dict | None = None) -> None:
        """Replace one series' history and metadata (atomic per file; data first, then metadata)."""
        key = series_key(series_id)
        f = frame[HISTORY_COLUMNS].sort_values("timestamp").reset_index(drop=True)
        atomic.write_parquet(self.history_dir / f"{key}.parquet", f)
        doc = {"series_id": series_id, "meta": meta.model_dump(), "state": state or {},
               "rows": int(len(f)),
               "last_timestamp": f["timestamp"].max().isoformat() if len(f) else None}
        atomic.write_text(self.history_dir / f"{key}.json", json.dumps(doc, indent=2, default=str))
        self.sync([self.history_dir / f"{key}.parquet", self.history_dir / f"{key}.json"])  # data, then metadata

    def series_ids(self) -> list[str]:
        """Every stored series id: from ``<key>.json`` (hashed keys do not decode),
        else the decoded file name. Hidden-looking names (``.team.parquet`` of
        older stores) are listed too; temporaries end in ``.tmp``, not ``.parquet``."""
        if not self.history_dir.exists():
            return []
        ids = []
        for p in self.history_dir.glob("*.parquet"):
            doc = p.with_suffix(".json")
            sid = None
            if doc.exists():
                try:
                    sid = json.loads(doc.read_text()).get("series_id")
                except ValueError:
                    sid = None
            ids.append(sid if isinstance(sid, str) else unquote(p.stem))
        return sorted(ids)

    def _paths(self, series_id: str) -> tuple[Path, Path]:
        """(parquet, json) of a series; an older store's plain percent-encoded name
        (``.team``) when only that exists."""
        for key in (series_key(series_id), quote(series_id, safe="")):
            p = self.history_dir / f"{key}.parquet"
            if p.exists():
                return p, p.with_suffix(".json")
        key = series_key(series_id)
        return self.history_dir / f"{key}.parquet", self.history_dir / f"{key}.json"

    def read_series(self, series_id: str) -> tuple[pd.DataFrame, SeriesMeta, dict]:
        """One series' history, metadata and pull state.

        Raises KeyError if absent; InputError naming the file when its history (parquet) or
        document (JSON) cannot be read (a damaged store: remove the two files and run
        ``capplan ingest`` again)."""
        from pydantic import ValidationError

        p, doc_p = self._paths(series_id)
        if not p.exists():
            raise KeyError(series_id)
        redo = f"remove it and its .json/.parquet twin, then run `capplan ingest` again for {series_id!r}"
        try:
            frame = pd.read_parquet(p)
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(f"store {p}: cannot read the stored history ({type(exc).__name__}); {redo}") from None
        try:
            doc = json.loads(doc_p.read_text()) if doc_p.exists() else {}
            meta = SeriesMeta(**doc.get("meta", {}))
        except (OSError, ValueError, AttributeError, TypeError) as exc:  # ValidationError is a ValueError
            what = "invalid metadata" if isinstance(exc, ValidationError) else type(exc).__name__
            raise InputError(f"store {doc_p}: cannot read the series document ({what}); {redo}") from None
        return frame, meta, doc.get("state", {})

    def has_document(self, series_id: str) -> bool:
        """Whether the series' JSON document (metadata and pull state) is stored beside its history."""
        return self._paths(series_id)[1].exists()

    def read_history(self, series_ids: list[str] | None = None) -> tuple[pd.DataFrame, dict[str, SeriesMeta]]:
        """History frame and metadata of the given (default: all) series."""
        frames, meta = [], {}
        for sid in series_ids or self.series_ids():
            f, m, _ = self.read_series(sid)
            frames.append(f)
            meta[sid] = m
        if not frames:
            return pd.DataFrame({c: [] for c in HISTORY_COLUMNS}), meta
        return pd.concat(frames, ignore_index=True), meta

    def last_timestamp(self, series_id: str) -> pd.Timestamp | None:
        """Last stored timestamp of a series (None if not stored)."""
        p = self._paths(series_id)[1]
        if not p.exists():
            return None
        ts = json.loads(p.read_text()).get("last_timestamp")
        return pd.Timestamp(ts) if ts else None

    # -- runs ---------------------------------------------------------------
    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def mark_latest(self, run_id: str) -> None:
        """Make ``run_id`` the published run: ``runs/LATEST`` (one atomic file). With an object-store
        root, the run's files are uploaded first and ``LATEST`` there is written last
        (:func:`capplan.store.remote.publish_run`)."""
        if self.remote:
            self.sync()  # history and cache first: the published run's inputs are kept with it
            remote.publish_run(self.run_dir(run_id), self.remote, run_id)
        atomic.write_text(self.runs_dir / "LATEST", run_id + "\n")

    def keep_run(self, run_id: str) -> None:
        """Keep a run without publishing it: on an object-store root, upload it (and what changed in
        history and cache) leaving ``LATEST`` where it is; nothing to do for a local root."""
        if self.remote:
            self.sync()
            remote.publish_run(self.run_dir(run_id), self.remote, run_id, publish=False)

    def prune_runs(self, cfg: RetentionConfig) -> list[str]:
        """Apply the retention ``cfg`` (:mod:`capplan.store.retention`) to the runs, never the one LATEST
        names; on an object-store root, there as well. Returns the removed ids."""
        gone = prune_runs(self.runs_dir, self.latest_run(), cfg)
        if self.remote:
            gone += remote.prune_remote_runs(self.remote, cfg.keep_runs, cfg.keep_days)
            self.sync()  # and what the run changed or pruned in history and cache since
        return sorted(set(gone))

    def latest_run(self) -> str | None:
        """Id of the last complete run, or None."""
        p = self.runs_dir / "LATEST"
        if not p.exists():
            return None
        rid = p.read_text().strip()
        return rid if (self.runs_dir / rid).is_dir() else None

    def list_runs(self) -> list[str]:
        if not self.runs_dir.exists():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if p.is_dir() and not p.name.startswith("."))

    def save_run(self, folder: str | os.PathLike, run_id: str, publish: bool = True) -> Path:
        """Copy a finished output folder into ``runs/<run_id>/`` (swapped in whole)
        and, with ``publish``, mark it LATEST. Returns the run folder."""
        with atomic.replace_dir(self.run_dir(run_id)) as tmp:
            shutil.copytree(folder, tmp, dirs_exist_ok=True)
        if publish:
            self.mark_latest(run_id)
        else:
            self.keep_run(run_id)
        return self.run_dir(run_id)

    def copy_run(self, run_id: str, out: str | os.PathLike) -> Path:
        """Copy ``runs/<run_id>/`` to ``out`` (swapped in whole). Returns ``out``."""
        with atomic.replace_dir(out) as tmp:
            shutil.copytree(self.run_dir(run_id), tmp, dirs_exist_ok=True)
        return Path(out)

    # -- per-tier forecasts (scheduled jobs) ---------------------------------------------
    def forecast_dir(self, tier: str, key: str) -> Path:
        """``forecasts/<tier>/<key>/``."""
        return self.root / "forecasts" / tier / key

    def write_tier_forecast(self, tier: str, key: str, series_id: str, rolling: pd.DataFrame, final: pd.DataFrame,
                            doc: dict) -> None:
        """Write one series' forecasts of one tier (rolling, plan, then the JSON document), each atomically."""
        d, k = self.forecast_dir(tier, key), series_key(series_id)
        atomic.write_parquet(d / f"{k}.backtest.parquet", rolling)
        atomic.write_parquet(d / f"{k}.parquet", final)
        atomic.write_text(d / f"{k}.json", jsonout.dumps(doc, indent=2) + "\n")
        self.sync([d / f"{k}.backtest.parquet", d / f"{k}.parquet", d / f"{k}.json"])

    def read_tier_forecast(self, tier: str, key: str, series_id: str) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
        """``(rolling, plan forecast, document)`` of one series written by :meth:`write_tier_forecast`.

        Raises FileNotFoundError when that series has no forecast in that run.
        """
        d, k = self.forecast_dir(tier, key), series_key(series_id)
        return (pd.read_parquet(d / f"{k}.backtest.parquet"), pd.read_parquet(d / f"{k}.parquet"),
                json.loads((d / f"{k}.json").read_text()))

    def record_forecasts(self, tier: str, key: str, ok: list[str], expected: list[str]) -> dict:
        """Close a tier's run: remove files of series not in ``ok``, write
        ``_manifest.json`` (series ok / missing) and point ``forecasts/<tier>/LATEST`` at ``key``.
        Returns the manifest."""
        d = self.forecast_dir(tier, key)
        if self.remote:  # the other tasks' series (written from other pods) first
            self._seen.update(remote.pull_tree(self.remote, self.root, (d.relative_to(self.root).as_posix(),)))
        d.mkdir(parents=True, exist_ok=True)
        ok = sorted(set(ok))
        keep = {series_key(s) for s in ok}
        for p in d.iterdir():
            stem = p.name.split(".")[0]
            if not p.name.startswith("_") and not p.name.startswith(".") and stem not in keep:
                p.unlink()
        doc = {"tier": tier, "logical_date": key, "ok": ok, "missing": sorted(set(expected) - set(ok)),
               "written_at": dt.datetime.now(dt.timezone.utc).isoformat()}
        atomic.write_text(d / "_manifest.json", jsonout.dumps(doc, indent=2) + "\n")
        atomic.write_text(d.parent / "LATEST", key + "\n")
        self.sync()  # the manifest, then LATEST, last
        return doc

    def latest_forecasts(self, tier: str) -> tuple[str, dict] | None:
        """``(key, manifest)`` of a tier's latest complete run, or None."""
        p = self.root / "forecasts" / tier / "LATEST"
        if not p.exists():
            return None
        key = p.read_text().strip()
        m = self.forecast_dir(tier, key) / "_manifest.json"
        if not m.exists():
            return None
        return key, json.loads(m.read_text())
