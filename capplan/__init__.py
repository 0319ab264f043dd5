"""capplan: forecasting and capacity planning for GPU clusters.

The application package. It owns the configuration (:mod:`capplan.config.settings`),
the CLI (:mod:`capplan.cli.app`, :mod:`capplan.cli.commands`), the sources
(:mod:`capplan.sources`), the store layout (:mod:`capplan.store.local`) and its cache
of reusable results (:mod:`capplan.run.cache`, :mod:`capplan.run.search_cache`), the executor
(:mod:`capplan.run.executor`) and the report model (:mod:`capplan.report.model`).

A run is a list of stages (:mod:`capplan.run.stages`, one module each) over one
:class:`capplan.run.state.PlanState`, whose per-series ledger the report reads; the lists and their
order are :mod:`capplan.run.pipeline`'s, which the CLI, the Airflow jobs (:mod:`capplan.airflow.jobs`)
and ``capplan backtest`` run.

May import :mod:`forecasting` and :mod:`optimizer`; neither imports capplan.
"""

__version__ = "0.1.0"
