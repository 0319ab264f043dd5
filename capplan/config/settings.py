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

YAML is read within bounds (size, nesting, alias expansion; :mod:`capplan.config.yaml_bounds`) with
PyYAML's safe constructor, and every number must be finite. Secrets are never stored in the file:
only the *names* of environment variables that hold them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from capplan.config import fleet as fleet_cfg
from capplan.config.fleet import FleetConfig, SeriesFleetKeys, catalogue_from, check_series_keys, parse_models
from capplan.config.prometheus import PrometheusConfig, parse_duration
from capplan.config.yaml_bounds import describe, read_yaml
from capplan.errors import InputError
from capplan.promql import render as promql
from capplan.promql.render import outer_aggregation
from capplan.promql.steps import step_query, window_selectors
from capplan.store.remote import check_store_url, redact_url
from capplan.store.remote_models import RemoteModelRegistry
from capplan.store.retention import RetentionConfig
from forecasting.registry import ModelRegistry
from forecasting.tiers import available, forecaster_class, tier_options
from optimizer.book.prices import GpuPrice, default_price_book
from optimizer.exporters.settings import ExportSettings, TargetSettings
from optimizer.search.settings import SearchSettings


class SeriesConfig(BaseModel):
    """One demand series pulled from Prometheus (``query`` or ``template`` + ``selector``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    id: str = Field(min_length=1, description="the series id, e.g. train/team-a or infer/chat")
    kind: Literal["training", "inference"] = Field(default="training", description="a pool of GPUs for batch "
                                                   "jobs, or a service scaled in replicas")
    unit: Literal["gpu", "replica"] = Field(default="gpu", description="unit of the values")
    query: str | None = Field(default=None, description="a PromQL query (set this or template)")
    template: str | None = Field(default=None, description="a named query (dcgm_gpu_util, dcgm_gpus_busy, "
                                 "dcgm_fb_used_mib, dcgm_power_w, k8s_gpus_requested, k8s_deployment_replicas, "
                                 "service_request_rate) filled with selector and params")
    selector: dict[str, str] = Field(default_factory=dict, description="label matchers of a template, "
                                     "e.g. {namespace: team-a}; values are escaped")
    step: str = Field(default="5m", description="resolution of the stored history (a duration, e.g. 5m)")
    gpu_model: str = Field(default="default", description="the price-book entry (prices:) this series is costed at")
    gpus_per_replica: float = Field(default=1.0, gt=0, description="GPUs each replica holds (inference)")
    timezone: str = Field(default="Asia/Shanghai", description="IANA zone of the workload's calendar: "
                          "holidays and the local time of pre-scaling windows")
    namespace: str | None = Field(default=None, description="namespace of the workload (KEDA/HPA objects go there); "
                                  "export.targets.<id>.namespace wins")
    target: str | None = Field(default=None, description="Deployment name for HPA/KEDA (inference); "
                               "export.targets.<id>.name wins")
    params: dict[str, str] = Field(default_factory=dict, description="template parameters, e.g. metric, window")
    aggregate: Literal["sum", "avg", "max", "min"] | None = Field(
        default=None, description="how several returned label sets combine; default: the query's outer aggregation")
    step_aggregation: Literal["max", "last"] = Field(
        default="max", description="what one stored point holds: the peak of its step (capacity must cover "
        "peaks) or the last value of the step (capplan.promql.steps)")
    scrape_interval: str | None = Field(default=None, description="overrides prometheus.scrape_interval")
    gpu_models: list[str] | None = Field(default=None, description="fleet: the GPU models (gpu_catalogue) this "
                                         "series may run on; default: every model above min_gpu_memory_gb")
    min_gpu_memory_gb: float | None = Field(default=None, gt=0, description="fleet: the memory floor, GB per GPU; "
                                            "models with less never serve this series")
    share: float | str | None = Field(default=None, description="fleet: the share of one GPU its work needs "
                                      "(0 < share <= 1) or a MIG profile name such as 1g.10gb")

    @field_validator("id")
    @classmethod
    def _printable_id(cls, v):
        """Printable, without surrounding spaces, as the CSV reader requires (capplan.sources.files): line
        breaks, tabs and terminal escapes cannot be label values, file names or manifest names, and would
        rewrite the terminal when printed."""
        if not v.isprintable() or v != v.strip():
            raise ValueError(f"{v!r} holds control characters (line breaks, tabs, escapes) or surrounding spaces; "
                             "use a printable id such as train/team-a")
        return v

    @field_validator("share", mode="before")
    @classmethod
    def _share(cls, v):
        return fleet_cfg.parse_share(v)

    @field_validator("gpu_models", mode="before")
    @classmethod
    def _gpu_models(cls, v):
        return parse_models(v)

    def fleet_keys(self) -> SeriesFleetKeys:
        """The fleet keys this entry sets (:mod:`capplan.config.fleet`)."""
        return SeriesFleetKeys(gpu_models=self.gpu_models, min_gpu_memory_gb=self.min_gpu_memory_gb, share=self.share)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v):
        """An IANA zone name the forecasting calendar can use (``Asia/Shanghai``, ``UTC``)."""
        try:
            ZoneInfo(v)
        except (ValueError, KeyError, OSError, ZoneInfoNotFoundError):
            raise ValueError("not an IANA time zone name such as Asia/Shanghai or UTC") from None
        return v

    @model_validator(mode="after")
    def _query_or_template(self):
        if not self.query and not self.template and self.fleet_keys().is_set():
            return self  # fleet keys only, for a series of another source (a CSV, the sample), matched by id
        if bool(self.query) == bool(self.template):
            raise ValueError(f"series {self.id!r}: set exactly one of 'query' or 'template'")
        if self.template:
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
            try:
                window_selectors(self.query, "last_over_time", 60)
            except ValueError as exc:
                raise ValueError(f"series {self.id!r}: query: {exc}") from None
        return self

    def promql(self, exported_labels: bool = False) -> str:
        """The PromQL as configured: ``query`` as written, or the rendered ``template``
        (see :mod:`capplan.promql.render`; ``exported_labels`` as in :class:`PrometheusConfig`)."""
        if self.query:
            return self.query
        if not self.template:  # an entry with fleet keys only, for a series of another source
            raise InputError(f"series {self.id!r}: sets only fleet keys, no query or template, so it cannot be pulled "
                             "from Prometheus; add its query, or plan it from the source that holds it (--source)")
        return promql.render(self.template, self.selector, self.params, exported_labels=exported_labels)

    def combination(self, prom: "PrometheusConfig") -> str | None:
        """How the query's label sets add up: ``aggregate``, else the query's outer
        aggregation (count -> sum, group -> max), else None (they must not overlap)."""
        how = self.aggregate or outer_aggregation(self.promql(prom.exported_labels))
        return {"count": "sum", "group": "max"}.get(how, how)

    def pull_query(self, prom: "PrometheusConfig", count: bool = False) -> str:
        """The PromQL a pull sends: :meth:`promql` rewritten so that a point is the
        peak (or last value) of its step and samples go stale after the scrape
        interval (:func:`capplan.promql.steps.step_query`). ``count``: the most
        label sets present at once within each step instead (overlap check)."""
        window = parse_duration(self.scrape_interval or prom.scrape_interval)
        q = self.promql(prom.exported_labels)
        if count:
            return step_query(f"count({q})", self.step_seconds(), window, "max")
        return step_query(q, self.step_seconds(), window, self.step_aggregation, self.combination(prom))

    def step_seconds(self) -> int:
        """``step`` in whole seconds."""
        return parse_duration(self.step)


class _ForecastOptions(BaseModel):
    """Tier options: each registered model's own settings, under their ``forecast:`` keys (declared once, in the
    model's ``settings`` class in ``forecasting/tiers/``), then the section's rolling-origin and registry options."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    def registry(self, root: str):
        """The model registry at ``root`` with this retention (:class:`forecasting.registry.ModelRegistry`)."""
        if "://" in str(root):  # an object store (capplan.store.remote_models)
            return RemoteModelRegistry(str(root), keep=self.registry_keep)
        return ModelRegistry(root, keep=self.registry_keep)

    def tier_options(self) -> dict[str, dict]:
        """Keyword options of each model's constructor (:func:`forecasting.tiers.make`): each
        model reads its own typed settings from this section (:func:`forecasting.tiers.tier_options`)."""
        section = self.model_dump()
        return {n: tier_options(n, section) for n in available()}


