"""What the Airflow DAG files need at parse time: the names of the config Variable and the
Prometheus Connection, the tiers, the logical-date key and the config path. Standard library
only, so parsing a DAG file loads nothing heavy; the jobs themselves are :mod:`capplan.airflow.jobs`.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

CONFIG_ENV = "CAPPLAN_CONFIG"
CONFIG_VARIABLE = "capplan_config"
PROMETHEUS_CONN_ID = "capplan_prometheus"
PLAN_TIERS = ("hourly", "daily", "weekly")


class JobError(RuntimeError):
    """A job cannot run (bad setup, missing inputs); the message says what to do."""


def ld_key(logical_date: Any) -> str:
    """Folder-safe key of a logical date: UTC, ``YYYYMMDDTHHMMSSZ``.

    Accepts a datetime (naive is taken as UTC) or an ISO string.
    """
    if isinstance(logical_date, str):
        logical_date = dt.datetime.fromisoformat(logical_date.replace("Z", "+00:00"))
    if not isinstance(logical_date, dt.datetime):
        raise JobError(f"logical date {logical_date!r}: not a datetime")
    if logical_date.tzinfo is None:
        logical_date = logical_date.replace(tzinfo=dt.timezone.utc)
    return logical_date.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def resolve_config_path(variable_value: str | None = None) -> Path:
    """The path of ``capplan.yaml``: the Airflow Variable's value if given, else
    the env variable ``CAPPLAN_CONFIG``.

    Raises JobError when neither is set or the file does not exist.
    """
    raw = variable_value or os.environ.get(CONFIG_ENV)
    if not raw:
        raise JobError(f"no capplan config: set the Airflow Variable {CONFIG_VARIABLE!r} or the env variable "
                       f"{CONFIG_ENV} to the path of capplan.yaml")
    p = Path(raw).expanduser()
    if not p.is_file():
        raise JobError(f"capplan config {p}: file not found (from Variable {CONFIG_VARIABLE!r} or {CONFIG_ENV})")
    return p
