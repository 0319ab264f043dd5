"""One rule for tests that need a real service (Prometheus, a browser, Airflow, openssl):
locally a missing one skips the test; under CI (``CI=true``) it fails it."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """True under CI (``CI`` set to 1, true or yes)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(msg: str) -> None:
    """Skip with ``msg`` locally; fail with it under CI, where these tests must run."""
    if in_ci():
        pytest.fail(f"{msg} (CI=true: this test must run)", pytrace=False)
    pytest.skip(msg)
