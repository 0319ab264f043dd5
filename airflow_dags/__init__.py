"""capplan's Airflow 3 DAGs: point Airflow's ``dags_folder`` at this folder.

* ``capplan_ingest`` (every 15 min): history of every configured series into the store.
* ``capplan_forecast_hourly`` / ``_daily`` / ``_weekly``: one tier refitted per series.
* ``capplan_plan``: runs on the forecast Assets; combines, searches, exports.

The work itself is in :mod:`capplan.airflow.jobs`; helpers shared by the DAG files are in
:mod:`airflow_dags.common`. Importing any of these is cheap (no pandas,
TensorFlow, Prophet or network at module level).
"""