def _tier_validators() -> dict[str, classmethod]:
    """The field validators of the registered models' settings (an event listed twice), carried onto the generated
    section under its keys, so that a bad value is a config error at load that names ``forecast.<key>``."""
    out = {}
    for name in available():
        settings = forecaster_class(name).settings
        for vname, dec in settings.__pydantic_decorators__.field_validators.items():
            keys = [settings.model_fields[f].alias or f for f in dec.info.fields]
            out[f"_{name}_{vname}"] = field_validator(*keys, mode=dec.info.mode)(dec.func.__func__)
    return out


def _tier_fields() -> dict[str, tuple]:
    """The ``forecast:`` keys the registered models declare (:func:`forecasting.tiers.available`, each model's
    ``settings``), as ``key -> (type, Field)`` for :func:`pydantic.create_model`: type, bounds, default and
    description come from the model's settings, the one place an option is declared. Two models may read one key
    (``prophet_samples``) only when they declare it alike. Raises TypeError otherwise."""
    out: dict[str, tuple] = {}
    for name in available():
        for fname, f in forecaster_class(name).settings.model_fields.items():
            key = f.alias or fname
            kind = Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation
            field = (Field(default_factory=f.default_factory, description=f.description) if f.default_factory
                     else Field(default=f.default, description=f.description))
            if key in out and (repr(out[key][0]), out[key][1].description) != (repr(kind), field.description):
                raise TypeError(f"forecast.{key} is declared differently by two models' settings")
            out.setdefault(key, (kind, field))
    return out


