"""Combination assembly: every model's forecasts of a series in, the combined forecasts out.

For each series, from the rolling-origin forecasts of :data:`ROLLING_MODELS`
and their 7-day plan forecasts (forecast frames on the 5-minute grid):

* **rolling**: each origin is combined with exponentially weighted loss weights
  from the rows realised before it (:func:`forecasting.combining.weights.combine_online`)
  and calibrated online (adaptive split conformal,
  :func:`forecasting.combining.conformal.calibrate_online`), so no origin sees its own or
  any later actual, then blended across the lead buckets' boundaries
  (:func:`forecasting.combining.lead_blend.blend_boundaries`: the path steps only where its
  members do);
* **plan**: the weights at the last observation and the offsets of the last
  :data:`forecasting.combining.conformal.CAL_WINDOW` of realised rows, applied to the
  plan forecasts, blended across the boundaries the same way, and laid on a
  full :data:`PLAN_STEPS` grid after the last point.

Both are bounded (:mod:`forecasting.bounds`). Imports nothing of ``capplan``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from forecasting.bounds import sanitise, sanitise_rolling, upper_by_series
from forecasting.combining import conformal
from forecasting.combining import weights as combination
from forecasting.combining.lead_blend import blend_boundaries
from forecasting.tiers import ROLLING_MODELS
from forecasting.types import FORECAST_COLUMNS, QCOLS, STEP, STEPS_PER_DAY

PLAN_STEPS = 7 * STEPS_PER_DAY  # the plan forecast: 7 days of 5-minute steps
#: the combination's members: the tiers, the two benchmarks, and the robust members
#: (:mod:`forecasting.tiers.robust`: the recent median level, the last value reverting to it,
#: the week's median daily profile)


@dataclass
class Assembled:
    """``rolling``: the combined rolling forecasts (``tier == "combined"``); ``final``:
    the combined 7-day plan forecast; ``combination``: per series, how both were
    made (:func:`forecasting.combining.weights.combination_report`: ``method``, ``calibration``,
    ``members`` per lead bucket, ``rolling``, ``final``)."""

    rolling: pd.DataFrame
    final: pd.DataFrame
    combination: dict[str, dict] = field(default_factory=dict)


def combine_rolling(per: dict[str, pd.DataFrame], actual: pd.Series, series_id: str, h5: pd.DataFrame
                    ) -> tuple[pd.DataFrame, dict[str, dict[str, float]], dict[str, list[float]]]:
    """One series' rolling forecasts combined and calibrated with no look-ahead (module docstring).

    ``per``: model -> that series' rolling forecast frame; ``actual``: its demand on the
    5-minute grid (GPUs or replicas); ``h5``: the history frame the bounds come from
    (:func:`forecasting.bounds.sanitise_rolling`). Returns ``(combined frame, mean p50
    weights per band, adaptive levels per lead bucket)``.
    """
    c, mean_w = combination.combine_online(per, actual, series_id)
    levels: dict[str, list[float]] = {}
    c = blend_boundaries(conformal.calibrate_online(c, actual, levels_out=levels), per)
    return sanitise_rolling(c, h5), mean_w, levels


def assemble(h5: pd.DataFrame, series_ids, rolling: dict[str, pd.DataFrame],
             finals: dict[str, pd.DataFrame]) -> Assembled:
    """Combine and calibrate per lead bucket and quantile (:mod:`forecasting.combining.weights`,
    :mod:`forecasting.combining.conformal`).

    ``h5``: the history frame (5-minute grid); ``series_ids``: the series to
    combine; ``rolling[model]`` / ``finals[model]``: forecast frames of every
    model of :data:`ROLLING_MODELS` (other keys are ignored).

    Raises KeyError when a model of :data:`ROLLING_MODELS` is missing.
    """
    upper = upper_by_series(h5)
    actuals = {sid: pd.Series(g["value"].to_numpy(), index=pd.DatetimeIndex(g["timestamp"]))
               for sid, g in h5.groupby("series_id")}
    combos, comb, out = {}, [], []
    last5 = h5.groupby("series_id")["timestamp"].max()
    for sid in series_ids:
        per = {n: rolling[n][rolling[n]["series_id"] == sid] for n in ROLLING_MODELS}
        last = last5[sid]
        c, mean_w, levels = combine_rolling(per, actuals[sid], sid, h5)
        comb.append(c)
        final_spec = combination.learn_combination(per, actuals[sid])
        # the plan's offsets: the final combination's own recent errors, at the adaptive levels reached
        final_off = conformal.learn_calibration(combination.apply_combination(per, final_spec, sid), actuals[sid],
                                                  last - conformal.CAL_WINDOW, levels=levels)
        combos[sid] = combination.combination_report(final_spec, mean_w, final_off, levels)
        per_final = {n: finals[n][finals[n]["series_id"] == sid] for n in ROLLING_MODELS}
        c = combination.apply_combination(per_final, final_spec, sid)
        c = blend_boundaries(conformal.apply_calibration(c, final_off), per_final)
        grid = pd.date_range(last + STEP, periods=PLAN_STEPS, freq=STEP)
        c = c.set_index("timestamp").reindex(grid)
        c[list(QCOLS)] = c[list(QCOLS)].ffill().bfill()
        c = c.rename_axis("timestamp").reset_index()
        c["series_id"], c["tier"], c["issued_at"] = sid, "combined", last
        out.append(sanitise(c[FORECAST_COLUMNS], upper))
    return Assembled(pd.concat(comb, ignore_index=True), pd.concat(out, ignore_index=True), combos)
