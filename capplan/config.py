"""Settings: one pydantic model for ``capplan.yaml``, validated with clear errors.

Example (every key is optional except where noted; see the README)::

    prometheus:
      url: http://127.0.0.1:9090
      bearer_token_env: PROM_TOKEN          # or basic_auth: {username, password_env}
      ca_file: /path/ca.pem                 # TLS is verified by default
      timeout_s: 30
    series:
      - id: train/team-a
        kind: training
        unit: gpu
        query: sum(kube_pod_container_resource_requests{resource="nvidia_com_gpu", namespace="team-a"})
        step: 5m
        gpu_model: A100-80GB
    store: .capplan/store
    plan:
      coverage_target: 0.95
      n_calls: 30
    prices:
      A100-80GB: {on_demand: 5.12, reserved: 3.07, spot: 2.05}

YAML is read with ``yaml.safe_load``. Secrets are never stored in the file:
only the *names* of environment variables that hold them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from capplan.errors import InputError, looks_like_name
from capplan.remote_models import RemoteModelRegistry
from capplan.retention import RetentionConfig
from optimizer.exporters.problem import yaml_problem
from optimizer.exporters.settings import ExportSettings, TargetSettings, check_prometheus_url
from optimizer.prices import GpuPrice, default_price_book
from optimizer.settings import SearchSettings


_DUR_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text: str) -> int:
    """A Prometheus duration (``30s``, ``5m``, ``1h30m``, ``30d``) in whole seconds (>= 1).

    Raises ValueError for anything else.
    """
    import re

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

    model_config = ConfigDict(extra="forbid")
    username: str
    password_env: str


class PrometheusConfig(BaseModel):
    """Where and how to reach Prometheus."""

    model_config = ConfigDict(extra="forbid")
    url: str
    bearer_token_env: str | None = None
    basic_auth: BasicAuth | None = None
    ca_file: str | None = None
    verify_tls: bool = True
    timeout_s: float = Field(default=30, gt=0)
    max_points_per_request: int = Field(default=11000, ge=100, le=11000,
                                        description="points per series per query_range (Prometheus allows 11,000)")
    retries: int = Field(default=4, ge=0, le=20, description="retries after a timeout, connection error or 5xx/429")
    backoff_s: float = Field(default=1.0, ge=0, description="first retry wait; doubles per retry, capped at 30 s")
    default_lookback: str = Field(default="30d", description="range of a first pull when --start is not given")
    scrape_interval: str = Field(default="1m", description="how long a sample counts as current (Prometheus' "
                                 "default scrape interval); later points are missing, not repeated (capplan.promql_steps)")
    exported_labels: bool = Field(default=False, description="dcgm-exporter scraped without honorLabels: its "
                                  "namespace/pod/container labels arrive as exported_namespace/exported_pod/"
                                  "exported_container; used by the dcgm_* templates and the KEDA/adapter queries")

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


class SeriesConfig(BaseModel):
    """One demand series pulled from Prometheus (``query`` or ``template`` + ``selector``)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    kind: Literal["training", "inference"] = "training"
    unit: Literal["gpu", "replica"] = "gpu"
    query: str | None = None
    template: str | None = None
    selector: dict[str, str] = Field(default_factory=dict)
    step: str = "5m"
    gpu_model: str = "default"
    gpus_per_replica: float = Field(default=1.0, gt=0)
    timezone: str = "Asia/Shanghai"
    namespace: str | None = Field(default=None, description="namespace of the workload (KEDA/HPA objects go there); "
                                  "export.targets.<id>.namespace wins")
    target: str | None = Field(default=None, description="Deployment name for HPA/KEDA (inference); "
                               "export.targets.<id>.name wins")
    params: dict[str, str] = Field(default_factory=dict, description="template parameters, e.g. metric, window")
    aggregate: Literal["sum", "avg", "max", "min"] | None = Field(
        default=None, description="how several returned label sets combine; default: the query's outer aggregation")
    step_aggregation: Literal["max", "last"] = Field(
        default="max", description="what one stored point holds: the peak of its step (capacity must cover "
        "peaks) or the last value of the step (capplan.promql_steps)")
    scrape_interval: str | None = Field(default=None, description="overrides prometheus.scrape_interval")

    @model_validator(mode="after")
    def _query_or_template(self):
        if bool(self.query) == bool(self.template):
            raise ValueError(f"series {self.id!r}: set exactly one of 'query' or 'template'")
        if self.template:
            from capplan import promql

            try:
                promql.render(self.template, self.selector, self.params)
            except InputError as exc:
                raise ValueError(f"series {self.id!r}: {exc}") from None
        elif self.selector or self.params:
            raise ValueError(f"series {self.id!r}: selector and params apply to a template, not to query")
        for name in ("step", "scrape_interval"):
            try:
                if getattr(self, name) is not None:
                    parse_duration(getattr(self, name))
            except ValueError as exc:
                raise ValueError(f"series {self.id!r}: {name}: {exc}") from None
        if self.query:
            from capplan.promql_steps import window_selectors

            try:
                window_selectors(self.query, "last_over_time", 60)
            except ValueError as exc:
                raise ValueError(f"series {self.id!r}: query: {exc}") from None
        return self

    def promql(self, exported_labels: bool = False) -> str:
        """The PromQL as configured: ``query`` as written, or the rendered ``template``
        (see :mod:`capplan.promql`; ``exported_labels`` as in :class:`PrometheusConfig`)."""
        if self.query:
            return self.query
        from capplan import promql

        return promql.render(self.template, self.selector, self.params, exported_labels=exported_labels)

    def combination(self, prom: "PrometheusConfig") -> str | None:
        """How the query's label sets add up: ``aggregate``, else the query's outer
        aggregation (count -> sum, group -> max), else None (they must not overlap)."""
        from capplan.promql import outer_aggregation

        how = self.aggregate or outer_aggregation(self.promql(prom.exported_labels))
        return {"count": "sum", "group": "max"}.get(how, how)

    def pull_query(self, prom: "PrometheusConfig", count: bool = False) -> str:
        """The PromQL a pull sends: :meth:`promql` rewritten so that a point is the
        peak (or last value) of its step and samples go stale after the scrape
        interval (:func:`capplan.promql_steps.step_query`). ``count``: the most
        label sets present at once within each step instead (overlap check)."""
        from capplan.promql_steps import step_query

        window = parse_duration(self.scrape_interval or prom.scrape_interval)
        q = self.promql(prom.exported_labels)
        if count:
            return step_query(f"count({q})", self.step_seconds(), window, "max")
        return step_query(q, self.step_seconds(), window, self.step_aggregation, self.combination(prom))

    def step_seconds(self) -> int:
        """``step`` in whole seconds."""
        return parse_duration(self.step)


