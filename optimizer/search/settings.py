"""Search and replay settings (the ``plan:`` section of ``capplan.yaml``, less the windows).

``capplan.config.settings.PlanConfig`` subclasses :class:`SearchSettings`, as
``ExportConfig`` subclasses :class:`optimizer.exporters.settings.ExportSettings`,
so the optimizer layer never imports ``capplan``.

Search bounds are typed (:class:`TrainingBounds`, :class:`InferenceBounds`):
only the known parameter names, a numeric range is two numbers ``[low, high]``
with ``low < high`` inside the policy model's own limits
(:mod:`optimizer.plan.policy`), and a quantile choice is a non-empty list of known
labels. A bad bound fails at config load (exit 2), not inside the search.
Units: ratios 0–1, seconds ``*_s``, percentages ``*_percent``.
"""

from __future__ import annotations

from typing import Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.plan.policy import InferenceParams, TrainingParams
from optimizer.search.multiweek import EVIDENCE_WEEKS
from optimizer.search.noise_ties import NoiseTies

COVERAGE_TARGET = 0.95
"""The default coverage target: the share of steps with provisioned >= demand a policy must keep (docs/method.md)."""

Quantile = Literal["p50", "p90", "p95", "p99"]
QuantileOrNone = Literal["none", "p50", "p90", "p95", "p99"]
# c*: optimizer.training.calibrated; n95: optimizer.training.empirical
TopupChoice = Literal["none", "p50", "p90", "p95", "p99", "c80", "c90", "c95", "a95", "n95"]
DailyRule = Literal["newsvendor", "max", "empirical", "calibrated"]


def _limits(model: type[BaseModel], name: str) -> tuple[float, float]:
    """The ``[low, high]`` a policy model's field allows (from its ``Field(ge=..., le=...)``)."""
    lo, hi = float("-inf"), float("inf")
    for m in model.model_fields[name].metadata:
        if isinstance(m, (Ge, Gt)):
            lo = float(m.ge if isinstance(m, Ge) else m.gt)
        elif isinstance(m, (Le, Lt)):
            hi = float(m.le if isinstance(m, Le) else m.lt)
    return lo, hi


class _Bounds(BaseModel):
    """Shared check: every range is ``low < high`` within the policy model's limits."""

    model_config = ConfigDict(extra="forbid")
    _params: type[BaseModel] = TrainingParams

    @model_validator(mode="after")
    def _ranges(self):
        for name in type(self).model_fields:
            v = getattr(self, name)
            if not isinstance(v, tuple):
                continue
            lo, hi = v
            if not lo < hi:
                raise ValueError(f"{name}: low {lo} must be below high {hi}")
            a, b = _limits(self._params, name)
            if lo < a or hi > b:
                raise ValueError(f"{name}: [{lo}, {hi}] is outside what the policy allows [{a:g}, {b:g}]")
        return self

    def as_dict(self) -> dict:
        """Only the bounds that were set (the search spaces' defaults fill the rest)."""
        return self.model_dump(exclude_none=True)


class TrainingBounds(_Bounds):
    """Search ranges for training pools (:func:`optimizer.search.policy_search.training_space`); unset = its default."""

    _params = TrainingParams
    reservation_ratio: tuple[float, float] | None = Field(default=None, description="[low, high] of the weekly "
                                                          "reservation as a ratio of the forecast quantile's mean")
    headroom: tuple[float, float] | None = Field(default=None, description="[low, high] of the daily layer's "
                                                 "multiple of the day's forecast level")
    spot_fraction: tuple[float, float] | None = Field(default=None, description="[low, high] of the daily "
                                                      "layer's share bought on spot")
    topup_headroom: tuple[float, float] | None = Field(default=None, description="[low, high] of the hourly "
                                                       "top-up's multiple of the next hour's forecast maximum")
    quantile: list[Quantile] | None = Field(default=None, min_length=1, description="forecast quantiles the "
                                            "weekly and daily layers may size on")
    topup_quantile: list[TopupChoice] | None = Field(default=None, min_length=1, description="hourly top-up "
                                                     "choices: none, a forecast quantile, a calibrated level "
                                                     "c80/c90/c95, the adaptive a95 (optimizer.training.adaptive), "
                                                     "or n95 (last value + q95 of the rises over an hour)")
    daily_rule: list[DailyRule] | None = Field(default=None, min_length=1, description="what the daily layer "
                                               "sizes on: the forecast quantile's newsvendor level or maximum, the "
                                               "demand's own recent hour maxima (empirical), or the p50 plus the "
                                               "forecast's realised errors (calibrated, "
                                               "optimizer.training.calibrated_day)")


