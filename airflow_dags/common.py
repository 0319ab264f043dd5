"""Helpers shared by capplan's DAG files: Assets, defaults, the ``@dag`` defaults,
the ``config`` / ``series`` tasks and run-time lookups.

Only the standard library and ``airflow.sdk`` are imported here; capplan's
heavy modules load inside tasks.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import Asset, dag, task

from capplan.airflow_keys import CONFIG_VARIABLE, PLAN_TIERS, PROMETHEUS_CONN_ID, resolve_config_path

START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
TAGS = ["capplan"]

HISTORY_ASSET = Asset(name="capplan_history", uri="capplan://store/history", group="capplan")
FORECAST_ASSETS = {t: Asset(name=f"capplan_forecasts_{t}", uri=f"capplan://store/forecasts/{t}", group="capplan")
                   for t in PLAN_TIERS}
PLAN_ASSET = Asset(name="capplan_plans", uri="capplan://store/plans", group="capplan")


def env_int(name: str, default: int) -> int:
    """An integer setting from the environment (for deployments and tests)."""
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


# ingest: retries with exponential backoff (a Prometheus hiccup should not cost a run)
INGEST_RETRIES = env_int("CAPPLAN_INGEST_RETRIES", 3)
INGEST_RETRY_DELAY = dt.timedelta(seconds=env_int("CAPPLAN_INGEST_RETRY_DELAY_S", 60))
INGEST_MAX_RETRY_DELAY = dt.timedelta(minutes=10)
SEED = env_int("CAPPLAN_SEED", 0)


def config_path() -> str:
    """Path of capplan.yaml at run time: Airflow Variable ``capplan_config``, else env ``CAPPLAN_CONFIG``."""
    from airflow.sdk import Variable

    try:
        value = Variable.get(CONFIG_VARIABLE, default=None)
    except Exception:  # no metadata DB / API server reachable: fall back to the env variable
        value = None
    return str(resolve_config_path(value))


def prometheus_connection() -> dict | None:
    """The Airflow Connection ``capplan_prometheus`` as a plain dict, or None if undefined.

    The secrets in it go to :func:`capplan.airflow_jobs.connection_overrides` and are
    never returned by a task (so never stored in XCom or logs).
    """
    from airflow.sdk import Connection

    try:
        c = Connection.get(PROMETHEUS_CONN_ID)
    except Exception:  # AirflowNotFoundException: no such connection
        return None
    if c is None:
        return None
    return {"host": c.host, "schema": c.schema, "port": c.port, "login": c.login, "password": c.password,
            "extra": c.extra_dejson}


def logical_date() -> dt.datetime:
    """The run's logical date; for Asset-triggered runs (no logical date) its ``run_after``."""
    from airflow.sdk import get_current_context

    ctx = get_current_context()
    ld = ctx.get("logical_date")
    if ld is None:
        ld = ctx["dag_run"].run_after
    return ld


def label_map_index(series_id: str) -> None:
    """Show the series id instead of the map index in the UI (``map_index_template``)."""
    from airflow.sdk import get_current_context

    get_current_context()["series_label"] = series_id


# -- DAG building blocks -------------------------------------------------------------------
def capplan_dag(dag_id: str, schedule, doc_md: str | None, tags: list[str] | None = None):
    """``@dag`` with capplan's defaults: no catchup, one active run, tagged ``capplan``."""
    return dag(dag_id=dag_id, schedule=schedule, start_date=START, catchup=False, max_active_runs=1,
               tags=TAGS + list(tags or []), doc_md=doc_md)


@task
def config() -> str:
    """The config path, resolved once per run (:func:`config_path`)."""
    return config_path()


@task
def series(cfg_path: str) -> list[str]:
    """The configured series ids."""
    from capplan import airflow_jobs as jobs

    return jobs.series_ids(cfg_path)


def per_series(work, record) -> None:
    """Wire ``config -> series -> work`` (mapped, one task per series) ``-> record``.

    ``work(series_id, cfg_path)`` runs once per series; ``record(results,
    expected, cfg_path)`` gets every result and the expected series ids.
    """
    cfg_path = config()
    ids = series(cfg_path)
    done = work.partial(cfg_path=cfg_path).expand(series_id=ids)
    record(done, ids, cfg_path)
