"""What-if replays on a stored run (the dashboard's What-if page).

The dashboard imports ``capplan`` only (README, "Layout"), so this module is
its door to the replay simulator. It rebuilds, from a run folder, the same
replay input the pipeline used for the **evaluation window** — demand from
``history.parquet`` and the combined rolling forecasts from ``backtest.parquet``,
passed through :func:`optimizer.engine.inputs.replay_input` — and replays any policy on it
with :class:`optimizer.search.tuning.PolicyReplay` (the pipeline's own dispatch). With the
run's recommended parameters it reproduces the run's recorded figures (checked
by :attr:`WhatIf.reproduces`), so a change of a slider is compared like with like.

Usage::

    wi = load_whatif(run_dir, "train/vc6YE", cfg)
    metrics, frame = wi.simulate({**wi.recommended_params, "spot_fraction": 0.5})
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.report.model import Report, SeriesReport
from capplan.sources.sample import sample_dir
from capplan.store.local import Store
from forecasting.types import SeriesMeta
from optimizer.engine.inputs import replay_input
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import Metrics, TrainingParams
from optimizer.rivals.expressed import expressible
from optimizer.search.space import ordered_labels
from optimizer.search.tuning import SCENARIO_STREAM, PolicyReplay


def _choices(field: str) -> list[str]:
    """Every value a training policy's ``field`` may take, in the order of the level it buys."""
    return ordered_labels(get_args(TrainingParams.model_fields[field].annotation))


#: The What-if page's choices for training policies: every value :class:`optimizer.plan.policy.TrainingParams`
#: accepts, so any recommended policy (a peer's expressed form included, e.g. the empirical
#: ``n95`` top-up) can be shown and changed.
TOPUP_CHOICES = _choices("topup_quantile")
QUANTILE_CHOICES = _choices("quantile")
DAILY_RULES = list(get_args(TrainingParams.model_fields["daily_rule"].annotation))

METRIC_KEYS = ("cost_usd", "coverage", "idle_ratio", "unmet", "scale_events", "p95_utilization")


def _meta(report_series: SeriesReport, sid: str, source: str, store_root: str | None) -> SeriesMeta:
    """Series metadata: the report's kind/unit/GPU model, overlaid with what the
    source knows beyond it (``gpus_per_replica``, ``quota_gpus``, timezone)."""
    meta = {k: getattr(report_series, k) for k in ("kind", "unit", "gpu_model")}
    extra: dict = {}
    try:
        if source == "sample":
            extra = json.loads((sample_dir() / "series.json").read_text()).get(sid, {})
        elif store_root:
            _, m, _ = Store(store_root).read_series(sid)
            extra = m.model_dump()
    except (KeyError, OSError, ValueError):
        extra = {}
    return SeriesMeta(**{**extra, **meta})


@dataclass
class WhatIf:
    """A series' evaluation-window replay input plus the run's recorded figures."""

    series_id: str
    kind: str
    unit: str
    inp: ReplayInput
    cfg: CapplanConfig
    seed: int
    recommended_params: dict
    recorded: dict  # {"recommended": {...}, "baseline": {...}} from report.json
    carried: bool = True  # the parameters carry the recommendation (else the searched policy's, a note says why)

    def simulate(self, params: dict) -> tuple[Metrics, pd.DataFrame]:
        """Replay ``params`` (a full parameter dict of the series' kind) on the
        evaluation window. Returns metrics and a frame (timestamp, demand, provisioned).

        Raises pydantic.ValidationError for parameters out of bounds.
        """
        pr = self._replay()
        m, s = pr.replay(pr.params(params), self.inp)
        return m, self._frame(s["provisioned"])

    def baseline(self) -> tuple[Metrics, pd.DataFrame]:
        """The rules of thumb (the baseline) on the same window."""
        m, s = self._replay().baseline(self.inp)
        return m, self._frame(s["provisioned"])

    def _replay(self) -> PolicyReplay:
        return PolicyReplay(self.kind, self.cfg.plan.search_settings(), SCENARIO_STREAM)

    def _frame(self, provisioned: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame({"timestamp": self.inp.times, "demand": self.inp.demand, "provisioned": provisioned})

    def reproduces(self, rel_tol: float = 1e-6) -> bool:
        """True when replaying the recommended parameters gives the recorded cost and coverage."""
        m, _ = self.simulate(self.recommended_params)
        rec = self.recorded.get("recommended") or {}
        return all(math.isclose(getattr(m, k), rec.get(k, float("nan")), rel_tol=rel_tol, abs_tol=1e-9)
                   for k in ("cost_usd", "coverage", "idle_ratio"))


def load_whatif(run_dir: str | Path, series_id: str, cfg: CapplanConfig | None = None,
                store_root: str | None = None) -> WhatIf:
    """Rebuild the evaluation-window replay input of ``series_id`` from a run folder.

    Raises
    ------
    KeyError: the series is not in the run.
    InputError: ``report.json`` is not a report of this capplan version (:meth:`Report.load`).
    FileNotFoundError: the run folder lacks ``report.json``, ``history.parquet``
        or ``backtest.parquet``.
    """
    run_dir = Path(run_dir)
    cfg = cfg or CapplanConfig()
    report = Report.load(run_dir)
    s = report.series[series_id]
    meta = _meta(s, series_id, report.run.source, store_root)
    hist = pd.read_parquet(run_dir / "history.parquet")
    native = run_dir / "history_native.parquet"  # the replay's own grid for series finer than 5 minutes
    if native.exists():
        nat = pd.read_parquet(native)
        if (nat["series_id"] == series_id).any():
            hist = nat
    hist = hist[hist["series_id"] == series_id].sort_values("timestamp").reset_index(drop=True)
    bt = pd.read_parquet(run_dir / "backtest.parquet")
    comb = bt[(bt["series_id"] == series_id) & (bt["tier"] == "combined")].reset_index(drop=True)
    start, end = (pd.Timestamp(x) for x in s.windows.evaluation)
    inp, _ = replay_input(hist, comb, meta, cfg.price_book(), start, end, cfg.plan.interruption_rate,
                          cfg.plan.recovery_s, cfg.plan.spot_outage, cfg.plan.cold_start_s)
    # the params' own figures: the recommendation's when the params carry it (optimizer.rivals.expressed), else the
    # searched
    carried = s.recommended_policy == "searched" or expressible(s.recommended_policy, s.kind)
    searched = s.recommended if carried else (s.searched or s.recommended)
    recorded = {"recommended": {k: getattr(searched, k) for k in METRIC_KEYS},
                "baseline": {k: getattr(s.baseline, k) for k in METRIC_KEYS}}
    return WhatIf(series_id, meta.kind, meta.unit, inp, cfg, report.run.seed, dict(s.recommended.params), recorded,
                  carried)


def metrics_dict(m: Metrics) -> dict:
    """Metrics as a plain dict of :data:`METRIC_KEYS`."""
    return {k: getattr(m, k) for k in METRIC_KEYS}
