"""Model registry: fitted models per series and tier, versioned, in safe formats only.

Layout under the root (default ``models/``)::

    <tier>/<series-key>/<version>/model.json     Prophet (prophet.serialize) or ETS parameters
    daily/_global/<version>/model.keras          the global LSTM (Keras format, safe_mode load)
    .../<version>/meta.json                      fitted_at, data range, library versions, scores, series

``<version>`` is the fit time in UTC (``YYYYmmddTHHMMSSZ``) — sortable, so the
newest is the last. Nothing is ever unpickled: JSON and ``.keras`` only.

:meth:`ModelRegistry.load_fresh` returns a model younger than the tier's refit
cadence (``daily`` 24 h, ``weekly`` 7 d; ``hourly`` refits every run) whose data
ends no later than the data at hand; a file that cannot be loaded yields
``None`` and a warning, so the caller refits instead of crashing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import pandas as pd

from forecasting.keys import file_key

MAX_AGE = {"hourly": pd.Timedelta(0), "daily": pd.Timedelta("24h"), "weekly": pd.Timedelta("7D")}
LIBS = ("statsmodels", "prophet", "keras", "tensorflow-cpu", "pandas", "numpy")


def library_versions(libs: tuple[str, ...] = LIBS) -> dict[str, str]:
    """Installed versions of ``libs`` (distribution names); missing ones are left out."""
    out = {}
    for lib in libs:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            pass
    return out


class ModelRegistry:
    """Save and reload fitted tier models (see module docstring)."""

    def __init__(self, root: str | os.PathLike, keep: int | None = None):
        """``keep``: versions kept per tier and key (series, or ``_global``); older ones are
        removed after each save (:meth:`prune`). None keeps every version."""
        if keep is not None and keep < 1:
            raise ValueError(f"keep={keep}: must be at least 1 (or None for all)")
        self.root = Path(root)
        self.keep = keep
        self.warnings: list[str] = []

    def _dir(self, tier: str, key: str) -> Path:
        return self.root / tier / file_key(key)

    def save(self, tier: str, key: str, files: dict[str, bytes | Path], data_range: tuple[pd.Timestamp, pd.Timestamp],
             series: list[str], scores: dict | None = None, now: dt.datetime | None = None) -> str:
        """Write one version atomically (temporary folder, then rename). Returns the version.

        ``files`` maps file names to bytes or to a path to copy (e.g. a ``.keras`` file).
        """
        now = now or dt.datetime.now(dt.timezone.utc)
        version = now.strftime("%Y%m%dT%H%M%S%fZ")
        base = self._dir(tier, key)
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
        try:
            for name, content in files.items():
                if isinstance(content, (bytes, bytearray)):
                    (tmp / name).write_bytes(content)
                else:
                    shutil.copyfile(content, tmp / name)
            meta = {"tier": tier, "key": key, "version": version, "fitted_at": now.isoformat(),
                    "data_start": pd.Timestamp(data_range[0]).isoformat(),
                    "data_end": pd.Timestamp(data_range[1]).isoformat(), "series": series,
                    "versions": library_versions(), "scores": scores or {}}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
            os.replace(tmp, base / version)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if self.keep is not None:
            self.prune(tier, key, self.keep)
        return version

    def versions(self, tier: str, key: str) -> list[str]:
        """Saved versions of one tier and key, oldest first."""
        base = self._dir(tier, key)
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))

    def prune(self, tier: str, key: str, keep: int) -> list[str]:
        """Remove all but the newest ``keep`` versions of one tier and key. Returns the removed ones."""
        old = self.versions(tier, key)[:-keep] if keep >= 1 else []
        for v in old:
            shutil.rmtree(self._dir(tier, key) / v, ignore_errors=True)
        return old

    def latest(self, tier: str, key: str) -> tuple[Path, dict] | None:
        """Newest version folder and its metadata, or None."""
        base = self._dir(tier, key)
        if not base.is_dir():
            return None
        for d in sorted((p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")), reverse=True):
            try:
                return d, json.loads((d / "meta.json").read_text())
            except (OSError, ValueError) as exc:
                self.warnings.append(f"registry: {d}: unreadable metadata ({exc}); ignored")
        return None

    def load_fresh(self, tier: str, key: str, data_end: pd.Timestamp, series: list[str] | None = None,
                   now: dt.datetime | None = None) -> tuple[Path, dict] | None:
        """The newest version if it is younger than the tier's cadence, its data ends at or
        before ``data_end`` and it covers ``series``; else None."""
        found = self.latest(tier, key)
        if found is None:
            return None
        d, meta = found
        now = pd.Timestamp(now or dt.datetime.now(dt.timezone.utc))
        age = now - pd.Timestamp(meta["fitted_at"])
        if age > MAX_AGE.get(tier, pd.Timedelta(0)) or pd.Timestamp(meta["data_end"]) > pd.Timestamp(data_end):
            return None
        if series and not set(series) <= set(meta.get("series", [])):
            return None
        return d, meta

    def scores_update(self, tier: str, key: str, version: str, scores: dict) -> None:
        """Record backtest scores in saved version ``version`` of ``tier``/``key``
        (its ``meta.json``, rewritten atomically: a temporary file, then renamed).

        Raises FileNotFoundError when that version is not (or no longer) saved."""
        p = self._dir(tier, key) / version / "meta.json"
        meta = json.loads(p.read_text())
        meta["scores"] = scores
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2, default=str))
        os.replace(tmp, p)
