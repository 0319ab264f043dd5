"""History in, forecasts out.

Owns regularising, the three tiers (:mod:`forecasting.tiers`), calendars,
backtests and metrics, lead buckets (:mod:`forecasting.combining.buckets`), combining
(:mod:`forecasting.combining.weights`), calibrating (:mod:`forecasting.combining.conformal`), the
backtest peers (:mod:`forecasting.peers`), assembling the
combined forecasts (:mod:`forecasting.combining.assemble`), forecast bounds
(:mod:`forecasting.bounds`) and the model registry with its reuse rule
(:mod:`forecasting.registry`, :mod:`forecasting.registry_fit`).

Imports nothing of ``capplan`` or ``optimizer`` and does no network I/O.
"""
