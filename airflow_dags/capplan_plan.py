"""``capplan_plan``: runs when fresh forecasts exist (Airflow Assets, not a fixed delay).

Scheduled on any of the three forecast Assets: whenever a tier publishes, the
plan combines each tier's latest forecasts, searches policies, writes
``<store>/plans/<logical-date>/`` (policy.yaml, manifests/, report.json ...)
atomically, checks the manifests, and records the run in the store. Series
without history or without a forecast of some tier are left out and listed
under ``missing`` in ``report.json``.
"""

from __future__ import annotations

from airflow.sdk import task

from airflow_dags import common

F = common.FORECAST_ASSETS


@common.capplan_dag("capplan_plan", F["hourly"] | F["daily"] | F["weekly"], __doc__)
def capplan_plan():
    @task(outlets=[common.PLAN_ASSET], pool=common.POOL, execution_timeout=common.TIMEOUTS["plan"])
    def plan(cfg_path: str) -> dict:
        from capplan.airflow import jobs as jobs
        res = jobs.plan(cfg_path, common.logical_date(), common.SEED)
        return {k: res[k] for k in ("run_id", "out", "planned", "missing")}

    plan(common.config())


DAG = capplan_plan()
