"""Export settings (the ``export:`` section of ``capplan.yaml``).

Units: ratios are 0–1, percentages are named ``*_percent``, seconds ``*_s``.
``capplan.config.settings.ExportConfig`` subclasses :class:`ExportSettings`, so the
optimizer layer never imports ``capplan``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: serverAddress when neither export.prometheus_url nor prometheus.url is configured:
#: the Service that prometheus-operator (kube-prometheus-stack) creates. Marked in the manifest.
PROMETHEUS_PLACEHOLDER = "http://prometheus-operated.monitoring.svc:9090"


def check_prometheus_url(v: str) -> str:
    """A Prometheus base URL as capplan pulls from it and KEDA's ``serverAddress`` takes it:
    ``http(s)://host[:port][/path]``, returned without a trailing slash.

    Raises
    ------
    ValueError: another scheme, no host, an invalid port, credentials in the URL (they would be written into the
        manifests and logs; use ``basic_auth``/``bearer_token_env`` for pulls and ``keda_auth`` for
        KEDA), or a query string or fragment (where tokens hide; KEDA appends its own query).
    """
    from urllib.parse import urlparse

    u = urlparse(v)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError("must be an http:// or https:// URL")
    if u.username or u.password or "@" in v.split("://", 1)[-1].split("?", 1)[0].split("#", 1)[0]:
        # any "@" before the query: a secret holding "/" ends urllib's user-info early (the same rule as
        # capplan.store.remote.check_store_url)
        raise ValueError("must not contain credentials; use basic_auth with password_env, or bearer_token_env "
                         "(for KEDA: export.keda_auth)")
    if u.query or u.fragment:
        raise ValueError("must not have a query string or fragment (tokens belong in bearer_token_env or keda_auth)")
    try:
        u.port  # noqa: B018  (urllib checks the port only when asked)
    except ValueError:
        raise ValueError("has an invalid port (a number from 1 to 65535)") from None
    if u.params:
        raise ValueError("must not have ';' parameters")
    return v.rstrip("/")


class TargetSettings(BaseModel):
    """Where one inference series runs: the workload the autoscaler scales."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, description="Deployment name (RFC 1123 label); default: the series "
                             "id's last part, sanitised")
    namespace: str | None = Field(default=None, description="namespace of the workload; default: export.namespace")
    kind: Literal["Deployment", "StatefulSet"] = Field(default="Deployment", description="kind of the workload")
    gpus_per_replica: int = Field(default=1, ge=1, description="GPUs each replica holds (scales the per-replica "
                                  "threshold of the summed DCGM utilisation)")

    @field_validator("name", "namespace")
    @classmethod
    def _label(cls, v: str | None) -> str | None:
        if v is not None and not _RFC1123_LABEL.match(v):
            raise ValueError(f"{v!r} is not a valid name (RFC 1123 label: lower-case a-z, 0-9, '-')")
        return v


class KedaAuthSettings(BaseModel):
    """How KEDA authenticates to Prometheus. Credentials come from a Secret that
    the cluster owner creates; capplan writes only the reference.

    ``mode: auto`` (the default) follows the ``prometheus:`` section of
    ``capplan.yaml``: ``bearer`` when it names ``bearer_token_env``, ``basic``
    when it names ``basic_auth``, else ``none`` — a plain trigger with no
    TriggerAuthentication, so nothing refers to a Secret that does not exist.

    See KEDA docs "Prometheus" scaler (``authModes``) and "Authentication"
    (``TriggerAuthentication.spec.secretTargetRef``).

    * ``mode``: ``auto``, ``none``, ``bearer`` or ``basic`` (above).
    * ``secret_name``: the Secret the TriggerAuthentication refers to (you create it).
    * ``bearer_key``/``username_key``/``password_key``: the keys of that Secret holding the token,
      the user name and the password.
    """

    model_config = ConfigDict(extra="forbid")
    mode: Literal["auto", "none", "bearer", "basic"] = "auto"
    secret_name: str = "capplan-prometheus-auth"
    bearer_key: str = "bearerToken"
    username_key: str = "username"
    password_key: str = "password"

    @field_validator("secret_name")
    @classmethod
    def _label(cls, v: str) -> str:
        if len(v) > 253 or not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", v):
            raise ValueError(f"{v!r} is not a valid Secret name (RFC 1123 subdomain)")
        return v