#: the section's own options, after the models' (the order of docs/configuration.md)
_SECTION_FIELDS = {
    "training_origin_hours": (Literal[4, 8, 12, 24], Field(
        default=4, description="hours between the rolling origins of training pools (a multiple of 4, so every origin "
        "keeps its 7-day forecast, forecasting.backtest.lead_cap); quick runs use 12")),
    "registry_keep": (int, Field(default=5, ge=1, le=1000, description="model versions kept per series and tier in "
                                 "the registry (`models:`); older ones are removed after each save")),
}
ForecastConfig = create_model("ForecastConfig", __base__=_ForecastOptions, __module__=__name__,
                              __validators__=_tier_validators(), **_tier_fields(), **_SECTION_FIELDS)
ForecastConfig.__doc__ = _ForecastOptions.__doc__


class PlanConfig(SearchSettings):
    """The ``plan:`` section: the search and replay options (fields, units and the
    typed ``training_bounds`` / ``inference_bounds`` in
    :class:`optimizer.search.settings.SearchSettings`) plus the windows and parallelism, e.g.::

        plan:
          coverage_target: 0.95
          n_calls: 30
          training_bounds: {reservation_ratio: [0.0, 1.5], quantile: [p90, p95]}
          inference_bounds: {min_replicas: [1, 4], max_replicas: 40}
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    tune_days: float = Field(default=7, gt=0, le=366, description="days of the tuning window the search replays on")
    eval_days: float = Field(default=7, gt=0, le=366, description="days of the evaluation window (the last days of "
                             "the history), which the search never sees; every reported figure is on it")
    executor: Literal["local", "processes", "dask"] = Field(
        default="processes", description="where the per-series work runs (capplan.run.executor): local (this "
        "process), processes (a pool here), dask (a dask.distributed cluster)")
    scheduler: str | None = Field(default=None, description="dask scheduler address, e.g. tcp://dask-scheduler:8786; "
                                  "without it executor dask starts a LocalCluster of `workers` processes")
    workers: int | None = Field(default=None, ge=1, description="worker processes for executor processes, or of the "
                                "dask LocalCluster (default: up to 2)")
    quick: bool = Field(default=False, description="a first look (`capplan plan --quick`): the QUICK preset's smaller "
                        "search, coarse grid scan, 3-day windows and fewer LSTM epochs and Prophet samples; the "
                        "figures are rougher, and the report lists what was reduced")

    @model_validator(mode="after")
    def _scheduler(self):
        if self.scheduler is not None:

            shown = redact_url(self.scheduler)  # the one URL rule: a secret is never shown (capplan.store.remote)
            if shown != self.scheduler:
                raise ValueError(f"scheduler {shown}: credentials or a query string in the address are refused "
                                 "(they would be printed and logged); secure the cluster with dask's TLS settings")
            if self.executor != "dask":
                raise ValueError(f"scheduler {shown!r} needs executor: dask (not {self.executor})")
            if "://" not in self.scheduler:
                raise ValueError(f"scheduler {shown!r}: expected an address such as tcp://HOST:8786")
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

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    prometheus: PrometheusConfig | None = Field(default=None, description="where to pull history from "
                                                "(capplan ingest); without it, the embedded sample")
    source: Literal["prometheus", "sample"] = Field(
        default="prometheus", description="where the scheduled jobs (capplan.airflow.jobs, airflow_dags/) read "
        "history: prometheus (the prometheus: section or the Airflow Connection capplan_prometheus) or sample (the "
        "embedded demo traces, used only when set here); `capplan plan` takes --source instead")
    series: list[SeriesConfig] = Field(default_factory=list, description="the series capplan ingest pulls")
    store: str = Field(default=".capplan/store", description="the local store: history, runs, the cache")
    models: str = Field(default="models", description="the model registry's folder")
    plan: PlanConfig = Field(default_factory=PlanConfig)
    forecast: ForecastConfig = Field(default_factory=ForecastConfig)
    prices: dict[str, GpuPrice] = Field(default_factory=dict, description="USD per GPU-hour per GPU model, "
                                        "replacing the built-in AWS list prices for the models named")
    export: ExportConfig = Field(default_factory=ExportConfig)
    # runs kept, backtest size (capplan.store.retention)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    gpu_catalogue: dict[str, dict] = Field(default_factory=dict, description="GPU catalogue entries (optimizer."
                                           "book.gpus.GpuModelSpec fields) overriding built-in ones or adding models")
    fleet: FleetConfig | None = Field(default=None, description="the series planned as one fleet (cohort); default: "
                                      "every series that sets gpu_models, min_gpu_memory_gb or share")

    @model_validator(mode="after")
    def _fleet_keys(self):
        """Every series' fleet keys against the catalogue (:func:`capplan.config.fleet.check_series_keys`), so that
        a bad model, floor or profile stops the run before any data is read."""
        catalogue = catalogue_from(self.gpu_catalogue)
        for s in self.series:
            if s.fleet_keys().is_set() or (self.fleet is not None and s.id in self.fleet.series):
                check_series_keys(s.id, catalogue, s.gpu_models, s.min_gpu_memory_gb, s.share,
                                  s.gpu_model if "gpu_model" in s.model_fields_set else None)
        return self

    def gpu_catalogue_used(self):
        """The GPU catalogue of this run: built-in entries with ``gpu_catalogue:`` over them."""
        return catalogue_from(self.gpu_catalogue)

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

    @field_validator("store", "models")
    @classmethod
    def _store_url(cls, v):
        """The store URL rule (capplan.store.remote.check_store_url): no credentials, no memory://."""
        try:
            return check_store_url(v, "URL")
        except InputError as exc:
            raise ValueError(str(exc)) from None

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
        """Defaults (cited in :mod:`optimizer.book.prices`) overlaid with the config's prices."""
        return {**default_price_book(), **self.prices}


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
    data, root = read_yaml(p)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"config {p}: expected a mapping at the top level")
    try:
        cfg = CapplanConfig.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"config {p}: {describe(exc.errors()[0], root, CapplanConfig)}") from None
    base = p.resolve().parent
    for attr in ("store", "models"):
        if "://" in getattr(cfg, attr):  # an object store URL (capplan.store.remote)
            continue
        v = Path(getattr(cfg, attr))
        if not v.is_absolute():
            setattr(cfg, attr, str(base / v))
        if Path(getattr(cfg, attr)).exists() and not Path(getattr(cfg, attr)).is_dir():
            raise InputError(f"config {p}: {attr}: {getattr(cfg, attr)} is a file; point it at a folder")
    return cfg
