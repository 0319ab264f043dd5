"""Policy parameters (what the search tunes) and the per-series plan (what is exported).

Units: ratios are 0–1 unless named ``*_percent``; seconds are named ``*_s``;
GPUs and replicas are counts.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

QuantileName = Literal["p50", "p90", "p95", "p99"]


class TrainingParams(BaseModel):
    """Reservation policy of a training pool.

    * reserved GPUs per week = ``ceil(reservation_ratio * mean of the weekly
      forecast's quantile over the week)``; with ``reservation_basis="spot_cap"``,
      ``reservation_ratio *`` the GPUs the price book's spot cap refuses at that level
      (:func:`optimizer.book.purchase.reserved_level`, :mod:`optimizer.training.committed`);
    * GPUs per day = ``ceil(headroom * max of the daily forecast's quantile over
      the day)``, or with ``daily_rule="newsvendor"`` ``ceil(headroom * the
      level that quantile reaches in at least the spot critical ratio of the
      day's hours)`` (:mod:`optimizer.training.newsvendor`: the rest is left to the hourly
      top-up), or with ``daily_rule="empirical"`` ``ceil(headroom *`` the level
      that the last 7 days' hourly maxima of the demand reach in at least that
      ratio of hours``)`` (:mod:`optimizer.training.empirical`; no forecast, ``quantile``
      unused there), or with ``daily_rule="calibrated"`` ``ceil(headroom *`` the level
      that the day's p50 hour maxima plus the forecast's errors of the last 7 days reach in
      at least that ratio of (hour, error) pairs``)`` (:mod:`optimizer.training.calibrated_day`; no
      forecast quantile, ``quantile`` unused there, searched at headroom 1); with ``daily_cap="last_day_peak"`` never
      more than the peak of the 24 h before the day (:func:`optimizer.engine.replay.day_start_peak`: a
      forecast that has not yet seen demand fall away buys nothing idle; the
      hourly top-up follows); what exceeds the reservation is bought for the day, a
      ``spot_fraction`` of it on spot and the rest on-demand;
    * on-demand GPUs per hour (the reactive layer, lead time one hour) =
      ``max(0, ceil(topup_headroom * max of the forecast's topup_quantile over
      the hour) - reserved - daily GPUs)``, from the latest forecast issued
      before the hour; ``topup_quantile = "none"`` disables the layer (the
      baseline's lead times: week and day only); ``c80``/``c90``/``c95``
      use the fresh p50 plus the 80/90/95 % quantile of its recent errors instead
      of a forecast quantile (:mod:`optimizer.training.calibrated`), ``a95`` the quantile of them
      adapted hour by hour to cover 95 % of intervals (:mod:`optimizer.training.adaptive`); ``n95`` the last observed
      value plus the 95 % quantile of the demand's rises over an hour in the last 7 days
      (:mod:`optimizer.training.empirical`, no forecast).

    Every ``ceil`` above is :func:`optimizer.book.whole_units.whole`: when the pool's demand before
    the window counts whole GPUs, a level at most
    :data:`optimizer.book.whole_units.COUNT_TOLERANCE` (0.1 GPU) above a whole number is that number.
    """

    model_config = ConfigDict(extra="forbid")

    reservation_ratio: float = Field(ge=0, le=3)
    reservation_basis: Literal["forecast", "spot_cap"] = "forecast"
    quantile: QuantileName = "p90"
    daily_rule: Literal["max", "newsvendor", "empirical", "calibrated"] = "max"
    daily_cap: Literal["none", "last_day_peak"] = "none"
    headroom: float = Field(default=1.0, ge=0.5, le=3)
    spot_fraction: float = Field(default=0.0, ge=0, le=1)
    topup_quantile: Literal["none", "p50", "p90", "p95", "p99", "c80", "c90", "c95", "a95", "n95"] = "none"
    topup_headroom: float = Field(default=1.0, ge=0.5, le=3)
    topup_margin_gpus: float | None = Field(default=None, description="calibrated top-up only: the margin (GPUs) "
                                            "over the fresh p50 learnt by the last replayed hour, which the plan's "
                                            "next hour uses (set after tuning, never searched; None: use p90)")
    day_errors_gpus: list[Annotated[float, Field(allow_inf_nan=False)]] | None = Field(
        default=None, max_length=168, description="calibrated daily rule only: the forecast's "
                                                "hourly errors (GPUs) of the 7 days before the plan, which size the "
                                                "plan's next day (optimizer.training.calibrated_day; set after "
                                                "tuning, never searched; None or under a day of them: the p90 "
                                                "newsvendor level)")


class InferenceParams(BaseModel):
    """HPA / KEDA policy of an inference service.

    ``target_utilization`` is a ratio of replica capacity (0.7 = 70 %).
    Rate policies are ``Percent`` per ``period_s``. Pre-scaling raises the
    desired replicas to ``ceil(forecast(t + prescale_lead_s) / target)`` using
    the hourly forecast at ``prescale_quantile`` (``none`` disables it).

    ``family`` picks the replayed policy family (:data:`optimizer.engine.replay.INFERENCE_FAMILIES`):
    ``hpa`` (the above), or ``lookahead`` (:mod:`optimizer.inference.lookahead`): desired replicas =
    the observed level over ``level_window_s`` (seconds) plus the ``headroom_quantile`` (0-1)
    of its recent errors against the peak of the next lag + cold-start steps, beside the
    utilisation trigger at ``target_utilization``; the pre-scaling fields are unused there.
    """

    model_config = ConfigDict(extra="forbid")

    target_utilization: float = Field(gt=0, le=1)
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(default=100, ge=1)
    scale_up_window_s: int = Field(default=0, ge=0, le=3600)
    scale_down_window_s: int = Field(default=300, ge=0, le=3600)
    scale_up_percent: int = Field(default=100, ge=1, le=1000)
    scale_down_percent: int = Field(default=100, ge=1, le=100)
    period_s: int = Field(default=60, ge=1, le=1800)
    prescale_lead_s: int = Field(default=0, ge=0, le=3600)
    prescale_quantile: Literal["none", "p50", "p90", "p95", "p99"] = "none"
    family: str = Field(default="hpa", description="the replayed policy family, a name of "
                        "optimizer.engine.replay_core.INFERENCE_FAMILIES (hpa, lookahead, predictive, ...)")
    level_window_s: int = Field(default=0, ge=0, le=3600)
    headroom_quantile: float = Field(default=0.9, ge=0.5, le=0.999)
    data_step_s: int = Field(default=300, ge=1, le=3600, description="the step (s) of the data the policy was "
                             "tuned on; the lookahead query evaluates at it (set by the search, never searched)")
    lookahead_lead_s: int = Field(default=900, ge=0, le=14400, description="the lookahead family's lead (s): "
                                  "metrics lag + one step + cold start, in whole steps (set by the search)")
    lookahead_cover_s: int = Field(default=600, ge=0, le=14400, description="the lookahead family's covered span "
                                   "(s): cold start + one step, in whole steps (set by the search)")

    @field_validator("family")
    @classmethod
    def _registered_family(cls, v: str) -> str:
        """A family is a name of the inference family registry; each family registers itself in its own module."""
        import optimizer.engine.replay  # noqa: F401  lazy: registration of the built-in families
        from optimizer.engine.replay_core import INFERENCE_FAMILIES  # lazy: replay_core imports this module
        if v not in INFERENCE_FAMILIES:
            raise ValueError(f"not a registered inference family; use one of {', '.join(INFERENCE_FAMILIES)}")
        return v


class Metrics(BaseModel):
    """Replay outcome on one window (see :mod:`optimizer.engine.replay`).

    ``daily_coverage``: coverage of each whole or partial day of the window,
    counted from its first step (what the search's ``daily`` objective
    penalises); ``daily_cost_usd``: cost (USD) of each of those days, for training replays (what the
    ``daily_regret_q75`` selection of :mod:`optimizer.search.policy_search` scores); both kept out of ``model_dump``
    and so out of every export.
    """

    cost_usd: float
    coverage: float
    idle_ratio: float
    unmet: float
    scale_events: int = 0
    p95_utilization: float = 0.0
    mix: dict[str, dict[str, float]] | None = None  # GPU-hours and USD per layer (optimizer.book.purchase.layer_mix)
    spot_refused_gpu_hours: float | None = None  # training: spot the price book's cap moved on demand
    daily_coverage: list[float] | None = Field(default=None, exclude=True, repr=False)
    daily_cost_usd: list[float] | None = Field(default=None, exclude=True, repr=False)


class SeriesPlan(BaseModel):
    """Everything exported for one series (input of the manifest writers).

    ``plan`` holds the capacity for each lead time: for training pools
    ``reserved_gpus`` (weekly), ``on_demand_gpus`` and ``spot_gpus`` (next
    day), ``on_demand_hourly_gpus`` (next hour's top-up, when the policy has
    one), ``capability_gpus``; for inference ``min_replicas``/``max_replicas``
    and ``prescale`` windows ``[{start, end, desired_replicas}]`` (UTC ISO)
    derived from forecast peaks.
    """

    model_config = ConfigDict(extra="allow")

    series_id: str
    kind: Literal["training", "inference"]
    unit: Literal["gpu", "replica"]
    gpu_model: str = "default"
    timezone: str = "UTC"
    params: dict
    plan: dict
    recommended: Metrics
    baseline: Metrics
    forecast_version: str = ""
    fallbacks: list[str] = Field(default_factory=list)
    recommendation: str = Field(default="", description="report.json's word for what ``params`` carry: rule, "
                                "searched or an expressed peer (optimizer.rivals.incumbent.recommended_name); "
                                "said in policy.yaml's header comments; empty when read back from policy.yaml")
