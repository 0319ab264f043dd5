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
from forecasting.types import SeriesMeta


@dataclass
class LoadedHistory:
    """``frame``: columns series_id, timestamp (datetime64[ns, UTC]), value (float64);
    ``meta``: series_id -> SeriesMeta; ``notes``: assumptions and fallbacks, stated."""

    frame: pd.DataFrame
    meta: dict[str, SeriesMeta]
    notes: list[str] = field(default_factory=list)
    label: str = ""


_SOURCES: dict[str, Callable[..., LoadedHistory]] = {}


def register(name: str):
    def deco(fn):
        _SOURCES[name] = fn
        return fn

    return deco


def load_source(spec: str, *, timezone: str = "UTC", config=None) -> LoadedHistory:
    """Load history from a ``--source`` spec.

    Raises
    ------
    InputError: unknown form, missing path, or bad content (the message names
        the file, column or row).
    """
    name, _, arg = spec.partition(":")
    if name not in _SOURCES:
        raise InputError(f"--source {spec!r}: unknown source; use sample, csv:PATH, parquet:PATH or store")
    return _SOURCES[name](arg, timezone=timezone, config=config)


from capplan.sources import files, sample, store_source  # noqa: E402,F401  (registration)
