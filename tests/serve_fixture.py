"""Runs for ``capplan serve`` tests: a store with plans whose forecasts start now."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd

from capplan.store import atomic
from capplan.store.local import Store
from capplan.store.runs import new_run_id

SERIES = "infer/nasa-http"
#: one inference series' report entry (a real plan's figures; family predictive, quantile p90)
SERIES_DOC = json.loads(
    '{"kind": "inference", "unit": "replica", "gpu_model": "A10G-24GB", '
    '"windows": {"training": ["1995-07-01T04:00:00+00:00", "1995-08-14T23:55:00+00:00"], '
    '"tuning": ["1995-08-15T00:00:00+00:00", "1995-08-21T23:55:00+00:00"], '
    '"evaluation": ["1995-08-22T00:00:00+00:00", "1995-08-28T03:55:00+00:00"]}, '
    '"evaluation_window": ["1995-08-22T00:00:00+00:00", "1995-08-28T03:55:00+00:00"], '
    '"baseline": {"cost_usd": 3401.5958333333333, "coverage": 1.0, "idle_ratio": 0.6884348687469044, '
    '"unmet": 0.0, "scale_events": 20, "p95_utilization": 0.5714285714285714}, '
    '"recommended": {"cost_usd": 1510.5391666666667, "coverage": 0.9718468468468469, '
    '"idle_ratio": 0.2954993522221596, "unmet": 6.166666666666666, "scale_events": 263, '
    '"p95_utilization": 1.0, "params": {"target_utilization": 0.95, "min_replicas": 1, '
    '"max_replicas": 250, "scale_up_window_s": 0, "scale_down_window_s": 900, "scale_up_percent": 100, '
    '"scale_down_percent": 100, "period_s": 60, "prescale_lead_s": 600, "prescale_quantile": "p90", '
    '"family": "predictive", "level_window_s": 900, "headroom_quantile": 0.85, "data_step_s": 300, '
    '"lookahead_lead_s": 900, "lookahead_cover_s": 600}}, "plan": {"min_replicas": 1, "max_replicas": 250, '
    '"target_utilization": 0.95, "prescale": [], "fallback_replicas": 29, '
    '"valid_from": "1995-08-28T03:55:00+00:00", "baseline": {"floor_replicas": 33, '
    '"scale_up_percent_util": 70, "scale_down_percent_util": 30}}}')


def forecasts(now: pd.Timestamp, level: float, steps: int = 2016) -> pd.DataFrame:
    """Combined plan forecasts of :data:`SERIES` on the 5-minute grid from the step holding ``now``:
    p50 = level + step index / 10 (so each step has its own value), p90/p95/p99 above it."""
    t0 = now.ceil("5min")
    ts = pd.date_range(t0, periods=steps, freq="5min")
    p50 = level + np.arange(steps) / 10.0
    return pd.DataFrame({"series_id": SERIES, "tier": "combined", "issued_at": now.floor("5min"), "timestamp": ts,
                         "p50": p50, "p90": p50 * 1.2, "p95": p50 * 1.3, "p99": p50 * 1.5})


def report_doc(run_id: str, started: dt.datetime) -> dict:
    return {"run": {"run_id": run_id, "seed": 0, "started_at": started.isoformat(), "duration_s": 1.0,
                    "source": "test", "coverage_target": 0.95, "n_calls": 30},
            "series": {SERIES: copy.deepcopy(SERIES_DOC)}}


def write_run(store: Store, level: float, publish: bool = True, now: dt.datetime | None = None,
              report_text: str | None = None) -> str:
    """Write a complete run into ``store`` the way ``capplan plan`` does (folder swapped in whole,
    then LATEST). Returns its id."""
    now = now or dt.datetime.now(dt.timezone.utc)
    rid = new_run_id(now, 0)
    with atomic.replace_dir(store.run_dir(rid)) as tmp:
        forecasts(pd.Timestamp(now), level).to_parquet(Path(tmp) / "forecasts.parquet", index=False)
        (Path(tmp) / "report.json").write_text(report_text if report_text is not None
                                               else json.dumps(report_doc(rid, now)))
    if publish:
        store.mark_latest(rid)
    return rid
