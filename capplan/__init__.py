"""capplan: forecasting and capacity planning for GPU clusters.

The application package. It owns the configuration (:mod:`capplan.config`),
the CLI (:mod:`capplan.cli`, :mod:`capplan.commands`), the sources
(:mod:`capplan.sources`), the store layout (:mod:`capplan.store`) and its cache
of reusable results (:mod:`capplan.cache`, :mod:`capplan.search_cache`), the executor
(:mod:`capplan.executor`) and the report model (:mod:`capplan.report`).

A run is a list of stages (:mod:`capplan.stages`, one module each) over one
:class:`capplan.state.PlanState`, whose per-series ledger the report reads; the lists and their
order are :mod:`capplan.pipeline`'s, which the CLI, the Airflow jobs (:mod:`capplan.airflow_jobs`)
and ``capplan backtest`` run.

May import :mod:`forecasting` and :mod:`optimizer`; neither imports capplan.
"""

__version__ = "0.1.0"
