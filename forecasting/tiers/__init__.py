"""Forecasters behind one interface (:mod:`forecasting.tiers.base`).

Importing this package registers: ``hourly`` (ETS), ``daily`` (LSTM),
``weekly`` (Prophet with China's calendar), and the benchmarks ``naive``,
``seasonal_naive`` and ``prophet`` (default Prophet), and the robust combination
members ``level``, ``revert`` and ``profile`` (:mod:`forecasting.tiers.robust`). Heavy libraries
(TensorFlow, Prophet) load only when a model is fitted.
"""

from forecasting.tiers import daily_lstm, hourly_ets, naive, robust, weekly_prophet  # noqa: F401  (registration)
from forecasting.tiers.base import Forecaster, available, forecaster_class, is_global, make

TIER_NAMES = ("hourly", "daily", "weekly")

__all__ = ["Forecaster", "available", "forecaster_class", "is_global", "make", "TIER_NAMES"]
