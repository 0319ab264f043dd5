"""How far the forecasts themselves move with the seed (``capacity --forecast-sets``).

The capacity benchmark's seed spread (:func:`benchmarks.capacity.seed_spread`) says how far each
series' recommended cost moves across seeds when the models are refitted per seed. This module says
how far the *forecasts* moved in those runs, so the two can be read side by side: a cost that moves
by 10 % on forecasts that moved by 0.1 % is a selection that follows noise, not a model that does.

For each series and each model (``tier``: every member and the ``combined`` forecast) of the kept
forecast sets (``seed-N.parquet``, :func:`benchmarks.capacity.keep_forecasts`), and each seed after
the first: ``mean |q(seed) - q(first)| / mean |q(first)|`` over the rows both hold (the same origin,
target and model), in percent, for ``q`` = ``p50`` and ``p95``; the table keeps the largest over the
seeds. Only what moves is listed (a model whose quantiles are the same in every set is left out).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

KEY = ["tier", "issued_at", "timestamp"]
QS = ("p50", "p95")


def relative_move(first: pd.DataFrame, other: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per ``tier`` of two forecast frames of one series (columns ``tier, issued_at, timestamp,
    p50, p95``): ``{tier: {"p50": percent, "p95": percent}}``, the mean absolute difference over the
    rows both hold divided by the mean absolute value in ``first`` (NaN when that is 0)."""
    m = first.merge(other, on=KEY, suffixes=("", "_b"))
    out = {}
    for tier, g in m.groupby("tier"):
        row = {}
        for q in QS:
            scale = float(np.nanmean(np.abs(g[q])))
            row[q] = float(np.nanmean(np.abs(g[q] - g[f"{q}_b"]))) / scale * 100.0 if scale > 0 else float("nan")
        out[tier] = row
    return out


def forecast_moves(folder: Path, seeds: list[int], series: list[str]) -> pd.DataFrame:
    """The module docstring's table for the forecast sets of ``seeds`` in ``folder`` (the first seed is
    the reference): one row per series and model that moved, columns ``series``, ``tier``, ``p50_pct``,
    ``p95_pct`` (the largest over the other seeds). Read one series at a time, so memory stays that of
    one series' forecasts per seed."""
    cols = KEY + list(QS)
    rows = []
    for sid in series:
        def read(seed):
            return pd.read_parquet(Path(folder) / f"seed-{seed}.parquet", columns=cols,
                                   filters=[("series_id", "==", sid)])
        first = read(seeds[0])
        worst: dict[str, dict[str, float]] = {}
        for seed in seeds[1:]:
            for tier, v in relative_move(first, read(seed)).items():
                w = worst.setdefault(tier, {q: 0.0 for q in QS})
                for q in QS:
                    w[q] = max(w[q], v[q]) if np.isfinite(v[q]) else w[q]
        rows += [{"series": sid, "tier": t, "p50_pct": w["p50"], "p95_pct": w["p95"]}
                 for t, w in sorted(worst.items()) if w["p50"] > 0 or w["p95"] > 0]
    return pd.DataFrame(rows, columns=["series", "tier", "p50_pct", "p95_pct"])