class InferenceBounds(_Bounds):
    """Search ranges for inference services (:func:`optimizer.search.policy_search.inference_space`); unset = its
    default. ``max_replicas`` is one number (fixed, not searched)."""

    _params = InferenceParams
    target_utilization: tuple[float, float] | None = Field(default=None, description="[low, high] of the HPA's "
                                                           "target GPU utilisation (ratio)")
    scale_up_window_s: tuple[int, int] | None = Field(default=None, description="[low, high] of "
                                                      "behavior.scaleUp.stabilizationWindowSeconds")
    scale_down_window_s: tuple[int, int] | None = Field(default=None, description="[low, high] of "
                                                        "behavior.scaleDown.stabilizationWindowSeconds")
    scale_up_percent: tuple[int, int] | None = Field(default=None, description="[low, high] of the scale-up "
                                                     "Percent policy per period")
    scale_down_percent: tuple[int, int] | None = Field(default=None, description="[low, high] of the "
                                                       "scale-down Percent policy per period")
    min_replicas: tuple[int, int] | None = Field(default=None, description="[low, high] of minReplicas")
    prescale_lead_s: tuple[int, int] | None = Field(default=None, description="[low, high] of how early a "
                                                    "forecast peak's pre-scaling window starts (seconds)")
    prescale_quantile: list[QuantileOrNone] | None = Field(default=None, min_length=1, description="forecast "
                                                           "quantiles pre-scaling may use (none: no pre-scaling)")
    family: list[Literal["hpa", "lookahead"]] | None = Field(default=None, min_length=1, description="policy "
                                                             "families searched: hpa and/or lookahead")
    level_window_s: tuple[int, int] | None = Field(default=None, description="[low, high] of the lookahead "
                                                   "family's level window (seconds; 0: the last step)")
    headroom_quantile: tuple[float, float] | None = Field(default=None, description="[low, high] of the "
                                                          "lookahead family's quantile of its past errors")
    max_replicas: int | None = Field(default=None, ge=1, description="maxReplicas (one number; default from "
                                     "the peak before the tuning window)")

    @model_validator(mode="after")
    def _min_below_max(self):
        if self.max_replicas is not None and self.min_replicas is not None and self.min_replicas[1] > self.max_replicas:
            raise ValueError(f"min_replicas: high {self.min_replicas[1]} is above max_replicas {self.max_replicas}")
        return self


