"""Forecasters behind one interface (:mod:`forecasting.tiers.base`), and their registry.

The registry is the list below: one line per model, in the combination's order. A model is a
module with its :class:`Forecaster` subclass (its grid, refit cadence, whether it is one model
per series or one global model, its typed :class:`TierSettings`) and one line here; see
``docs/tiers.md``. Heavy libraries (TensorFlow, Prophet) load only when a model is fitted.
"""

from forecasting.tiers.base import (
    Forecaster,
    TierSettings,
    available,
    forecaster_class,
    is_global,
    make,
    names,
    register,
    tier_options,
)
from forecasting.tiers.daily_lstm import DailyLSTM
from forecasting.tiers.hourly_ets import HourlyETS
from forecasting.tiers.naive import Naive, SeasonalNaive
from forecasting.tiers.robust import Level, Profile, Revert
from forecasting.tiers.weekly_prophet import DefaultProphet, WeeklyProphet

register("hourly", HourlyETS, "tier")  # ETS on 5-minute data, the next hour
register("daily", DailyLSTM, "tier")  # a global LSTM on hours, the next day
register("weekly", WeeklyProphet, "tier")  # Prophet with China's calendar, the next week
register("naive", Naive, "member")
register("seasonal_naive", SeasonalNaive, "member")
register("level", Level, "member")  # the robust members (forecasting.tiers.robust)
register("revert", Revert, "member")
register("profile", Profile, "member")
register("prophet", DefaultProphet, "benchmark")  # default Prophet: scored, never combined

TIER_NAMES = names("tier")
"""The plan tiers, each with its own plan forecast in ``forecasts.parquet``."""
ROLLING_MODELS = names("tier", "member")
"""The models combined per series (:mod:`forecasting.combining.assemble`), in this order."""

__all__ = ["Forecaster", "TierSettings", "available", "forecaster_class", "is_global", "make", "names", "register",
           "tier_options", "TIER_NAMES", "ROLLING_MODELS"]
