"""The local store: history per series and results per run, columnar and atomic.

Layout under the store root (default ``.capplan/store``)::

    history/<series-key>.parquet     one file per series (series_id, timestamp, value)
    history/<series-key>.json        its metadata (SeriesMeta) and pull state
    runs/<run-id>/                   one folder per run: report.json, forecasts.parquet,
                                     trials.parquet, replay.parquet, manifests/ ...
    runs/LATEST                      the id of the last complete run

``<series-key>`` is :func:`forecasting.keys.file_key` of the id: percent-encoded
(``train/vc6YE`` -> ``train%2Fvc6YE``), a leading dot encoded (``..`` ->
``%2E.``), long ids hashed; ids never escape the folder, never hide, and the
id itself is kept in ``<series-key>.json``. Every file is written
atomically (:mod:`capplan.atomic`); parallel writers of different series or
runs never touch the same file, and a reader always sees the last complete
version.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote, unquote

import pandas as pd

from capplan import atomic
from forecasting.keys import file_key
from forecasting.types import HISTORY_COLUMNS, SeriesMeta


def series_key(series_id: str) -> str:
    """File-name-safe, bounded key of a series id (:func:`forecasting.keys.file_key`)."""
    return file_key(series_id)


class Store:
    """A store rooted at ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

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
        """One series' history, metadata and pull state. Raises KeyError if absent."""
        p, doc_p = self._paths(series_id)
        if not p.exists():
            raise KeyError(series_id)
        frame = pd.read_parquet(p)
        doc = json.loads(doc_p.read_text()) if doc_p.exists() else {}
        return frame, SeriesMeta(**doc.get("meta", {})), doc.get("state", {})

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
        atomic.write_text(self.runs_dir / "LATEST", run_id + "\n")

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