class ForecastConfig(BaseModel):
    """Tier options."""

    model_config = ConfigDict(extra="forbid")
    lstm_epochs: int = Field(default=20, ge=1)
    lstm_units: int = Field(default=32, ge=1)
    lstm_max_windows: int = Field(default=2000, ge=16)
    prophet_samples: int = Field(default=300, ge=50)
    events: list[str] = Field(default_factory=list)
    registry_keep: int = Field(default=5, ge=1, description="model versions kept per series and tier in the "
                               "registry (`models:`); older ones are removed after each save")

    def registry(self, root: str):
        """The model registry at ``root`` with this retention (:class:`forecasting.registry.ModelRegistry`)."""
        from forecasting.registry import ModelRegistry

        if "://" in str(root):  # an object store (capplan.remote_models)
            return RemoteModelRegistry(str(root), keep=self.registry_keep)
        return ModelRegistry(root, keep=self.registry_keep)

    def tier_options(self) -> dict[str, dict]:
        """Keyword options of each model's constructor (:func:`forecasting.tiers.make`)."""
        return {
            "hourly": {},
            "daily": {"epochs": self.lstm_epochs, "units": self.lstm_units, "max_windows": self.lstm_max_windows},
            "weekly": {"uncertainty_samples": self.prophet_samples, "events": tuple(self.events)},
            "prophet": {"uncertainty_samples": self.prophet_samples},
        }