class SearchSettings(BaseModel):
    """Policy search and replay options (see :mod:`optimizer.search.policy_search` for the objective)."""

    model_config = ConfigDict(extra="forbid")
    coverage_target: float = Field(default=COVERAGE_TARGET, gt=0, le=1, description="share of intervals with "
                                   "provisioned >= demand that a policy must reach (ratio)")
    penalty: float = Field(default=0.5, ge=0, description="weight of a coverage shortfall in the objective: "
                           "cost + penalty x 100 x shortfall x reference cost")
    coverage_margin: float = Field(default=0.01, ge=0, le=0.2,
                                   description="added to coverage_target while tuning (a safety margin)")
    selection_score: Literal["cost", "weekly", "daily_regret_q75"] = Field(
        default="cost", description="how training policies are ranked on the tuning window: its cost plus the "
        "coverage penalty ('cost'), the worst of its weeks' (cost + coverage penalty) / that week's "
        "perfect-foresight limit ('weekly'; optimizer.search.multiweek), or the upper quartile over its days of "
        "each day's cost / that day's perfect-foresight limit, plus the same penalty in those units "
        "('daily_regret_q75'; see optimizer.search.policy_search)")
    evidence_weeks: int = Field(default=EVIDENCE_WEEKS, ge=1, le=52, description="complete weeks before the "
                                "evaluation window the tuning window holds, as far as the history allows "
                                "after 7 days of forecaster training (optimizer.search.multiweek)")
    coverage_objective: Literal["window", "daily", "lcb"] = Field(
        default="lcb", description="what the search penalises: the tuning window's coverage shortfall ('window'), "
        "the mean of each day's shortfall ('daily'), or the shortfall of the window's coverage less one standard "
        "error of its daily coverages ('lcb': a margin sized by the window's own variability; see "
        "optimizer.search.policy_search)")
    n_calls: int = Field(default=30, ge=4, description="replays of the Gaussian-process search (and of the "
                         "random search beside it) after the grid scan")
    interruption_rate: float = Field(default=0.01, ge=0, description="spot interruptions per spot GPU-hour")
    recovery_s: int = Field(default=1800, ge=0, description="checkpoint recovery per interruption (rules of "
                            "thumb: 30 min)")
    cold_start_s: int = Field(default=90, ge=0, le=3600, description="node cold start (rules of thumb: 90 s; at "
                              "most an hour, as the metrics lag: beyond that an autoscaler cannot follow demand "
                              "at all)")
    metrics_lag_s: int = Field(default=60, ge=0, le=3600, description="age of the metrics the HPA acts on: the "
                               "metrics pipeline plus the 15 s sync period (optimizer.engine.replay timeline)")
    spot_outage: Literal["recovery", "replacement"] = Field(
        default="replacement", description="training replay: what a spot interruption costs: the autoscaler "
        "replaces the GPU after cold_start_s and the recovery_s of lost work is bought on demand ('replacement', "
        "the accounting of the newsvendor ratio's effective spot price; the perfect-foresight limit pays that "
        "expected cost too), or the GPU is out for recovery_s with no replacement and no cost ('recovery'; "
        "optimizer.engine.replay.spot_outage)")
    training_incumbent: Literal["calibrated", "none"] = Field(
        default="calibrated", description="training pools: the rule the searched policy must beat on the tuning "
        "window by more than the days' noise to be recommended: the calibrated daily level on spot with the adaptive "
        "a95 top-up ('calibrated', optimizer.rivals.incumbent; no headroom, nothing chosen on the tuning week), "
        "or none (the searched policy as it is). Training bounds that exclude the calibrated daily rule or a95, "
        "or another selection_score than cost, leave the rule out, and a note says so")
    queue_unmet: bool = Field(default=False, description="training replay: unmet demand waits in a queue and "
                              "runs later instead of being lost")
    random_search: bool = Field(default=True, description="also run a random search with the same budget, "
                                "reported beside the tuned policy")
    scan_grid: Literal["full", "coarse"] = Field(
        default="full", description="the grid scan before the Gaussian-process search: every point of the full grid "
        "(about 2,600 replays per training pool) or the coarse grid of a quick run (optimizer.search.quick_grid)")
    noise_ties: NoiseTies = Field(
        default="exact", description="training pools: which of the grid scan's policies within the days' noise of its "
        "best to keep: the scan's own order ('exact'), or the cheapest that meets the tuning's coverage target "
        "('cheapest_within_noise'; optimizer.search.noise_ties)")
    gp_refine: bool = Field(default=True, description="refine the grid scan's policy with the Gaussian-process "
                            "search (false: the scan's policy, no Gaussian-process replays; quick runs)")
    training_bounds: TrainingBounds = Field(default_factory=TrainingBounds)
    inference_bounds: InferenceBounds = Field(default_factory=InferenceBounds)
