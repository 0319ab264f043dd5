"""Which steps of a pulled range held demand, which were idle (0) and which are missing.

A demand template answers 0 when its exporter is up and nothing is requested
(:mod:`capplan.promql.render`), and nothing only when the exporter is down. So after a
pull, every step of the requested grid is one of:

* **demand**: a value above 0;
* **idle**: exactly 0 (the exporter reported, nothing was requested);
* **missing**: no value (the exporter was down or the series absent).

:func:`step_coverage` counts them and lists the idle and missing time ranges,
which ``capplan ingest`` reports per series (JSON ``idle_ranges`` /
``missing_ranges``, and a note).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class Coverage:
    """Steps of the grid by kind (counts) and the idle/missing runs as
    ``"<first step ISO> .. <last step ISO>"`` strings (UTC, step end times)."""

    demand_steps: int = 0
    idle_steps: int = 0
    missing_steps: int = 0
    idle_ranges: list[str] = field(default_factory=list)
    missing_ranges: list[str] = field(default_factory=list)

    def note(self, limit: int = 6) -> str | None:
        """One line for the ingest report, or None when every step held demand."""
        if not self.idle_steps and not self.missing_steps:
            return None

        def few(r):
            return "; ".join(r[:limit]) + (f"; and {len(r) - limit} more" if len(r) > limit else "")

        parts = []
        if self.idle_steps:
            parts.append(f"{self.idle_steps} step(s) idle, stored as 0 (exporter up, nothing requested): "
                         f"{few(self.idle_ranges)}")
        if self.missing_steps:
            parts.append(f"{self.missing_steps} step(s) missing (exporter down or series absent): "
                         f"{few(self.missing_ranges)}")
        return " | ".join(parts)


def _runs(grid_ms: np.ndarray, mask: np.ndarray) -> list[str]:
    out = []
    idx = np.flatnonzero(mask)
    if not len(idx):
        return out
    breaks = np.flatnonzero(np.diff(idx) != 1)
    starts = np.r_[idx[0], idx[breaks + 1]]
    ends = np.r_[idx[breaks], idx[-1]]
    for a, b in zip(starts, ends):
        ta = pd.Timestamp(int(grid_ms[a]), unit="ms", tz="UTC").strftime("%Y-%m-%dT%H:%MZ")
        tb = pd.Timestamp(int(grid_ms[b]), unit="ms", tz="UTC").strftime("%Y-%m-%dT%H:%MZ")
        out.append(ta if a == b else f"{ta} .. {tb}")
    return out


def step_coverage(frame: pd.DataFrame, chunks: list[tuple[int, int]], step_s: int) -> Coverage:
    """Classify every grid step of ``chunks`` (epoch-second windows on the step grid,
    :func:`capplan.prometheus.parse.chunk_ranges`) by ``frame`` (history frame of
    the pull: timestamp, value). NaN values count as missing."""
    if not chunks:
        return Coverage()
    grid = np.concatenate([np.arange(s, e + 1, step_s, dtype=np.int64) for s, e in chunks]) * 1000
    got = pd.Series(frame["value"].to_numpy(np.float64),
                    index=frame["timestamp"].to_numpy("datetime64[ns]").astype(np.int64) // 10**6)
    vals = got.groupby(level=0).last().reindex(grid).to_numpy(np.float64)
    missing = np.isnan(vals)
    idle = ~missing & (vals == 0)
    return Coverage(int((~missing & ~idle).sum()), int(idle.sum()), int(missing.sum()),
                    _runs(grid, idle), _runs(grid, missing))
