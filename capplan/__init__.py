"""capplan: forecasting and capacity planning for GPU clusters.

The application package. It owns the configuration (:mod:`capplan.config`),
the CLI (:mod:`capplan.cli`, :mod:`capplan.commands`), the sources
(:mod:`capplan.sources`), the store layout (:mod:`capplan.store`) and its cache
of reusable results (:mod:`capplan.cache`), the executor (:mod:`capplan.executor`), the report model (:mod:`capplan.report`)
and the one orchestration, :mod:`capplan.pipeline`, which the CLI, the Airflow
jobs (:mod:`capplan.airflow_jobs`) and the dashboard (:mod:`capplan.whatif`) all call.

May import :mod:`forecasting` and :mod:`optimizer`; neither imports capplan.
"""

__version__ = "0.1.0"
