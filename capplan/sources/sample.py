"""The embedded sample: real traces shipped as package data (see data/sample/NOTICE)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pandas as pd

from capplan.sources.history import LoadedHistory
from forecasting.types import SeriesMeta


def sample_dir() -> Path:
    """The sample folder: ``capplan/_sample`` in an installed wheel, else ``data/sample`` of the checkout."""
    packaged = resources.files("capplan") / "_sample"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "data" / "sample"


def load_sample(arg: str = "", **_) -> LoadedHistory:
    """Load ``history.parquet`` and ``series.json`` of the embedded sample."""
    d = sample_dir()
    frame = pd.read_parquet(d / "history.parquet")
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True).astype("datetime64[ns, UTC]")
    meta = {k: SeriesMeta(**v) for k, v in json.loads((d / "series.json").read_text()).items()}
    return LoadedHistory(frame, meta, [], label="sample")