class PlanConfig(SearchSettings):
    """The ``plan:`` section: the search and replay options (fields, units and the
    typed ``training_bounds`` / ``inference_bounds`` in
    :class:`optimizer.settings.SearchSettings`) plus the windows and parallelism, e.g.::

        plan:
          coverage_target: 0.95
          n_calls: 30
          training_bounds: {reservation_ratio: [0.0, 1.5], quantile: [p90, p95]}
          inference_bounds: {min_replicas: [1, 4], max_replicas: 40}
    """

    model_config = ConfigDict(extra="forbid")
    tune_days: float = Field(default=7, gt=0)
    eval_days: float = Field(default=7, gt=0)
    executor: Literal["local", "processes", "dask"] = Field(
        default="processes", description="where the per-series work runs (capplan.executor): local (this "
        "process), processes (a pool here), dask (a dask.distributed cluster)")
    scheduler: str | None = Field(default=None, description="dask scheduler address, e.g. tcp://dask-scheduler:8786; "
                                  "without it executor dask starts a LocalCluster of `workers` processes")
    workers: int | None = Field(default=None, ge=1, description="worker processes for executor processes, or of the "
                                "dask LocalCluster (default: up to 2)")

    @model_validator(mode="after")
    def _scheduler(self):
        if self.scheduler is not None:
            if self.executor != "dask":
                raise ValueError(f"scheduler {self.scheduler!r} needs executor: dask (not {self.executor})")
            if "://" not in self.scheduler:
                raise ValueError(f"scheduler {self.scheduler!r}: expected an address such as tcp://HOST:8786")
        return self

    def search_settings(self) -> SearchSettings:
        """The part the optimizer reads (picklable, no ``capplan`` type)."""
        return SearchSettings.model_validate(self.model_dump(include=set(SearchSettings.model_fields)))


class ExportConfig(ExportSettings):
    """The ``export:`` section: what the manifest writers produce (fields and units in
    :class:`optimizer.exporters.settings.ExportSettings`), e.g.::

        export:
          namespace: inference
          autoscaler: keda            # or hpa (External DCGM metric via prometheus-adapter)
          prometheus_url: http://prometheus-operated.monitoring.svc:9090
          keda_auth: {mode: bearer, secret_name: capplan-prometheus-auth}
          targets:
            infer/llm-chat: {name: llm-chat, namespace: llm, gpus_per_replica: 2}
    """


class CapplanConfig(BaseModel):
    """The whole ``capplan.yaml``."""

    model_config = ConfigDict(extra="forbid")
    prometheus: PrometheusConfig | None = None
    series: list[SeriesConfig] = Field(default_factory=list)
    store: str = ".capplan/store"
    models: str = "models"
    plan: PlanConfig = Field(default_factory=PlanConfig)
    forecast: ForecastConfig = Field(default_factory=ForecastConfig)
    prices: dict[str, GpuPrice] = Field(default_factory=dict)
    export: ExportConfig = Field(default_factory=ExportConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)  # runs kept, backtest size (capplan.retention)

    @model_validator(mode="after")
    def _exported_labels(self):
        """``prometheus.exported_labels`` also sets the KEDA/adapter label names
        (``export.namespace_label``/``pod_label``) unless those are set."""
        if self.prometheus is not None and self.prometheus.exported_labels:
            if "namespace_label" not in self.export.model_fields_set:
                self.export.namespace_label = "exported_namespace"
            if "pod_label" not in self.export.model_fields_set:
                self.export.pod_label = "exported_pod"
        return self

    @field_validator("series")
    @classmethod
    def _unique_ids(cls, v):
        ids = [s.id for s in v]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate series ids: {dup}")
        return v

    @model_validator(mode="after")
    def _export_from_sources(self):
        """Fill the ``export:`` section from the rest of the file, where it is silent:
        KEDA's ``serverAddress`` from ``prometheus.url``; the scrape interval of the lookahead query
        from ``prometheus.scrape_interval``; ``keda_auth.mode: auto`` from the
        credentials ``prometheus:`` names (bearer, basic or none); each series' ``namespace``
        and ``target`` (Deployment) into ``export.targets`` (an explicit target wins)."""
        ex = self.export
        if self.prometheus is not None:
            if ex.prometheus_url is None:
                ex.prometheus_url = self.prometheus.url
            if ex.scrape_interval_s is None:
                ex.scrape_interval_s = parse_duration(self.prometheus.scrape_interval)
            if ex.keda_auth.mode == "auto":
                ex.keda_auth.mode = ("bearer" if self.prometheus.bearer_token_env else
                                     "basic" if self.prometheus.basic_auth else "none")
        for s in self.series:
            if s.namespace is None and s.target is None:
                continue
            t = ex.targets.get(s.id) or TargetSettings()
            try:
                ex.targets[s.id] = TargetSettings.model_validate(
                    {**t.model_dump(), "name": t.name or s.target, "namespace": t.namespace or s.namespace})
            except ValidationError as exc:
                raise ValueError(f"series {s.id!r}: {exc.errors()[0]['msg']}") from None
        return self

    def price_book(self) -> dict[str, GpuPrice]:
        """Defaults (cited in :mod:`optimizer.prices`) overlaid with the config's prices."""
        return {**default_price_book(), **self.prices}


