"""Sources of history, chosen by name from ``--source`` (a plug-in registry, as in krr).

Forms:

* ``sample`` — the embedded real sample (default);
* ``csv:PATH`` — long CSV ``timestamp,series_id,value[,kind,unit]``;
* ``parquet:PATH`` — the same columns in Parquet;
* ``store`` — the local store that ``capplan ingest`` fills (the config's ``store``).

Each returns ``LoadedHistory``: a tidy history frame (docs/method.md, "Data contracts"),
the per-series metadata and notes on what was assumed
(:mod:`capplan.sources.history`).
"""

from __future__ import annotations

from typing import Callable

from capplan.cli.options import check_timezone
from capplan.errors import InputError
from capplan.sources.files import load_csv, load_parquet
from capplan.sources.history import LoadedHistory
from capplan.sources.implausible import mask_implausible, negative_warnings, spike_warnings
from capplan.sources.sample import load_sample
from capplan.sources.store_source import load_store
from forecasting.plugins import Registry

#: The source registry (:class:`forecasting.plugins.Registry`): ``--source`` form -> loader. A new source is a module
#: with its loader, registered here or by ``SOURCES.register(name, loader)`` from its own module.
SOURCES: Registry[Callable[..., LoadedHistory]] = Registry("source")
SOURCES.register("sample", load_sample)
SOURCES.register("csv", load_csv)
SOURCES.register("parquet", load_parquet)
SOURCES.register("store", load_store)


def load_source(spec: str, *, timezone: str = "UTC", config=None) -> LoadedHistory:
    """Load history from a ``--source`` spec.

    Implausible values (non-finite, or a million times beyond the series'
    median) become missing with a note, and suspect spikes (a thousand times the
    series' median busy level) and negative values (clipped to 0 later) are kept with a warning in ``warnings``:
    :mod:`capplan.sources.implausible`, the policy every command shares.

    Raises
    ------
    InputError: unknown form, missing path, or bad content (the message names
        the file, column or row).
    """
    check_timezone(timezone)
    name, _, arg = spec.partition(":")
    if name not in SOURCES:
        forms = ", ".join(f"{n}:PATH" if n in ("csv", "parquet") else n for n in SOURCES)
        raise InputError(f"--source {spec!r}: unknown source; use {forms}")
    loaded = SOURCES[name](arg, timezone=timezone, config=config)
    loaded.frame, notes = mask_implausible(loaded.frame, loaded.label or spec, loaded.rows)
    loaded.notes.extend(notes)
    loaded.warnings.update(spike_warnings(loaded.frame, loaded.label or spec, loaded.rows))
    for sid, w in negative_warnings(loaded.frame, loaded.label or spec, loaded.rows).items():  # one line a series
        old = loaded.warnings.get(sid)
        loaded.warnings[sid] = f"{old}; also {w.removeprefix('data: ')}" if old else w
    return loaded


__all__ = ["LoadedHistory", "SOURCES", "load_source"]
