"""Forecasts in, policies out: price book, HPA algorithm, replay simulator,
Bayesian policy search, policy model and manifest writers.

May import :mod:`forecasting`'s types; never imports :mod:`capplan`.
"""
