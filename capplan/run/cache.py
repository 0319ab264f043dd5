"""Reuse of expensive per-series work between runs on the same store (the Airflow hourly case).

Two kinds of entries live under the store (layout in :mod:`capplan.store.local`):

* **rolling blocks** — one tier's rolling-origin forecasts for one *refit block*
  (the origins that share one fit, :func:`forecasting.backtest.rolling_forecasts`),
  keyed by :func:`fingerprint` of the tier, its options, the seed, the block's
  origins per series, the training data up to the block's fit origin, the data up
  to its last origin, the series' metadata, the installed library versions and a
  hash of the ``forecasting`` package's source. An hourly rerun recomputes only the
  blocks whose origins or data changed (for a week-long block that has a new origin:
  that block), and every block again when the code or a library changes.
* **block models** — the fit of one refit block (:meth:`forecasting.tiers.base.Forecaster.save`,
  JSON and ``.keras`` only), keyed by the tier, options, seed, training data, series
  metadata and code: when a block gains an origin (an hour of new data) but its
  training data is unchanged, the model is loaded instead of refitted and predicts
  every origin of the block, exactly as a fresh fit would.
* **searched policies** (:mod:`capplan.run.search_cache`) — one series' whole
  :class:`optimizer.search.tuning.SearchOutcome`, keyed by the search task (tuning and evaluation replay inputs,
  settings, seed, kind, notes) plus the ``optimizer`` and ``forecasting`` sources and library versions. Identical inputs
  give identical replays, so a reused outcome is the outcome the run would compute.
* **tuned policies** — the tuning half of a search (:class:`optimizer.search.tuning.Tuned`:
  the scan, the Gaussian-process search, the refinement rule and the rivals),
  keyed by :func:`optimizer.search.tuning.tune_key_parts` (the kind, the tuning window's
  replay input, the settings and the seed) and the same code hash. The tuning
  window starts and ends at midnight UTC, so an hour of new data changes only the
  evaluation window: the tuned policy is taken from here and only the evaluation
  replays run (:func:`optimizer.search.tuning.evaluate_policy`), which gives the outcome a
  full search would. Any change of the tuning window's data, forecasts or settings
  means a fresh search.

Every entry is a parquet file plus a JSON document written after it (atomically, :mod:`capplan.store.atomic`; no pickle)
that records the key and the parquet file's SHA-256; a tuned policy is a JSON document alone, recording its payload's
SHA-256. An entry whose document or file cannot be read, or whose file does not match its hash, is *not trusted*: it is
recomputed and the series gets a warning saying so. Entries are read and written by whichever process runs the series
(with a remote Dask cluster the store must be a path every worker can reach, as the model registry already must be).
Entries unused for :data:`KEEP_DAYS` days are removed by :func:`prune`.

Nothing here changes a figure: a run with a cold cache and a run with a warm
one give the same report (``tests/capplan/run/test_cache.py``), apart from timings, ids and
the ``reused`` records that say what was taken from the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from capplan.report.model import versions
from capplan.store import atomic
from forecasting.tiers.base import ModelFileError

KEEP_DAYS = 2  # entries not used for this long are removed after a run (prune): an hourly run
# supersedes the last block of every model each hour, and those entries are never read again
CODE_PACKAGES = {"rolling": ("forecasting",), "search": ("forecasting", "optimizer")}


# -- fingerprints ----------------------------------------------------------------------
def _feed(h, x: Any) -> None:
    """Feed ``x`` into hash ``h`` with its type, so that ``1`` and ``"1"`` differ.

    Raises TypeError for a type it does not know (never a silent default)."""
    if x is None:
        h.update(b"N;")
    elif isinstance(x, (bool, int, float, str, np.generic)):
        h.update(f"{type(x).__name__}:{x!r};".encode())
    elif isinstance(x, pd.Timestamp):
        h.update(f"ts:{x.isoformat()};".encode())
    elif isinstance(x, pd.Timedelta):
        h.update(f"td:{x.value};".encode())
    elif isinstance(x, pd.DataFrame):
        h.update(f"df:{list(map(str, x.columns))}:{list(map(str, x.dtypes))}:{len(x)};".encode())
        if len(x):
            h.update(pd.util.hash_pandas_object(x, index=False).to_numpy().tobytes())
    elif isinstance(x, (pd.Series, pd.Index)):
        h.update(f"s:{x.dtype}:{len(x)};".encode())
        if len(x):
            s = pd.Series(x) if isinstance(x, pd.Index) else x
            h.update(pd.util.hash_pandas_object(s, index=False).to_numpy().tobytes())
    elif isinstance(x, np.ndarray):
        if x.dtype == object:
            h.update(f"oa:{x.shape};".encode())
            for v in x.ravel():
                _feed(h, v)
        else:
            h.update(f"a:{x.dtype.str}:{x.shape};".encode())
            h.update(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, BaseModel):
        h.update(f"m:{type(x).__name__};".encode())
        _feed(h, x.model_dump(mode="json"))
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        h.update(f"dc:{type(x).__name__};".encode())
        for f in dataclasses.fields(x):
            h.update(f.name.encode())
            _feed(h, getattr(x, f.name))
    elif isinstance(x, dict):
        h.update(f"d:{len(x)};".encode())
        for k in sorted(x, key=repr):
            _feed(h, k)
            _feed(h, x[k])
    elif isinstance(x, (list, tuple)):
        h.update(f"l:{len(x)};".encode())
        for v in x:
            _feed(h, v)
    else:
        raise TypeError(f"cannot fingerprint a {type(x).__name__}")


def fingerprint(*parts: Any) -> str:
    """SHA-256 (hex) of ``parts``: plain values, frames (``pandas.util.hash_pandas_object``
    of every row and the columns and dtypes), arrays (bytes, dtype, shape), pydantic
    models (JSON dump), dataclasses (every field), dicts and lists, recursively.

    Raises TypeError for anything else."""
    h = hashlib.sha256()
    _feed(h, parts)
    return h.hexdigest()


@lru_cache(maxsize=None)
def code_fingerprint(kind: str) -> str:
    """Hash of the sources of the packages :data:`CODE_PACKAGES` names for ``kind``
    (``rolling`` or ``search``) and of the installed versions of the libraries that
    shape the numbers (:data:`capplan.report.model.VERSIONED_LIBS`): any edit or upgrade
    invalidates every entry of that kind."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(json.dumps(versions(), sort_keys=True).encode())
    for pkg in CODE_PACKAGES[kind]:
        for p in sorted((root / pkg).rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


# -- entries ---------------------------------------------------------------------------
def _plain(o):
    """numpy scalars and arrays as plain JSON values (json.dumps' ``default``)."""
    if isinstance(o, (np.generic, np.ndarray)):
        return o.tolist()
    if isinstance(o, (pd.Timestamp, pd.Timedelta)):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _payload_sha(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class Entries:
    """Parquet + JSON entries in one folder, keyed by fingerprint (see module docstring)."""

    def __init__(self, folder: Path):
        self.dir = Path(folder)

    def read(self, key: str) -> tuple[pd.DataFrame | None, dict] | None | str:
        """``(frame, document)`` (frame None for a document-only entry); None when there is
        no entry; a reason string when the entry exists but cannot be trusted."""
        doc_p, pq = self.dir / f"{key}.json", self.dir / f"{key}.parquet"
        if not doc_p.exists():
            return None
        try:
            doc = json.loads(doc_p.read_text())
            if doc.get("key") != key:
                return f"its document names key {str(doc.get('key'))[:12]}"
            if "payload_sha256" in doc:  # a document-only entry
                if _payload_sha(doc.get("payload")) != doc["payload_sha256"]:
                    return "its payload does not match the recorded SHA-256"
                frame = None
            elif _sha(pq) != doc.get("sha256"):
                return "its data file does not match the recorded SHA-256"
            else:
                frame = pd.read_parquet(pq)
        except (OSError, ValueError) as exc:  # unreadable file: recomputed, and the series is told
            return f"{type(exc).__name__}: {exc}"
        now = time.time()
        try:
            os.utime(doc_p, (now, now))  # last use, for prune
        except OSError:
            pass
        return frame, doc

    def write(self, key: str, frame: pd.DataFrame, doc: dict) -> None:
        """The frame first, then the document holding its hash (a reader never trusts a half entry)."""
        pq = atomic.write_parquet(self.dir / f"{key}.parquet", frame)
        atomic.write_text(self.dir / f"{key}.json", json.dumps({**doc, "key": key, "sha256": _sha(pq)},
                                                               default=_plain) + "\n")

    def write_doc(self, key: str, payload: dict) -> None:
        """A document-only entry: ``payload`` (plain JSON values) and its SHA-256."""
        payload = json.loads(json.dumps(payload, default=_plain))  # what a reader will see
        atomic.write_text(self.dir / f"{key}.json", json.dumps(
            {"key": key, "payload": payload, "payload_sha256": _payload_sha(payload)}) + "\n")


def _note(notes: dict[str, list[str]], sids, what: str, reason: str) -> None:
    for s in sids:
        notes.setdefault(s, []).append(f"cache: {what} entry not trusted ({reason}); recomputed")


class RollingCache:
    """Rolling-origin forecasts per refit block of one tier (the ``cache`` argument of
    :func:`forecasting.backtest.rolling_forecasts`).

    ``stats``: series_id -> ``{"reused": blocks, "computed": blocks, "fit_reused": blocks}``
    (``fit_reused``: computed blocks that predicted with their stored fit);
    ``notes``: series_id -> warnings about entries that were not trusted.
    """

    def __init__(self, root: str | os.PathLike, name: str):
        self.name = name
        self.entries = Entries(Path(root) / "cache" / "rolling" / name)
        self.stats: dict[str, dict[str, int]] = {}
        self.notes: dict[str, list[str]] = {}

    def key(self, options: dict, seed: int, cap_leads: bool, origins: dict[str, list[pd.Timestamp]],
            train: pd.DataFrame, context: pd.DataFrame, meta: dict) -> str:
        """Fingerprint of one block: ``train`` = the data the block's model is fitted on,
        ``context`` = every series' data up to its last origin, ``meta`` = SeriesMeta per series."""
        return fingerprint("rolling", self.name, options, seed, cap_leads, origins, train, context,
                           {s: meta[s] for s in sorted(origins) if s in meta}, code_fingerprint("rolling"))

    def _count(self, sids, what: str) -> None:
        for s in sids:
            st = self.stats.setdefault(s, {"reused": 0, "computed": 0, "fit_reused": 0})
            st[what] += 1

    def get(self, key: str, sids: list[str]):
        """``(forecasts, fallbacks, warnings)`` of a stored block, or None (then compute and :meth:`put`)."""
        got = self.entries.read(key)
        if isinstance(got, str):
            _note(self.notes, sids, f"rolling {self.name}", got)
            got = None
        if got is None:
            self._count(sids, "computed")
            return None
        frame, doc = got
        self._count(sids, "reused")
        return frame, doc.get("fallbacks", {}), doc.get("warnings", {})

    def put(self, key: str, forecasts: pd.DataFrame, fallbacks: dict, warnings: dict) -> None:
        self.entries.write(key, forecasts.reset_index(drop=True),
                           {"tier": self.name, "fallbacks": fallbacks, "warnings": warnings})

    # fitted block models: a block with a new origin but the same training data is not refitted
    def model_key(self, options: dict, seed: int, train: pd.DataFrame, meta: dict) -> str:
        """Fingerprint of one block's fit: the tier, options, seed, training data, the
        metadata of its series and the code (a fit depends on nothing else)."""
        sids = sorted(train["series_id"].unique()) if len(train) else []
        return fingerprint("model", self.name, options, seed, train, {s: meta[s] for s in sids if s in meta},
                           code_fingerprint("rolling"))

    def load_model(self, key: str, model, sids: list[str]):
        """``model`` (a fresh forecaster of this tier) with the stored fit of block ``key``
        (:meth:`forecasting.tiers.base.Forecaster.load`) and the fit's fallbacks and
        warnings, or None when there is none or it cannot be trusted (noted)."""
        d = self.entries.dir.parent.parent / "models" / self.name / key
        doc_p = d / "_entry.json"
        if not doc_p.exists():
            return None
        try:
            doc = json.loads(doc_p.read_text())
            bad = [n for n, h in doc["sha256"].items() if _sha(d / n) != h]
            if bad or doc.get("key") != key:
                raise ModelFileError(f"{', '.join(bad) or '_entry.json'} does not match its record")
            model.load(d)
        except (OSError, ValueError, KeyError, ModelFileError) as exc:
            _note(self.notes, sids, f"{self.name} model", f"{type(exc).__name__}: {exc}")
            return None
        model.fallbacks, model.warnings = dict(doc["fallbacks"]), {k: list(v) for k, v in doc["warnings"].items()}
        now = time.time()
        os.utime(doc_p, (now, now))
        self._count(sids, "fit_reused")
        return model

    def save_model(self, key: str, model) -> None:
        """Store a block's freshly fitted ``model`` (before it predicts: its fallbacks and
        warnings are the fit's) when it holds a fit (:meth:`Forecaster.fitted_series`)."""
        if not model.fitted_series():
            return
        with atomic.replace_dir(self.entries.dir.parent.parent / "models" / self.name / key) as tmp:
            model.save(tmp)
            files = {p.name: _sha(p) for p in Path(tmp).iterdir() if p.is_file()}
            (Path(tmp) / "_entry.json").write_text(json.dumps(
                {"key": key, "sha256": files, "fallbacks": model.fallbacks, "warnings": model.warnings},
                default=_plain))



def prune(root: str | os.PathLike, keep_days: float = KEEP_DAYS) -> int:
    """Remove cache entries under ``root/cache`` last used more than ``keep_days`` ago:
    rolling, search and tuning entries (document and data file), block model folders (whole).
    Returns how many entries went."""
    base = Path(root) / "cache"
    if not base.exists():
        return 0
    cutoff = time.time() - keep_days * 86400
    gone = 0
    for d in (base / "models").glob("*/*"):
        doc = d / "_entry.json"
        if d.is_dir() and (not doc.exists() or doc.stat().st_mtime < cutoff) and not d.name.startswith("."):
            shutil.rmtree(d, ignore_errors=True)
            gone += 1
    for kind in ("rolling", "search", "tuning"):
        for doc in (base / kind).rglob("*.json"):
            try:
                if doc.stat().st_mtime < cutoff:
                    doc.unlink()
                    doc.with_suffix(".parquet").unlink(missing_ok=True)
                    gone += 1
            except FileNotFoundError:
                continue
    return gone
