"""Retention of a store's runs and the compact backtest file of a run.

**Runs** (``runs/<id>/``, :mod:`capplan.runs`). After each run, :func:`prune_runs` keeps

* the newest ``keep_runs`` runs (run ids sort by start time), and
* every run started less than ``keep_days`` days ago,

and removes the others, never the run ``runs/LATEST`` names (the fleet's plan, which
``capplan serve`` and the dashboard read) and never a folder being written (temporaries start
with a dot). Defaults: 24 runs and 1 day: an hourly schedule of the embedded sample then stays
under 1 GB (sizes in ``docs/deploy.md``).

**Compact backtest** (:func:`compact_backtest`). ``backtest.parquet`` holds the rolling-origin
forecasts that the what-if replays (:mod:`capplan.whatif`) read: the ``combined`` tier over each
series' evaluation window. With ``backtest: compact`` (the default) only those rows are kept, ids
and tiers dictionary-encoded, zstd-compressed. The quantiles stay float64: the what-if replays then
reproduce the run's figures exactly (a float32 value can cross a whole replica in ``ceil``), and on
the sample's plan float64 compresses better than float32 (docs/deploy.md). ``backtest: full``
keeps every tier over every window (what ``benchmarks/bench_capacity.py`` re-searches on: it needs
the tuning window too).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field


COMPACT_TIER = "combined"


class RetentionConfig(BaseModel):
    """``retention:`` in ``capplan.yaml``."""

    model_config = ConfigDict(extra="forbid")
    keep_runs: int = Field(default=24, ge=1, description="the newest runs always kept")
    keep_days: float = Field(default=1.0, ge=0, description="runs started less than this many days ago are kept")
    backtest: Literal["compact", "full"] = Field(
        default="compact", description="compact: the combined tier over the evaluation window; "
        "full: every tier and window")


def run_started(run_id: str) -> dt.datetime | None:
    """Start time (UTC) encoded in a run id (``20261130T201512Z-...``, :func:`capplan.runs.new_run_id`);
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


def compact_backtest(rolling: pd.DataFrame, evaluation: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """The rows of ``rolling`` (:data:`forecasting.types.FORECAST_COLUMNS`) that the what-if replays
    read: tier ``combined``, ``timestamp`` within the series' evaluation window (``evaluation``:
    series id -> (start, end) ISO strings, inclusive), ids and tiers as pandas categoricals (parquet
    dictionary encoding), quantiles unchanged (float64). Series without a window are left out."""
    parts = []
    comb = rolling[rolling["tier"] == COMPACT_TIER]
    for sid, g in comb.groupby("series_id", sort=True, observed=True):
        if sid not in evaluation:
            continue
        a, b = (pd.Timestamp(x) for x in evaluation[sid])
        parts.append(g[(g["timestamp"] >= a) & (g["timestamp"] <= b)])
    out = pd.concat(parts, ignore_index=True) if parts else rolling.iloc[:0].copy()
    for c in ("series_id", "tier"):
        out[c] = out[c].astype("category")
    return out.reset_index(drop=True)


def write_backtest(path: str | os.PathLike, rollings: list[pd.DataFrame], evaluation: dict[str, tuple[str, str]],
                   mode: str = "compact") -> None:
    """Write ``backtest.parquet`` (``mode`` compact or full, module docstring; zstd-compressed)."""
    frame = pd.concat(rollings, ignore_index=True) if rollings else pd.DataFrame()
    if mode == "compact" and len(frame):
        frame = compact_backtest(frame, evaluation)
    frame.to_parquet(path, index=False, compression="zstd")


__all__ = ["RetentionConfig", "prune_runs", "runs_to_prune", "compact_backtest", "write_backtest", "folder_bytes",
           "run_started"]
