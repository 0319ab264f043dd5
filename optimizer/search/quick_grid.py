"""The grid scan's coarse variant (``plan.scan_grid: coarse``, set by ``capplan plan --quick``).

:func:`optimizer.search.policy_search.grid_scan` replays every point of a space's grid
(:data:`optimizer.search.space.TRAINING_GRID`: about 2,600 replays of the tuning window per
training pool, whatever ``n_calls`` is; :data:`optimizer.search.space.INFERENCE_GRID`: about 200).
The coarse grids keep the same dimensions at fewer values around the same anchors
(:data:`optimizer.search.space.TRAINING_ANCHORS`, :data:`optimizer.search.space.INFERENCE_ANCHORS`), so the
scan, its neighbour rule and the Gaussian-process refinement after it work unchanged on about
a twentieth of the replays. The values are a subset of the full grids' (the middle of each
range and one step either side), so a coarse scan can only find what a full one could; it may
miss a cheaper point between them, which is why it is for a first look only.

A quick run also stops at the scan (``plan.gp_refine: false``, :func:`scan_only`): the scan's
policy is the tuned one, with no Gaussian-process replays after it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from optimizer.search.policy_search import SearchResult
from optimizer.search.settings import SearchSettings
from optimizer.search.space import INFERENCE_GRID, TRAINING_GRID, Space

ScanGrid = Literal["full", "coarse"]

#: training pools: the daily layer at p90/p95, both rules and caps, headroom 0.9-1.1; the hourly
#: top-up none, p90/p95 at headroom 1.0 or 1.2, or the calibrated c90 (4 x 2 x 2 x 3 x 6 = 144 points)
COARSE_TRAINING_GRID = {**TRAINING_GRID, "quantile": ["p90", "p95"], "headroom": [0.9, 1.0, 1.1],
                        "topup_quantile": ["none", "p90", "p95", "c90"], "topup_headroom": [1.0, 1.2]}

#: inference services: HPA at targets 0.7-0.9 with no or p90 pre-scaling 10 minutes ahead; lookahead
#: at a one-step or 15-minute level and error quantiles 0.75-0.95; scale-down window 0 or 300 s (16 + 12 points)
COARSE_INFERENCE_GRID = {**INFERENCE_GRID, "target_utilization": [0.7, 0.8, 0.9, 0.95],
                         "prescale_quantile": ["none", "p90"], "prescale_lead_s": [600],
                         "scale_down_window_s": [0, 300], "level_window_s": [0, 900],
                         "headroom_quantile": [0.75, 0.85, 0.95]}


def scan_grid(space: Space, grid: ScanGrid) -> Space:
    """``space`` with the grid its scan replays: unchanged for ``full``; for ``coarse`` the
    coarse grid of its kind (:data:`COARSE_TRAINING_GRID` when the space is a training pool's,
    i.e. has a ``topup_quantile`` dimension, else :data:`COARSE_INFERENCE_GRID`). Dimensions,
    bounds and anchors stay as they are. Raises ValueError for another ``grid``."""
    if grid == "full":
        return space
    if grid != "coarse":
        raise ValueError(f"scan grid {grid!r}: use full or coarse")
    coarse = COARSE_TRAINING_GRID if "topup_quantile" in space.names else COARSE_INFERENCE_GRID
    return replace(space, grid=coarse)


def scan_only(settings: SearchSettings, scan: SearchResult) -> bool:
    """Whether the tuning takes the grid scan's policy (``scan``: :func:`optimizer.search.policy_search.grid_scan`'s
    result) as the search's, with no Gaussian-process refinement after it: when
    ``settings.gp_refine`` is off (a quick run) and the scan found a policy (a space with no grid
    point is still searched, whatever the setting)."""
    return not settings.gp_refine and scan.best_params is not None


__all__ = ["COARSE_INFERENCE_GRID", "COARSE_TRAINING_GRID", "ScanGrid", "scan_grid", "scan_only"]
