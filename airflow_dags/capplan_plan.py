"""``capplan_plan``: runs when fresh forecasts exist (Airflow Assets, not a fixed delay).

Scheduled on any of the three forecast Assets: whenever a tier publishes, the
plan combines each tier's latest forecasts, searches policies, writes
``<store>/plans/<logical-date>/`` (policy.yaml, manifests/, report.json ...)
atomically, checks the manifests, and records the run in the store. Series
without history or without a forecast of some tier are left out and listed
under ``missing`` in ``report.json``.
"""

from __future__ import annotations

from airflow.sdk import dag, task

from airflow_dags import common

F = common.FORECAST_ASSETS


@dag(
    dag_id="capplan_plan",
    schedule=(F["hourly"] | F["daily"] | F["weekly"]),
    start_date=common.START,
    catchup=False,
    max_active_runs=1,
    tags=common.TAGS,
    doc_md=__doc__,
)
def capplan_plan():
    @task
    def config() -> str:
        return common.config_path()

    @task(outlets=[common.PLAN_ASSET])
    def plan(cfg_path: str) -> dict:
        from capplan import jobs

        res = jobs.plan(cfg_path, common.logical_date(), common.SEED)
        return {k: res[k] for k in ("run_id", "out", "planned", "missing")}

    plan(config())


DAG = capplan_plan()
