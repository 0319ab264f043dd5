"""Shared fixtures. The real-Prometheus fixtures live in tests/prom_fixture.py."""

from tests.prom_fixture import prom, prom_data, prom_factory  # noqa: F401
