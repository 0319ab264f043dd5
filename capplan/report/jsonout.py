"""Strict JSON for everything capplan writes or prints (RFC 8259 has no NaN or Infinity).

Non-finite floats (a coverage over a window with no observed demand, say)
become ``null``; timestamps become ISO 8601 strings; numpy scalars become
Python numbers. ``json.dumps`` is then called with ``allow_nan=False``, so a
value this misses fails loudly instead of writing a file other tools reject.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pandas as pd


def clean(o):
    """``o`` with non-finite floats replaced by ``None`` (dicts, lists and tuples recursed)."""
    if isinstance(o, dict):
        return {k: clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [clean(v) for v in o]
    if isinstance(o, (float, np.floating)):
        return float(o) if math.isfinite(o) else None
    if isinstance(o, np.integer):
        return int(o)
    return o


def _default(o):
    if isinstance(o, (pd.Timestamp, dt.datetime, dt.date)):
        return o.isoformat()
    if isinstance(o, np.ndarray):
        return clean(o.tolist())
    return str(o)


def dumps(obj, **kwargs) -> str:
    """``json.dumps`` of :func:`clean` ``(obj)``, strict (no NaN/Infinity); keyword
    arguments pass through (e.g. ``indent``)."""
    return json.dumps(clean(obj), allow_nan=False, default=_default, **kwargs)
