"""``capplan_forecast_hourly`` / ``capplan_forecast_daily`` / ``capplan_forecast_weekly``:
each refits one tier at its own cadence.

| DAG | tier | model | schedule |
| --- | --- | --- | --- |
| capplan_forecast_hourly | hourly | exponential smoothing, 5 min, 1 h ahead | hourly |
| capplan_forecast_daily | daily | LSTM, 1 h, 24 h ahead | daily |
| capplan_forecast_weekly | weekly | Prophet with China holidays, 1 h, 7 d ahead | weekly |

One mapped task per series (``.expand``) writes
``<store>/forecasts/<tier>/<logical-date>/<series-key>.parquet`` (plus its
rolling-origin backtest forecasts); a series whose task fails is listed as
missing in the tier's ``_manifest.json``. The ``record`` task then updates the
tier's Asset, which schedules ``capplan_plan``.
"""

from __future__ import annotations

from airflow.sdk import TriggerRule, task

from airflow_dags import common

SCHEDULES = {"hourly": "@hourly", "daily": "@daily", "weekly": "@weekly"}


def forecast_dag(tier: str):
    @common.capplan_dag(f"capplan_forecast_{tier}", SCHEDULES[tier], __doc__, tags=["forecast"])
    def forecast():
        @task(max_active_tis_per_dagrun=2, map_index_template="{{ series_label }}")
        def fit(series_id: str, cfg_path: str) -> dict:
            from capplan import airflow_jobs as jobs

            common.label_map_index(series_id)
            return jobs.forecast_series(cfg_path, tier, series_id, common.logical_date(), common.SEED)

        @task(trigger_rule=TriggerRule.ALL_DONE, outlets=[common.FORECAST_ASSETS[tier]])
        def record(results, expected: list[str], cfg_path: str) -> dict:
            from capplan import airflow_jobs as jobs

            return jobs.record_forecasts(cfg_path, tier, common.logical_date(), list(results or []), expected)

        common.per_series(fit, record)

    return forecast()


capplan_forecast_hourly = forecast_dag("hourly")
capplan_forecast_daily = forecast_dag("daily")
capplan_forecast_weekly = forecast_dag("weekly")
