"""``capplan_forecast_hourly`` / ``capplan_forecast_daily`` / ``capplan_forecast_weekly``:
each refits one tier at its own cadence, on fresh history.

| DAG | tier | model | runs | refits at most |
| --- | --- | --- | --- | --- |
| capplan_forecast_hourly | hourly | exponential smoothing, 5 min, 1 h ahead | on the history Asset | hourly |
| capplan_forecast_daily | daily | LSTM, 1 h, 24 h ahead | on the history Asset | daily |
| capplan_forecast_weekly | weekly | Prophet with China holidays, 1 h, 7 d ahead | on the history Asset | weekly |

Each DAG is scheduled on the history Asset (``capplan_ingest`` emits it once history
has landed), so a fit never reads history that is still being written. A ``due``
task skips the run when the tier's latest forecasts are younger than its cadence
(:func:`airflow_dags.common.tier_due`).

One mapped task per series (``.expand``, in the pool :data:`airflow_dags.common.POOL`)
writes ``<store>/forecasts/<tier>/<logical-date>/<series-key>.parquet`` (plus its
rolling-origin backtest forecasts); a series whose task fails is listed as
missing in the tier's ``_manifest.json``. The ``record`` task then emits the
tier's Asset (the failed series in its ``extra``), which schedules ``capplan_plan``;
when every series failed it fails instead, ``forecasts/<tier>/LATEST`` keeps
pointing at the last good run and no Asset event is emitted.
"""

from __future__ import annotations

from airflow.sdk import TriggerRule, task

from airflow_dags import common


def forecast_dag(tier: str):
    asset = common.FORECAST_ASSETS[tier]

    @common.capplan_dag(f"capplan_forecast_{tier}", common.HISTORY_ASSET, __doc__, tags=["forecast"])
    def forecast():
        @task.short_circuit
        def due(cfg_path: str) -> bool:
            return common.tier_due(cfg_path, tier, common.logical_date())

        @task(max_active_tis_per_dagrun=2, map_index_template="{{ series_label }}", pool=common.POOL,
              execution_timeout=common.TIMEOUTS[tier])
        def fit(series_id: str, cfg_path: str) -> dict:
            from capplan.airflow import jobs as jobs
            common.label_map_index(series_id)
            return jobs.forecast_series(cfg_path, tier, series_id, common.logical_date(), common.SEED)

        @task(trigger_rule=TriggerRule.ALL_DONE, outlets=[asset])
        def record(results, expected: list[str], cfg_path: str) -> dict:
            from capplan.airflow import jobs as jobs
            ok = common.succeeded(results)
            if not ok:
                raise common.nothing_succeeded(f"{tier} forecasts", list(expected), asset)
            doc = jobs.record_forecasts(cfg_path, tier, common.logical_date(), ok, expected)
            common.asset_extra(asset, doc)
            return doc

        common.per_series(fit, record, gate=due)

    return forecast()


capplan_forecast_hourly = forecast_dag("hourly")
capplan_forecast_daily = forecast_dag("daily")
capplan_forecast_weekly = forecast_dag("weekly")
