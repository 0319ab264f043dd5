"""Retention of a store's runs and the compact backtest file of a run.

**Runs** (``runs/<id>/``, :mod:`capplan.store.runs`). After each run, :func:`prune_runs` keeps

* the newest ``keep_runs`` runs (run ids sort by start time), and
* every run started less than ``keep_days`` days ago,

and removes the others, never the run ``runs/LATEST`` names (the fleet's plan, which
``capplan serve`` and the dashboard read) and never a folder being written (temporaries start
with a dot). Defaults: 24 runs and 1 day: an hourly schedule of the embedded sample then stays
under 1 GB (sizes in ``docs/deploy.md``).

**Compact backtest** (:func:`compact_backtest`). ``backtest.parquet`` holds the rolling-origin
forecasts that the what-if replays (:mod:`capplan.backtest.whatif`) read. With ``backtest: compact`` (the
default) only those rows are kept: the ``combined`` tier, the origins the evaluation window's replay
looks up (:func:`used_rows`), ids and tiers dictionary-encoded. The quantiles stay float64, so the
what-if replays reproduce the run's figures exactly (a float32 value can cross a whole replica in
``ceil``). ``backtest: full`` keeps every tier over every window (what
``benchmarks/bench_capacity.py`` re-searches on: it needs the tuning window too).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from forecasting.types import QCOLS

COMPACT_TIER = "combined"
HOUR, DAY, WEEK = pd.Timedelta("1h"), pd.Timedelta("1D"), pd.Timedelta("7D")


class RetentionConfig(BaseModel):
    """``retention:`` in ``capplan.yaml``."""

    model_config = ConfigDict(extra="forbid")
    keep_runs: int = Field(default=24, ge=1, description="the newest runs always kept")
    keep_days: float = Field(default=1.0, ge=0, description="runs started less than this many days ago are kept")
    backtest: Literal["compact", "full"] = Field(
        default="compact", description="compact: the combined tier over the evaluation window; "
        "full: every tier and window")


def run_started(run_id: str) -> dt.datetime | None:
    """Start time (UTC) encoded in a run id (``20261130T201512Z-...``, :func:`capplan.store.runs.new_run_id`);
    None for ids without one (Airflow's ``airflow-<key>-s<seed>``)."""
    try:
        return dt.datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def runs_to_prune(run_ids: list[str], latest: str | None, keep_runs: int, keep_days: float,
                  now: dt.datetime | None = None) -> list[str]:
    """The ids :func:`prune_runs` removes (module docstring), oldest first. A run whose id
    carries no start time counts as old (only ``keep_runs`` protects it)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    ordered = sorted(run_ids, key=lambda r: (run_started(r) or dt.datetime.min.replace(tzinfo=dt.timezone.utc), r))
    newest = set(ordered[-keep_runs:])
    cutoff = now - dt.timedelta(days=keep_days)
    out = []
    for r in ordered:
        t = run_started(r)
        if r == latest or r in newest or (t is not None and t >= cutoff):
            continue
        out.append(r)
    return out


def prune_runs(runs_dir: str | os.PathLike, latest: str | None, cfg: RetentionConfig,
               now: dt.datetime | None = None) -> list[str]:
    """Remove the runs under ``runs_dir`` that :func:`runs_to_prune` names. Returns their ids."""
    d = Path(runs_dir)
    if not d.is_dir():
        return []
    ids = [p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")]
    gone = runs_to_prune(ids, latest, cfg.keep_runs, cfg.keep_days, now)
    for r in gone:
        shutil.rmtree(d / r, ignore_errors=True)
    return gone


def folder_bytes(folder: str | os.PathLike) -> int:
    """Bytes of the files under ``folder`` (0 when absent)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def used_rows(g: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> np.ndarray:
    """Boolean mask of the rows of ``g`` (one series' combined rolling forecasts) that the replay of
    the evaluation window ``[start, end]`` reads (:func:`optimizer.engine.inputs.replay_input`): forecasts
    issued by ``end`` for ``[start - 7 d - 1 h, end + 7 d]`` (the calibrated top-up's week of past
    errors before the window, the last week's lookup past its end) whose origin is the latest one
    issued before the row's hour, day or week (periods counted from ``start``, as the replay's
    lookups), plus every forecast within an hour of its origin from ``start`` on (the inference
    services' hourly forecasts)."""
    ts, iss = g["timestamp"], g["issued_at"]
    span = ((ts >= start - WEEK - HOUR) & (ts <= end + WEEK) & (iss <= end)).to_numpy()
    origins = pd.DatetimeIndex(np.sort(iss.unique()))
    iss_v = iss.to_numpy()
    rel = (ts - start).to_numpy()
    used = np.zeros(len(g), bool)
    for per in (HOUR, DAY, WEEK):
        p = per.to_timedelta64()
        first = pd.DatetimeIndex(start + pd.to_timedelta((rel // p) * p))
        k = origins.searchsorted(first, side="left") - 1
        used |= (k >= 0) & (iss_v == origins[np.clip(k, 0, None)].to_numpy())
    fresh = (((ts - iss) <= HOUR) & (ts >= start)).to_numpy()
    return span & (used | fresh)


def compact_backtest(rolling: pd.DataFrame, evaluation: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """The rows of ``rolling`` (:data:`forecasting.types.FORECAST_COLUMNS`) that the what-if replays
    read: tier ``combined``, :func:`used_rows` of each series' evaluation window (``evaluation``:
    series id -> (start, end) ISO strings, inclusive); ids and tiers as pandas categoricals (parquet
    dictionary encoding), quantiles unchanged (float64). Series without a window are left out."""
    parts = []
    comb = rolling[rolling["tier"] == COMPACT_TIER]
    for sid, g in comb.groupby("series_id", sort=True, observed=True):
        if sid not in evaluation:
            continue
        a, b = (pd.Timestamp(x) for x in evaluation[sid])
        parts.append(g[used_rows(g, a, b)])
    out = pd.concat(parts, ignore_index=True) if parts else rolling.iloc[:0].copy()
    for c in ("series_id", "tier"):
        out[c] = out[c].astype("category")
    return out.reset_index(drop=True)


def write_backtest(path: str | os.PathLike, rollings: list[pd.DataFrame], evaluation: dict[str, tuple[str, str]],
                   mode: str = "compact") -> None:
    """Write ``backtest.parquet`` (``mode`` compact or full, module docstring): zstd, ids and tiers
    dictionary-encoded, the quantiles byte-stream-split and the times delta-encoded (Parquet
    encodings that compress floats and sorted times well)."""
    frame = pd.concat(rollings, ignore_index=True) if rollings else pd.DataFrame()
    if mode == "compact" and len(frame):
        frame = compact_backtest(frame, evaluation)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    enc = {c: "BYTE_STREAM_SPLIT" for c in QCOLS if c in frame}
    enc.update({c: "DELTA_BINARY_PACKED" for c in ("issued_at", "timestamp") if c in frame})
    pq.write_table(table, path, compression="zstd", use_dictionary=[c for c in ("series_id", "tier") if c in frame],
                   column_encoding=enc)


__all__ = ["RetentionConfig", "prune_runs", "runs_to_prune", "compact_backtest", "write_backtest", "folder_bytes",
           "run_started"]
