"""Sources of history, chosen by name from ``--source`` (a plug-in registry, as in krr).

Forms:

* ``sample`` — the embedded real sample (default);
* ``csv:PATH`` — long CSV ``timestamp,series_id,value[,kind,unit]``;
* ``parquet:PATH`` — the same columns in Parquet;
* ``store`` — the local store that ``capplan ingest`` fills (the config's ``store``).

Each returns ``LoadedHistory``: a tidy history frame (DESIGN.md data contract),
the per-series metadata and notes on what was assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from capplan.errors import InputError
from capplan.options import check_timezone
from capplan.sources.implausible import mask_implausible, spike_warnings
from forecasting.types import SeriesMeta


@dataclass
class LoadedHistory:
    """``frame``: columns series_id, timestamp (datetime64[ns, UTC]), value (float64);
    ``meta``: series_id -> SeriesMeta; ``notes``: assumptions and fallbacks, stated;
    ``warnings``: series_id -> what its data suggests a user check (suspect spikes,
    :mod:`capplan.sources.implausible`), for the report's warnings."""

    frame: pd.DataFrame
    meta: dict[str, SeriesMeta]
    notes: list[str] = field(default_factory=list)
    warnings: dict[str, str] = field(default_factory=dict)
    label: str = ""
    rows: pd.Series | None = None
    """Row number of each frame row in the input file (header = row 1), when there is one."""
    context: pd.DataFrame | None = None
    """The source's series left out by ``--series`` (same columns as ``frame``): regularised
    with the chosen ones, so the cluster-wide outage rule and the global models see the
    whole source (:func:`capplan.pipeline.regularise_stage`); never planned."""

    def notes_for(self, series_id: str, series_ids) -> list[str]:
        """The notes that concern ``series_id``: those starting ``"<id>:"`` (the longest id
        that a note starts with owns it, so ``a:b: ...`` is not ``a``'s) and those naming no
        series of ``series_ids`` (about the whole input)."""
        ids = set(series_ids) | {series_id}

        def owner(n: str) -> str | None:
            return max((s for s in ids if n.startswith(s + ":")), key=len, default=None)

        return [n for n in self.notes if owner(n) in (series_id, None)]


_SOURCES: dict[str, Callable[..., LoadedHistory]] = {}


def register(name: str):
    def deco(fn):
        _SOURCES[name] = fn
        return fn

    return deco


def load_source(spec: str, *, timezone: str = "UTC", config=None) -> LoadedHistory:
    """Load history from a ``--source`` spec.

    Implausible values (non-finite, or a million times beyond the series'
    median) become missing with a note, and suspect spikes (a thousand times the
    series' median busy level) are kept with a warning in ``warnings``:
    :mod:`capplan.sources.implausible`, the policy every command shares.

    Raises
    ------
    InputError: unknown form, missing path, or bad content (the message names
        the file, column or row).
    """
    check_timezone(timezone)
    name, _, arg = spec.partition(":")
    if name not in _SOURCES:
        raise InputError(f"--source {spec!r}: unknown source; use sample, csv:PATH, parquet:PATH or store")
    loaded = _SOURCES[name](arg, timezone=timezone, config=config)
    loaded.frame, notes = mask_implausible(loaded.frame, loaded.label or spec, loaded.rows)
    loaded.notes.extend(notes)
    loaded.warnings.update(spike_warnings(loaded.frame, loaded.label or spec, loaded.rows))
    return loaded


from capplan.sources import files, sample, store_source  # noqa: E402,F401  (registration)
