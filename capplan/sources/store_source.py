"""History from the local store filled by ``capplan ingest``."""

from __future__ import annotations

from capplan.errors import InputError
from capplan.sources.history import LoadedHistory
from capplan.store.local import Store


def load_store(arg: str = "", *, config=None, **_) -> LoadedHistory:
    """``store`` or ``store:PATH``: every series in the store (config's ``store`` by default)."""
    root = arg or (config.store if config is not None else ".capplan/store")
    st = Store(root)
    ids = st.series_ids()
    if not ids:
        raise InputError(f"--source store: no series in {root}; run `capplan ingest --config FILE` first")
    frame, meta = st.read_history(ids)
    notes = [f"{sid}: no series document in the store; default metadata used (kind training, unit gpu, "
             "timezone UTC); run `capplan ingest` again to restore it" for sid in ids if not st.has_document(sid)]
    return LoadedHistory(frame, meta, notes, label=f"store:{root}")
