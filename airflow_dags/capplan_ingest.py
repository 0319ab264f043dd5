"""``capplan_ingest``: every 15 minutes, new history of every configured series into the store.

One mapped task per series (``.expand``): one series that cannot be pulled
fails its own task (after retries with exponential backoff) and is recorded
as missing; the others land. Prometheus credentials come from the Airflow
Connection ``capplan_prometheus`` (never from DAG code); the config path from
the Variable ``capplan_config`` or env ``CAPPLAN_CONFIG``.

A Connection that exists but cannot be read fails the task, naming it. Without
a Connection and without a ``prometheus:`` section, the ingest fails, unless the
config selects the embedded sample explicitly (``source: sample``).

The history Asset (which schedules the forecast DAGs) is emitted when at least one
series landed, with the failed ones in the event's ``extra``; when none did, the
``record`` task fails and no event is emitted.
"""

from __future__ import annotations

from airflow.sdk import TriggerRule, task

from airflow_dags import common


@common.capplan_dag("capplan_ingest", "*/15 * * * *", __doc__)
def capplan_ingest():
    @task(
        retries=common.INGEST_RETRIES,
        retry_delay=common.INGEST_RETRY_DELAY,
        retry_exponential_backoff=True,
        max_retry_delay=common.INGEST_MAX_RETRY_DELAY,
        map_index_template="{{ series_label }}",
        execution_timeout=common.TIMEOUTS["ingest"],
    )
    def ingest(series_id: str, cfg_path: str) -> dict:
        from capplan.airflow import jobs as jobs
        common.label_map_index(series_id)
        return jobs.ingest_series(cfg_path, series_id, common.prometheus_connection())

    @task(trigger_rule=TriggerRule.ALL_DONE, outlets=[common.HISTORY_ASSET])
    def record(results, expected: list[str], cfg_path: str) -> dict:
        from capplan.airflow import jobs as jobs
        doc = jobs.record_ingest(cfg_path, common.logical_date(), list(results or []), expected)
        if not doc["ok"]:
            raise common.nothing_succeeded("ingest", list(expected), common.HISTORY_ASSET)
        common.asset_extra(common.HISTORY_ASSET, doc)
        return doc

    common.per_series(ingest, record)


DAG = capplan_ingest()
