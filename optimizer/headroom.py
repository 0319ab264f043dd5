"""Headroom: how much a layer holds above its forecast level, in GPUs.

A multiplicative headroom (``1.2 x level``) cannot be right at every scale: 20 % of 10 GPUs is 2
GPUs, of 3,300 it is 660, although a flat large pool's forecast errs by far less than 20 % of its
level. The ``spread`` scale expresses the same search dimension in the forecast's own error scale
(its ``p90 - p50``), which grows with the pool's uncertainty, not with its size.
"""

from __future__ import annotations

import numpy as np


#: spreads (p90 - p50 of the same forecast) per 0.1 of headroom in the ``spread`` scale
SPREAD_UNITS = 10.0


def with_headroom(level, headroom: float, spread, scale: str = "level"):
    """A layer's level with its headroom, in GPUs: ``headroom x level`` (``scale="level"``), or
    ``level + (headroom - 1) x SPREAD_UNITS x spread`` (``"spread"``), where ``spread`` is the same
    forecast's ``p90 - p50`` (clipped at 0; NaN counts 0): the headroom in the forecast's own error
    scale, so 1.1 adds one spread to a pool of 10 GPUs and to one of 10,000 alike, where ``x level``
    adds 1 GPU to the first and 1,000 to the second. Scalars or arrays. Raises ValueError for another
    ``scale``."""
    if scale == "level":
        return headroom * level
    if scale != "spread":
        raise ValueError(f"unknown headroom scale {scale!r}; use 'level' or 'spread'")
    return level + (headroom - 1.0) * SPREAD_UNITS * np.clip(np.nan_to_num(spread, nan=0.0), 0.0, None)
