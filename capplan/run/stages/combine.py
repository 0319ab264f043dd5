"""The combine stage: per series, the models' forecasts combined and calibrated per lead bucket
and quantile (:func:`forecasting.combining.assemble.assemble`), and every model's backtest scores, one
:class:`CombineTask` per series on the executor (:func:`combine_one`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from capplan.run.stages.forecast import LOCAL, on_done, split_failed
from capplan.run.stages.score import by_series, score_series
from capplan.run.state import Forecasts, PlanState
from forecasting import backtest as bt
from forecasting.combining.assemble import ROLLING_MODELS, assemble
from forecasting.tiers import TIER_NAMES


def combine(state: PlanState) -> None:
    """``state.results`` (which must hold every model of :data:`forecasting.combining.assemble.ROLLING_MODELS`;
    more are scored, never combined) into ``state.fc``. A series whose combination raises is
    failed in the ledger (stage ``forecast``) and dropped from ``state.prep``.

    Raises InputError when every series failed."""
    prep, results, progress = state.prep, state.results, state.progress
    ex = state.executor or LOCAL
    progress("forecast", f"combining and calibrating per lead bucket on the {ex.name} executor")
    rolling = {n: r.rolling for n, r in results.items()}
    roll_parts = {n: by_series(f) for n, f in rolling.items()}
    final_parts = {n: by_series(results[n].final) for n in ROLLING_MODELS}
    hist = by_series(prep.h5)
    sids = list(prep.windows)
    tasks = [CombineTask(sid, hist[sid], prep.windows[sid],
                         {n: p.get(sid, rolling[n].iloc[:0]) for n, p in roll_parts.items()},
                         {n: p.get(sid, results[n].final.iloc[:0]) for n, p in final_parts.items()})
             for sid in sids]
    prep, ok, bad = split_failed(prep, sids, ex.map(combine_one, tasks, sids, on_done(progress, "combine")),
                                 state.ledger)
    if bad:
        keep = set(prep.windows)
        rolling = {n: f[f["series_id"].isin(keep)].reset_index(drop=True) for n, f in rolling.items()}
    rolling["combined"] = pd.concat([r[0].rolling for _, r in ok], ignore_index=True)
    final = pd.concat([r[0].final for _, r in ok], ignore_index=True)
    combination = {s: c for _, r in ok for s, c in r[0].combination.items()}
    final_tiers = {n: results[n].final for n in TIER_NAMES}
    models = {n: r.models for n, r in results.items() if r.models}
    state.prep = prep
    state.fc = Forecasts(rolling, final, final_tiers, combination, models, scores={s: r[1] for s, r in ok})


@dataclass
class CombineTask:
    """One series' inputs to :func:`combine_one` (picklable, for the executor): its 5-minute
    history, windows, every model's rolling forecasts (benchmarks too) and the plan
    forecasts of :data:`forecasting.combining.assemble.ROLLING_MODELS`."""

    series_id: str
    history: pd.DataFrame
    windows: bt.Windows
    rolling: dict[str, pd.DataFrame]
    finals: dict[str, pd.DataFrame]


def combine_one(task: CombineTask):
    """One series combined and calibrated (:func:`forecasting.combining.assemble.assemble`, which
    works series by series) and every model's backtest scores, the combined one's
    included (:func:`score_series`): ``(Assembled, scores)``."""
    a = assemble(task.history, [task.series_id], task.rolling, task.finals)
    return a, score_series(task.history, task.windows, {**task.rolling, "combined": a.rolling})

