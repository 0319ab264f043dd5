"""What every source returns: :class:`LoadedHistory`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

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
    whole source (:func:`capplan.run.stages.load.prepare`); never planned."""

    def notes_for(self, series_id: str, series_ids) -> list[str]:
        """The notes that concern ``series_id``: those starting ``"<id>:"`` (the longest id
        that a note starts with owns it, so ``a:b: ...`` is not ``a``'s) and those naming no
        series of ``series_ids`` (about the whole input)."""
        ids = set(series_ids) | {series_id}

        def owner(n: str) -> str | None:
            return max((s for s in ids if n.startswith(s + ":")), key=len, default=None)

        return [n for n in self.notes if owner(n) in (series_id, None)]
