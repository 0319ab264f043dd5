"""Forecasts in, policies out.

Owns the price book, the HPA algorithm, the replay simulator and its inputs
(:mod:`optimizer.inputs`), the baseline, the Bayesian search and per-series
tuning (:mod:`optimizer.tuning`) with its settings (:mod:`optimizer.search_settings`),
plan arithmetic (:mod:`optimizer.plan`), the policy model and the manifest
writers (:mod:`optimizer.exporters`), the perfect-foresight limit
(:mod:`optimizer.oracle`), the peer policies (:mod:`optimizer.peers`), the
newsvendor layers (:mod:`optimizer.layers`) and the top-up's fresh forecast of the
next hour (:mod:`optimizer.refresh`).

May import :mod:`forecasting`'s types; never imports :mod:`capplan`
(``capplan.config`` subclasses the settings models defined here).
"""