DEFAULT_SCRAPE_S = 60  # Prometheus' default scrape_interval (1m; Prometheus docs, "Configuration")


class ExportSettings(BaseModel):
    """What the manifest writers produce and how.

    * ``autoscaler``: which inference autoscaler goes into ``manifests/``
      (``keda`` — a ScaledObject with a prometheus trigger and cron pre-scaling;
      ``hpa`` — an ``autoscaling/v2`` HPA on an External metric served by
      prometheus-adapter). The other one is written to ``alternatives/`` so
      that two autoscalers never fight over one Deployment.
    * ``gpu_metric``: the DCGM gauge scaled on; ``DCGM_FI_DEV_GPU_UTIL`` is a
      percentage 0–100 per GPU (NVIDIA DCGM field reference), so thresholds are
      written in percent.
    * ``activation_threshold_percent``: KEDA ``activationThreshold``: compared
      with the whole query result (not per replica); only matters for 0 <-> 1.
    * ``prometheus_url``: KEDA's ``serverAddress``; default: ``prometheus.url``
      of ``capplan.yaml``, else :data:`PROMETHEUS_PLACEHOLDER` (marked as a
      placeholder in the manifest and warned about).
    * ``fallback_failure_threshold``/``fallback_replicas``: KEDA ``fallback``;
      ``fallback_replicas=None`` uses the plan's p95 replicas for the next 24 h
      (:func:`optimizer.inference.prescale.fallback_replicas`).
    * ``capability_limit``: Volcano ``capability`` is at most the pool's quota
      (``quota``, the default) or the plan's cap even above it (``plan``).
    * ``allow_scale_to_zero``: permit ``minReplicaCount: 0`` (KEDA only).
    * ``reclaimable``: Volcano ``Queue.spec.reclaimable``.
    * ``resource_metrics``: extra HPA Resource metrics (``cpu``/``memory``
      target utilisation in percent), off unless configured.
    * ``kubernetes_version``: schema version for ``kubernetes-validate``.
    * ``scrape_interval_s``: how often the GPU metric is scraped (seconds); the ``lookahead``
      family's query takes each step's peak at this resolution, as a pull stores it
      (:func:`optimizer.inference.lookahead.promql`). Default: ``prometheus.scrape_interval`` of
      ``capplan.yaml``, else :data:`DEFAULT_SCRAPE_S` (Prometheus' default, 1m).
    * ``namespace``: the namespace of every object whose series names none (``targets``).
    * ``pod_label``: the label holding the pod's name on ``gpu_metric`` (``exported_pod`` when
      dcgm-exporter is scraped without honorLabels).
    * ``polling_interval_s``/``cooldown_period_s``: KEDA ``pollingInterval`` and ``cooldownPeriod``.
    * ``queue_weight``: Volcano ``Queue.spec.weight``.
    * ``gpu_resource``: the extended resource name of a GPU.
    * ``priority_classes``: write the three PriorityClasses of the preemption tiers.
    * ``targets``: per series id, the workload its autoscaler scales (name, namespace, kind,
      GPUs per replica).
    * ``keda_auth``: how KEDA authenticates to Prometheus.
    """

    model_config = ConfigDict(extra="forbid")
    namespace: str = "default"
    prometheus_url: str | None = None
    autoscaler: Literal["keda", "hpa"] = "keda"
    gpu_metric: str = "DCGM_FI_DEV_GPU_UTIL"
    pod_label: str = "pod"
    namespace_label: str = Field(default="namespace", description="label holding the workload's namespace on "
                                 "gpu_metric: exported_namespace when dcgm-exporter is scraped without honorLabels")
    activation_threshold_percent: float = Field(default=5, ge=0)
    fallback_failure_threshold: int = Field(default=3, ge=1)
    fallback_replicas: int | None = Field(default=None, ge=0)
    polling_interval_s: int = Field(default=30, ge=1)
    cooldown_period_s: int = Field(default=300, ge=0)
    allow_scale_to_zero: bool = False
    reclaimable: bool = True
    capability_limit: Literal["quota", "plan"] = "quota"
    queue_weight: int = Field(default=1, ge=1)
    gpu_resource: str = "nvidia.com/gpu"
    resource_metrics: dict[Literal["cpu", "memory"], int] = Field(default_factory=dict)
    priority_classes: bool = True
    targets: dict[str, TargetSettings] = Field(default_factory=dict)
    keda_auth: KedaAuthSettings = Field(default_factory=KedaAuthSettings)
    kubernetes_version: str = "1.30"
    schemas_dir: str | None = Field(default=None, description="folder with the CRD schemas; default: the packaged ones")
    predictive_metric: bool = Field(default=False, description="scale inference services on capplan serve's "
                                    "predicted demand instead of cron pre-scaling windows "
                                    "(optimizer.exporters.predictive)")
    predictive_lead_s: int = Field(default=150, ge=0, le=7200, description="lead of the served forecast (s): "
                                   "cold start + metrics lag, as plan.cold_start_s + plan.metrics_lag_s")
    scrape_interval_s: int | None = Field(default=None, ge=1, le=3600, description="scrape interval of gpu_metric "
                                          "(s); default: prometheus.scrape_interval, else 60")
    custom_headers: dict[str, str] = Field(default_factory=dict, description="headers KEDA's Prometheus scaler "
                                           "sends (its `customHeaders` metadata), e.g. {X-Scope-OrgID: team-a} for "
                                           "a Mimir/Cortex tenant; written in clear text into the ScaledObject, so "
                                           "only for values that are not secret")

    @field_validator("custom_headers")
    @classmethod
    def _custom_headers(cls, v):
        for k, val in v.items():
            if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", k) or k.lower() in ("authorization", "host"):
                raise ValueError(f"custom_headers: {k!r} is not an allowed header name (Authorization goes in "
                                 "keda_auth)")
            if not val or re.search(r"[,=\s]", val) or not val.isprintable():
                raise ValueError(f"custom_headers.{k}: the value must be non-empty without commas, '=' or spaces "
                                 "(KEDA reads `name=value,name=value`)")
        return v

    @field_validator("prometheus_url")
    @classmethod
    def _prometheus_url(cls, v):
        """KEDA's serverAddress is written into the manifests: no credentials (:func:`check_prometheus_url`)."""
        return None if v is None else check_prometheus_url(v)

    @property
    def scrape_seconds(self) -> int:
        """``scrape_interval_s`` or :data:`DEFAULT_SCRAPE_S`."""
        return self.scrape_interval_s or DEFAULT_SCRAPE_S

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        if not _RFC1123_LABEL.match(v):
            raise ValueError(f"{v!r} is not a valid namespace (RFC 1123 label)")
        return v

    @field_validator("pod_label", "namespace_label")
    @classmethod
    def _prom_label(cls, v: str) -> str:
        if not re.match(r"^[a-zA-Z_][a-zA-Z0-9_]*$", v):
            raise ValueError(f"{v!r} is not a Prometheus label name")
        return v

    @property
    def auth_mode(self) -> str:
        """``keda_auth.mode`` with ``auto`` resolved (``none`` unless the capplan config set it)."""
        return "none" if self.keda_auth.mode == "auto" else self.keda_auth.mode

    @property
    def server_address(self) -> str:
        """KEDA ``serverAddress``: ``prometheus_url`` or :data:`PROMETHEUS_PLACEHOLDER`."""
        return self.prometheus_url or PROMETHEUS_PLACEHOLDER

    @field_validator("resource_metrics")
    @classmethod
    def _pct(cls, v: dict) -> dict:
        for k, x in v.items():
            if not 1 <= x <= 1000:
                raise ValueError(f"resource_metrics.{k}: {x} is a percent of the request, expected 1–1000")
        return v


def coerce(settings) -> ExportSettings:
    """``None`` | dict | ExportSettings -> ExportSettings (raises pydantic ValidationError)."""
    if settings is None:
        return ExportSettings()
    if isinstance(settings, ExportSettings):
        return settings
    if isinstance(settings, BaseModel):
        return ExportSettings.model_validate(settings.model_dump())
    return ExportSettings.model_validate(dict(settings))