def _key_line(path: Path, loc: tuple) -> int | None:
    """1-based line of the mapping key at ``loc`` in the YAML file (None if not found)."""
    try:
        node = yaml.compose(path.read_text())
    except yaml.YAMLError:
        return None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            hit = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if hit is None:
                return None
            if part == loc[-1]:
                return hit[0].start_mark.line + 1
            node = hit[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return None
    return None


def _describe(err: dict, path: Path) -> str:
    """A validation error as ``key.path: message``, never echoing file content: an
    unknown key is named by its line, not its text (a non-YAML file such as
    ``/etc/shadow`` parses as one long key)."""
    loc = tuple(err["loc"])
    if err.get("type") == "extra_forbidden":
        line = _key_line(path, loc)
        where = ".".join(str(x) for x in loc[:-1]) or "the top level"
        key = str(loc[-1])
        # a key that looks like a config key is named (a typo is then easy to see); anything else is file
        # content (a password file's first line parses as one long key) and is never shown
        named = f"{key!r} " if looks_like_name(key) else ""
        return (f"unknown key {named}at line {line if line else '?'} in {where}; is this a capplan config? "
                "(see the README's configuration section)")
    return f"{'.'.join(str(x) for x in loc)}: {err['msg']}"


def _duplicate_key(node) -> tuple[str, int] | None:
    """The first key that appears twice in one mapping of a composed YAML document (``yaml.compose``:
    nodes only, nothing constructed), as ``(key, line)``; None when there is none."""
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else None
            if key is not None and key in seen:
                return (key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}", key) else "(not shown)",
                        k.start_mark.line + 1)
            seen.add(key)
            found = _duplicate_key(v)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            found = _duplicate_key(v)
            if found:
                return found
    return None


def load_config(path: str | os.PathLike | None) -> CapplanConfig:
    """Read and validate a config file; ``None`` gives the defaults.

    Raises
    ------
    InputError: missing or unreadable file, invalid YAML, or a value that
        fails validation (the message names the file and the key).
    """
    if path is None:
        return CapplanConfig()
    p = Path(path)
    if p.is_dir():
        raise InputError(f"config {p}: is a folder; name a capplan.yaml file")
    if not p.is_file():
        raise InputError(f"config {p}: file not found")
    try:
        text = p.read_text(encoding="utf-8")
        data = yaml.safe_load(text) or {}
        dup = _duplicate_key(yaml.compose(text, Loader=yaml.SafeLoader))
        if dup is not None:
            raise InputError(f"config {p}: key {dup[0]!r} appears twice in one mapping (line {dup[1]}); "
                             "YAML would keep only the last value")
    except UnicodeDecodeError:  # a binary or otherwise encoded file: never shown
        raise InputError(f"config {p}: not UTF-8 text; pass a capplan.yaml") from None
    except OSError as exc:
        raise InputError(f"config {p}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"config {p}: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise InputError(f"config {p}: expected a mapping at the top level")
    try:
        cfg = CapplanConfig.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"config {p}: {_describe(exc.errors()[0], p)}") from None
    base = p.resolve().parent
    for attr in ("store", "models"):
        if "://" in getattr(cfg, attr):  # an object store URL (capplan.remote)
            continue
        v = Path(getattr(cfg, attr))
        if not v.is_absolute():
            setattr(cfg, attr, str(base / v))
        if Path(getattr(cfg, attr)).exists() and not Path(getattr(cfg, attr)).is_dir():
            raise InputError(f"config {p}: {attr}: {getattr(cfg, attr)} is a file; point it at a folder")
    return cfg
