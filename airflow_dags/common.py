"""Helpers shared by capplan's DAG files: Assets, defaults, the ``@dag`` defaults,
the ``config`` / ``series`` tasks and run-time lookups.

Only the standard library and ``airflow.sdk`` are imported here; capplan's
heavy modules load inside tasks.

Every task retries (``CAPPLAN_TASK_RETRIES``, default 2) and has an
``execution_timeout``; the fits and the plan run in the Airflow pool
``CAPPLAN_POOL`` (default ``capplan_fits``: create it, e.g. ``airflow pools set
capplan_fits 2 "capplan fits"``). An Asset is emitted only when at least one series
succeeded, with the series that failed in the event's ``extra``; when none did, the
``record`` task fails and no event is emitted.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import Asset, dag, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

from capplan.airflow.keys import CONFIG_VARIABLE, PLAN_TIERS, PROMETHEUS_CONN_ID, resolve_config_path

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
# every other task: a few retries, and a time limit (a hung fit must not hold a worker slot forever)
TASK_RETRIES = env_int("CAPPLAN_TASK_RETRIES", 2)
TASK_RETRY_DELAY = dt.timedelta(seconds=env_int("CAPPLAN_TASK_RETRY_DELAY_S", 120))
TASK_TIMEOUT = dt.timedelta(minutes=10)  # config, series, record
TIMEOUTS = {"ingest": dt.timedelta(minutes=30), "hourly": dt.timedelta(minutes=30), "daily": dt.timedelta(hours=3),
            "weekly": dt.timedelta(hours=3), "plan": dt.timedelta(hours=3)}
POOL = os.environ.get("CAPPLAN_POOL", "capplan_fits")
"""The Airflow pool of the heavy tasks (model fits, the plan's search): its slots bound how many run at once."""


def config_path() -> str:
    """Path of capplan.yaml at run time: Airflow Variable ``capplan_config``, else env ``CAPPLAN_CONFIG``."""
    from airflow.sdk import Variable

    try:
        value = Variable.get(CONFIG_VARIABLE, default=None)
    except Exception:  # no metadata DB / API server reachable: fall back to the env variable
        value = None
    return str(resolve_config_path(value))


def prometheus_connection() -> dict | None:
    """The Airflow Connection ``capplan_prometheus`` as a plain dict, or None when it is not
    defined (``AirflowNotFoundException`` only).

    The secrets in it go to :func:`capplan.airflow.jobs.connection_overrides` and are
    never returned by a task (so never stored in XCom or logs).

    Raises AirflowException naming the Connection when it exists but cannot be read (a
    secrets backend down, access denied, an ``extra`` that is not JSON): the task fails
    (and retries) instead of running without it.
    """
    import json

    from airflow.sdk import Connection

    try:
        c = Connection.get(PROMETHEUS_CONN_ID)
    except AirflowNotFoundException:
        return None
    except Exception as exc:  # noqa: BLE001 - re-raised with the Connection's name; the cause's text may hold a secret
        raise AirflowException(f"Airflow Connection {PROMETHEUS_CONN_ID!r} could not be read ({type(exc).__name__}); "
                               "check the secrets backend and the Connection. The ingest does not run without "
                               "it") from None
    if c is None:
        return None
    extra = c.extra or ""
    try:
        parsed = json.loads(extra) if extra.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise AirflowException(f"Airflow Connection {PROMETHEUS_CONN_ID!r}: its extra is not a JSON object")
    return {"host": c.host, "schema": c.schema, "port": c.port, "login": c.login, "password": c.password,
            "extra": parsed}


def succeeded(results) -> list[dict]:
    """The results of the mapped tasks that succeeded (a failed one gives None)."""
    return [r for r in (results or []) if r]


def nothing_succeeded(what: str, expected: list[str], asset: Asset) -> AirflowFailException:
    """The failure of a ``record`` task when no series succeeded: the Asset is not emitted."""
    shown = ", ".join(expected[:5]) + (f" and {len(expected) - 5} more" if len(expected) > 5 else "")
    return AirflowFailException(f"{what}: no series succeeded ({shown}); Asset {asset.name!r} is not updated")


def asset_extra(asset: Asset, doc: dict) -> None:
    """Put the series that succeeded and those that failed into the Asset event's ``extra``."""
    from airflow.sdk import get_current_context

    get_current_context()["outlet_events"][asset].extra = {
        "logical_date": doc.get("logical_date"), "ok": list(doc.get("ok", [])), "missing": list(doc.get("missing", [])),
        "partial": bool(doc.get("missing"))}


CADENCE = {"hourly": dt.timedelta(hours=1), "daily": dt.timedelta(days=1), "weekly": dt.timedelta(days=7)}
"""How often each tier is refitted; its DAG runs on every history update but fits at most this often."""
CADENCE_SLACK = dt.timedelta(minutes=10)
"""A refit is due this much before a full cadence has passed (ingest runs drift by a few minutes)."""


def tier_due(cfg_path: str, tier: str, now: dt.datetime) -> bool:
    """Whether ``tier`` should refit at ``now``: it never ran, this is a rerun of its latest
    run (same logical date), or its latest run is at least :data:`CADENCE` old (less
    :data:`CADENCE_SLACK`). Reads ``forecasts/<tier>/LATEST`` of the config's store."""
    from capplan.airflow.keys import ld_key
    from capplan.config.settings import load_config  # lazy: DAG files are parsed often; these load when a task runs
    from capplan.store.local import Store

    latest = Store(load_config(cfg_path).store).latest_forecasts(tier)
    if latest is None or latest[0] == ld_key(now):
        return True
    last = dt.datetime.strptime(latest[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    return now - last >= CADENCE[tier] - CADENCE_SLACK


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
    """``@dag`` with capplan's defaults: no catchup, one active run, tagged ``capplan``, every task
    with :data:`TASK_RETRIES` retries and :data:`TASK_TIMEOUT` unless it sets its own."""
    return dag(dag_id=dag_id, schedule=schedule, start_date=START, catchup=False, max_active_runs=1,
               tags=TAGS + list(tags or []), doc_md=doc_md,
               default_args={"retries": TASK_RETRIES, "retry_delay": TASK_RETRY_DELAY,
                             "execution_timeout": TASK_TIMEOUT})


@task
def config() -> str:
    """The config path, resolved once per run (:func:`config_path`)."""
    return config_path()


@task
def series(cfg_path: str) -> list[str]:
    """The configured series ids."""
    from capplan.airflow import jobs as jobs
    return jobs.series_ids(cfg_path)


def per_series(work, record, gate=None) -> None:
    """Wire ``config [-> gate] -> series -> work`` (mapped, one task per series) ``-> record``.

    ``work(series_id, cfg_path)`` runs once per series; ``record(results,
    expected, cfg_path)`` gets every result and the expected series ids;
    ``gate(cfg_path)``, a short-circuit task, skips the rest of the run when it returns False.
    """
    cfg_path = config()
    ids = series(cfg_path)
    if gate is not None:
        gate(cfg_path) >> ids
    done = work.partial(cfg_path=cfg_path).expand(series_id=ids)
    record(done, ids, cfg_path)
