"""Forecasts in, policies out.

Owns the price book, the HPA algorithm, the replay simulator and its inputs
(:mod:`optimizer.engine.inputs`), the baseline, the Bayesian search and per-series
tuning (:mod:`optimizer.search.tuning`) with its settings (:mod:`optimizer.search.settings`),
plan arithmetic (:mod:`optimizer.plan.capacity`), the policy model and the manifest
writers (:mod:`optimizer.exporters`), the perfect-foresight limit
(:mod:`optimizer.rivals.perfect_foresight`), the peer policies (:mod:`optimizer.rivals.peers`), the
newsvendor layers (:mod:`optimizer.training.newsvendor`) and the top-up's fresh forecast of the
next hour (:mod:`optimizer.training.fresh_hour`).

May import :mod:`forecasting`'s types; never imports :mod:`capplan`
(``capplan.config.settings`` subclasses the settings models defined here).
"""
