"""The ``prometheus:`` section of ``capplan.yaml`` (:class:`PrometheusConfig`, :class:`BasicAuth`,
:class:`HeaderSecret`)
and :func:`parse_duration`, the Prometheus duration syntax the config's steps and windows use.
:mod:`capplan.config.settings` re-exports all three."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from optimizer.exporters.settings import check_prometheus_url

_DUR_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text: str) -> int:
    """A Prometheus duration (``30s``, ``5m``, ``1h30m``, ``30d``) in whole seconds (>= 1).

    Raises ValueError for anything else.
    """
    t = str(text).strip()
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", t)
    if not t or "".join(n + u for n, u in parts) != t:
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m, 1h or 30d")
    secs = sum(int(n) * _DUR_UNITS[u] for n, u in parts)
    if secs < 1 or secs != int(secs):
        raise ValueError(f"{text!r}: must be a whole number of seconds, at least 1s")
    return int(secs)


class BasicAuth(BaseModel):
    """HTTP basic auth; the password is read from the env variable ``password_env``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    username: str = Field(description="the basic-auth user name")
    password_env: str = Field(description="name of the environment variable holding the password (never the "
                              "password itself)")


class HeaderSecret(BaseModel):
    """Where the value of one extra HTTP header (a tenant id such as Mimir's ``X-Scope-OrgID``)
    comes from: the environment variable ``env`` or the file ``file`` (trailing newline dropped).
    The value is treated as a secret: never in the config, never printed."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    env: str | None = Field(default=None, description="name of the environment variable holding the header value")
    file: str | None = Field(default=None, description="file holding the header value (trailing newline dropped)")

    @model_validator(mode="after")
    def _one_source(self):
        if bool(self.env) == bool(self.file):
            raise ValueError("a header value needs exactly one of env (a variable name) or file (a path)")
        return self


class PrometheusConfig(BaseModel):
    """Where and how to reach Prometheus."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    url: str = Field(description="base URL, http(s)://host:port[/path]; no credentials or query in it")
    bearer_token_env: str | None = Field(default=None, description="name of the environment variable holding a "
                                         "bearer token (never the token itself)")
    basic_auth: BasicAuth | None = Field(default=None, description="basic auth instead of a bearer token")
    ca_file: str | None = Field(default=None, description="PEM file of the CA that signed the server's certificate")
    verify_tls: bool = Field(default=True, description="verify the server's TLS certificate")
    timeout_s: float = Field(default=30, gt=0, description="deadline of each whole request, body included (seconds)")
    max_points_per_request: int = Field(default=11000, ge=100, le=11000,
                                        description="points per series per query_range (Prometheus allows 11,000)")
    retries: int = Field(default=4, ge=0, le=20, description="retries after a timeout, connection error or 5xx/429")
    backoff_s: float = Field(default=1.0, ge=0, description="first retry wait; doubles per retry, capped at 30 s")
    default_lookback: str = Field(default="30d", description="range of a first pull when --start is not given")
    scrape_interval: str = Field(default="1m", description="how long a sample counts as current (Prometheus' "
                                 "default scrape interval); later points are missing, not repeated "
                                 "(capplan.promql.steps)")
    exported_labels: bool = Field(default=False, description="dcgm-exporter scraped without honorLabels: its "
                                  "namespace/pod/container labels arrive as exported_namespace/exported_pod/"
                                  "exported_container; used by the dcgm_* templates and the KEDA/adapter queries")
    headers: dict[str, HeaderSecret] = Field(default_factory=dict, description="extra HTTP headers sent with "
                                             "every request, e.g. X-Scope-OrgID: {env: MIMIR_TENANT} for Grafana "
                                             "Mimir/Cortex tenants; values from env or file only (docs/prometheus.md)")
    partial_response: bool = Field(default=False, description="accept Thanos partial responses; false sends "
                                   "partial_response=false so a store that cannot answer fails the request")

    @field_validator("url")
    @classmethod
    def _url(cls, v):
        return check_prometheus_url(v)

    @field_validator("default_lookback", "scrape_interval")
    @classmethod
    def _lookback(cls, v):
        parse_duration(v)
        return v

    @model_validator(mode="after")
    def _one_auth(self):
        if self.bearer_token_env and self.basic_auth:
            raise ValueError("set either bearer_token_env or basic_auth, not both")
        return self
