"""The run report: a typed model of ``report.json`` (in the spirit of krr's ``Result``).

:func:`build_report` assembles it from the stage outputs; the CLI table,
``capplan plan --format json``, the Airflow plan job and the dashboard all
read this one model (:meth:`Report.load` reads a run's ``report.json``). Its
JSON schema is generated from the model and published in
``schemas/report.schema.json`` (``python -m capplan.report.model > schemas/report.schema.json``;
a test keeps the published file in step).

Units: money in USD, ``coverage`` and ``idle_ratio`` are ratios 0–1,
``unmet`` in GPU-hours (training) or replica-hours (inference), times ISO 8601
UTC. A figure that is undefined on its window (e.g. coverage with no observed
demand) is ``null``. Adding a field: declare it here (with a description),
fill it in :func:`build_report`, then regenerate the schema.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from capplan.errors import InputError
from capplan.report import jsonout
from capplan.report.fleet import FleetReport
from capplan.report.risk import risk_warnings
from capplan.report.summary import FleetSummary, ordered
from forecasting.registry import library_versions
from forecasting.types import STEP
from optimizer.rivals.incumbent import recommended_name
from optimizer.rivals.perfect_foresight import regret
from optimizer.search.tuning import policy_warnings

VERSIONED_LIBS = ("capplan", "pandas", "numpy", "statsmodels", "prophet", "tensorflow-cpu", "keras",
                  "scikit-optimize", "pyarrow")


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PolicyMetrics(_Model):
    """One policy replayed on the evaluation window (:class:`optimizer.plan.policy.Metrics`)."""

    cost_usd: float | None = Field(description="USD over the window")
    coverage: float | None = Field(description="share of steps with provisioned >= demand (0-1)")
    idle_ratio: float | None = Field(description="sum(max(provisioned - demand, 0)) / sum(provisioned) (0-1)")
    unmet: float | None = Field(description="sum(max(demand - provisioned, 0)), GPU-hours or replica-hours")
    scale_events: int = 0
    p95_utilization: float | None = 0.0
    regret: float | None = Field(default=None, description="cost_usd / the perfect-foresight cost (oracle) on the "
                                 "same window; a ratio, >= 1 for a policy meeting every interval; null without one")
    mix: dict[str, dict[str, float]] | None = Field(default=None, description="the purchase mix: {reserved|spot|"
                                                    "on_demand: {gpu_hours, cost_usd}} bought on the window (an "
                                                    "inference service's replicas all on demand; "
                                                    "optimizer.book.purchase.layer_mix); null in older runs")
    spot_refused_gpu_hours: float | None = Field(default=None, description="training: spot GPU-hours the price "
                                                 "book's cap refused, bought on demand instead (in the mix's "
                                                 "on_demand)")

    @classmethod
    def of(cls, m, oracle_cost_usd: float | None = None) -> "PolicyMetrics | None":
        """From :class:`optimizer.plan.policy.Metrics` (None stays None), with its regret
        against ``oracle_cost_usd`` when given (:func:`optimizer.rivals.perfect_foresight.regret`)."""
        if m is None:
            return None
        return cls(cost_usd=m.cost_usd, coverage=m.coverage, idle_ratio=m.idle_ratio, unmet=m.unmet,
                   scale_events=m.scale_events, p95_utilization=m.p95_utilization, mix=m.mix,
                   spot_refused_gpu_hours=m.spot_refused_gpu_hours,
                   regret=None if oracle_cost_usd is None else regret(m.cost_usd, oracle_cost_usd))


class QuotaFigures(_Model):
    """A training plan that needs more than its pool's quota (optimizer.book.purchase_check): the series'
    figures are the plan's uncapped; these are held to the quota."""

    quota_gpus: float = Field(description="the pool's quota, GPUs (the exported Volcano Queue's capability)")
    need_gpus: int = Field(description="the most GPUs the plan holds at once: raise the quota to this")
    capped: PolicyMetrics = Field(description="the recommendation held to the quota on the evaluation window "
                                  "(demand above it queues and counts as unmet); no regret")
    held: bool = Field(default=True, description="whether the exported Volcano Queue holds the pool to the quota "
                       "(export.capability_limit: quota, the default): then `capped` are the figures the cluster "
                       "gets, and the table's and summary's headline; false with capability_limit: plan")


class RecommendedMetrics(PolicyMetrics):
    """The tuned policy's figures and its parameters (:mod:`optimizer.plan.policy`)."""

    params: dict[str, Any] = Field(default_factory=dict)


class OracleFigures(_Model):
    """The perfect-foresight limit on the evaluation window (:mod:`optimizer.rivals.perfect_foresight`;
    spot interruptions left out)."""

    cost_usd: float = Field(description="USD: the cheapest capacity meeting demand in every interval")
    layers: dict[str, float] = Field(default_factory=dict, description="GPU-hours or replica-hours per layer")
    method: str = ""


class Windows(_Model):
    """``[first, last]`` timestamps of each window (inclusive)."""

    training: tuple[str, str]
    tuning: tuple[str, str]
    evaluation: tuple[str, str]


class ModelScores(_Model):
    """Backtest scores of one model: MASE over every lead, and per lead band
    (``1h``, ``24h``, ``7d``, ``all``) the figures of :func:`forecasting.backtest.score`."""

    mase: float | None
    bands: dict[str, dict[str, int | float | None]]


class TrainingBaseline(_Model):
    """What the rules of thumb would set from the last day of history (GPUs;
    :func:`optimizer.plan.history_levels.baseline_levels`)."""

    capacity_gpus: int
    reserved_gpus: int


class InferenceBaseline(_Model):
    """What the rules of thumb would set from the last day of history (replicas, percent
    utilisation; :func:`optimizer.plan.history_levels.baseline_levels`)."""

    floor_replicas: int
    scale_up_percent_util: int
    scale_down_percent_util: int


class TrainingPlan(_Model):
    """A training pool's capacity per lead time, GPUs (:func:`optimizer.plan.capacity.capacity_plan`)."""

    reserved_gpus: int = Field(description="the weekly commitment")
    on_demand_gpus: int = Field(description="bought per day on demand beyond the reservation")
    spot_gpus: int = Field(description="bought per day on spot beyond the reservation")
    on_demand_hourly_gpus: int | None = Field(default=None, exclude_if=lambda v: v is None,
                                              description="the next hour's top-up beyond the day's capacity "
                                              "(absent without a top-up quantile)")
    capability_gpus: int = Field(description="the Volcano Queue's ceiling")
    deserved_gpus: int = Field(description="the next day's p50")
    quota_gpus: int | float | None = Field(description="the pool's current capacity, if known")
    last_peak_gpus: int | float | None = Field(description="peak of the last day with demand; null: never any")
    valid_from: str = Field(description="ISO 8601 UTC: the plan forecast's issue time")
    baseline: TrainingBaseline


class PrescaleWindow(_Model):
    """A pre-scaling window (UTC ISO 8601; :func:`optimizer.inference.prescale.prescale_windows`)."""

    start: str
    end: str
    desired_replicas: int


class InferencePlan(_Model):
    """An inference service's autoscaling plan, replicas (:func:`optimizer.plan.capacity.capacity_plan`)."""

    min_replicas: int
    max_replicas: int
    target_utilization: float = Field(description="ratio 0-1")
    prescale: list[PrescaleWindow] = Field(default_factory=list)
    fallback_replicas: int = Field(description="replicas to hold when the metric source fails (KEDA fallback)")
    valid_from: str = Field(description="ISO 8601 UTC: the plan forecast's issue time")
    baseline: InferenceBaseline


class SeriesReport(_Model):
    """Everything the run says about one series."""

    kind: str
    unit: str
    gpu_model: str
    windows: Windows
    evaluation_window: tuple[str, str] = Field(description="the evaluation window again (never seen by the search)")
    baseline: PolicyMetrics
    recommended: RecommendedMetrics
    random_search: PolicyMetrics | None = None
    recommendation: str = Field(default="searched", description="what is recommended and exported, one word "
                                "everywhere (table, dashboard, manifests' comments): rule (the calibrated rule the "
                                "search did not beat, optimizer.rivals.incumbent), searched (the searched policy), or "
                                "a peer the exports express (optimizer.rivals.expressed); `recommended` holds its "
                                "figures, the replay of the exported objects. Reports written before it carried "
                                "`recommended_policy`, read into this field")
    searched: PolicyMetrics | None = Field(default=None, description="the searched policy's figures when a peer is "
                                           "recommended instead (its exported form is in recommended.params); null "
                                           "when the recommendation is rule or searched")
    peers: dict[str, PolicyMetrics] = Field(default_factory=dict, description="peer policies (optimizer.rivals.peers)")
    oracle: OracleFigures | None = None
    quota: QuotaFigures | None = Field(default=None, description="set when the plan needs more than the pool's quota: "
                                       "the quota to ask for and the figures held to it (recommended is uncapped)")
    tuning: dict[str, Any] = Field(default_factory=dict, description="objectives on the tuning window (USD); "
                                   "beside the calibrated rule, day_by_day: the daily objectives totalled that "
                                   "decided (rule, searched, baseline, peers; margin, rival_margin; target)")
    backtest: dict[str, ModelScores] = Field(default_factory=dict)
    plan: TrainingPlan | InferencePlan = Field(description="capacity per lead time (optimizer.plan.capacity)")
    fallbacks: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    combination: dict[str, Any] = Field(default_factory=dict, description="how the combined forecast was made")
    reused: dict[str, Any] = Field(default_factory=dict, description="what this run took from the store's cache "
                                   "(capplan.run.cache) instead of computing: rolling -> model -> refit blocks "
                                   "reused / "
                                   "computed / computed with their stored fit (fit_reused); search -> reused | "
                                   "tuning_reused | computed (a reused search is the stored outcome of an identical "
                                   "task: same data, forecasts, settings, seed and code; tuning_reused: the stored "
                                   "tuned policy of an identical tuning window, replayed on the new evaluation "
                                   "window). Empty without a store")

    @model_validator(mode="before")
    @classmethod
    def _read_recommended_policy(cls, data: Any) -> Any:
        """Reports written before ``recommendation`` was the one field: their ``recommended_policy`` (``searched``,
        the baseline or a peer) and ``tuning`` give it (:func:`optimizer.rivals.incumbent.recommended_name`)."""
        if isinstance(data, dict) and "recommended_policy" in data:
            data = dict(data)
            old = data.pop("recommended_policy") or "searched"
            if not data.get("recommendation"):
                data["recommendation"] = recommended_name(old, data.get("tuning") or {})
        return data

    @property
    def recommended_policy(self) -> str:
        """:attr:`recommendation` in :class:`optimizer.search.tuning.SearchOutcome`'s words: ``searched`` for the
        rule or the searched policy (both are the search's kept policy), else the peer's name."""
        return "searched" if self.recommendation in ("rule", "searched") else self.recommendation

    def exported(self) -> PolicyMetrics:
        """The figures of what the exported objects allow: :attr:`quota` ``.capped`` when the plan needs more
        than the pool's quota and the exported Volcano Queue holds it there (``quota.held``), else
        :attr:`recommended` (then uncapped, what raising the quota to ``quota.need_gpus`` buys)."""
        return self.quota.capped if self.quota is not None and self.quota.held else self.recommended

    def policies(self) -> dict[str, PolicyMetrics]:
        """``policy name -> metrics`` on the evaluation window, recommended and baseline first
        (:func:`capplan.report.summary.ordered`): ``recommended``, ``baseline``, ``random_search``
        (when the run had one), ``searched`` (when a baseline or peer was recommended
        instead) and every peer (``reactive``, ``naive_conformal``, ...). What the CLI
        table and csv show, one row per entry."""
        pols: dict[str, PolicyMetrics] = {"recommended": self.recommended, "baseline": self.baseline}
        for name in ("random_search", "searched"):
            if getattr(self, name) is not None:
                pols[name] = getattr(self, name)
        for name, m in self.peers.items():
            pols.setdefault(name, m)
        return {n: pols[n] for n in ordered(pols)}


class SeriesFailure(_Model):
    """A series dropped after an error of its own (the rest of the run completed)."""

    stage: str = Field(description="the stage it failed in: regularise (no observed value), forecast or search")
    error: str = Field(description="exception type and message")
    where: str = Field(default="", description="file:line of the raising frame")


class RunInfo(_Model):
    """The run: identity, inputs, versions and timings."""

    run_id: str
    seed: int
    started_at: str
    duration_s: float | None = None
    source: str
    versions: dict[str, str] = Field(default_factory=dict)
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    coverage_target: float
    n_calls: int
    prices: dict[str, dict[str, Any]] = Field(default_factory=dict, description="the price book used, per GPU model: "
                                              "USD per GPU-hour and what the cloud sells (the built-in entries with "
                                              "the config's prices: over them; optimizer.book.prices.GpuPrice)")
    models: dict[str, Any] = Field(default_factory=dict, description="per tier: models reused / fitted, versions")
    files: list[str] = Field(default_factory=list)
    series_filter: list[str] | None = Field(default=None, description="--series of a run limited to some series; "
                                            "None: every series of the source")
    published: bool | None = Field(default=None, description="whether the run became the store's LATEST "
                                   "(capplan.store.runs); None: no store")
    logical_date: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                     description="Airflow runs: the logical date's key")
    forecast_runs: dict[str, str] | None = Field(default=None, exclude_if=lambda v: v is None,
                                                 description="Airflow runs: tier -> forecast run used")
    size_bytes: int | None = Field(default=None, description="bytes of the run's files, report.json included "
                                   "(capplan.store.retention)")
    executor: str = Field(default="local", description="where the per-series work ran: local, processes or dask")
    quick: bool = Field(default=False, description="a quick run (capplan plan --quick: smaller search, fewer epochs): "
                        "its figures are for a first look")
    quick_reductions: list[str] = Field(default_factory=list, description="a quick run: each part it did smaller "
                                        "than a default plan, with both values (capplan.config.quick.quick_reductions)")
    gpu_models: dict[str, dict[str, Any]] | None = Field(
        default=None, exclude_if=lambda v: v is None, description="runs with a fleet: the GPU catalogue used, per "
        "model its memory, relative speeds, MIG profiles, GPUs per node and prices (capplan.report.fleet)")
    reuse: dict[str, dict[str, int]] = Field(default_factory=dict, description="totals of the series' `reused`: "
                                             "rolling_blocks {reused, computed, fit_reused} and search {reused, "
                                             "tuning_reused, computed}")


class Report(_Model):
    """``report.json``."""

    run: RunInfo
    series: dict[str, SeriesReport] = Field(default_factory=dict)
    missing: dict[str, str] = Field(default_factory=dict,
                                    description="series left out of the plan, with the reason (Airflow runs)")
    failed: dict[str, SeriesFailure] = Field(
        default_factory=dict, description="series that raised in their own task and were left out; the CLI "
        "exits 3 when there are any")
    summary: FleetSummary | None = Field(default=None, description="the fleet on the evaluation windows: cost per "
                                         "policy, overall saving, series below the coverage target "
                                         "(capplan.report.summary)")
    fleet: FleetReport | None = Field(default=None, exclude_if=lambda v: v is None, description="runs whose series set "
                                      "fleet keys: the fleet plan per GPU model and purchase option, against each "
                                      "series alone, pooled and the limit (capplan.report.fleet)")

    def to_json(self, indent: int | None = None) -> str:
        """Strict JSON (non-finite floats as null; :mod:`capplan.report.jsonout`)."""
        return jsonout.dumps(self.model_dump(), indent=indent)

    @classmethod
    def load(cls, path: str | Path) -> "Report":
        """Read ``report.json`` (a file, or a run folder holding one).

        Raises FileNotFoundError, or :class:`capplan.errors.InputError` for a file that is not
        JSON or a document of another shape (written by another capplan version, or edited),
        naming the file, the first fields that differ and what to do.
        """
        p = Path(path)
        if p.is_dir():
            p = p / "report.json"
        text = p.read_text()
        try:
            return cls.model_validate(json.loads(text))
        except json.JSONDecodeError as exc:
            raise InputError(f"{p}: not JSON ({exc}); re-run `capplan plan` to write the run again") from None
        except ValidationError as exc:
            errs = exc.errors()
            first = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errs[:3])
            raise InputError(f"{p}: not a report of this capplan version ({len(errs)} fields differ, e.g. {first}); "
                             "re-run `capplan plan` to write it again") from None


def build_report(run: RunInfo, prep, fc, scores: dict, outcomes: dict, plans: list, coverage_target: float,
                 ledger, missing: dict[str, str] | None = None) -> Report:
    """Assemble the report from the stages' outputs.

    ``prep`` / ``fc``: :class:`capplan.run.state.Prepared` / ``Forecasts``;
    ``scores``: the score stage's ``{series: {model: {band: figures}}}``;
    ``outcomes``: :class:`optimizer.search.tuning.SearchOutcome` per series; ``plans``:
    :class:`optimizer.plan.policy.SeriesPlan` list; ``coverage_target``: the
    configured target the policy warnings compare against
    (:func:`optimizer.search.tuning.policy_warnings`); ``ledger``: the run's
    :class:`capplan.run.state.Ledger`, the one source of every series' ``fallbacks``,
    ``warnings`` (after the policy warnings, all of them), ``reused`` and of ``failed``.
    """
    series = {}
    for pl in plans:
        sid = pl.series_id
        w = prep.windows[sid]
        oc = outcomes[sid]
        sc = scores.get(sid, {})
        ev = tuple(w.as_list())
        oracle = oc.oracle.cost_usd if oc.oracle is not None else None
        series[sid] = SeriesReport(
            kind=pl.kind, unit=pl.unit, gpu_model=pl.gpu_model,
            windows=Windows(training=(w.start.isoformat(), (w.tune_start - STEP).isoformat()),
                            tuning=(w.tune_start.isoformat(), (w.eval_start - STEP).isoformat()), evaluation=ev),
            evaluation_window=ev,
            baseline=PolicyMetrics.of(oc.baseline, oracle),
            recommended=RecommendedMetrics(**PolicyMetrics.of(oc.recommended, oracle).model_dump(), params=oc.params),
            random_search=PolicyMetrics.of(oc.random, oracle),
            recommendation=recommended_name(oc.recommended_policy, oc.tuning),
            searched=PolicyMetrics.of(oc.searched, oracle),
            peers={k: PolicyMetrics.of(m, oracle) for k, m in (oc.peers or {}).items()},
            oracle=OracleFigures(**oc.oracle.model_dump()) if oc.oracle is not None else None,
            quota=None if oc.quota is None else QuotaFigures(quota_gpus=oc.quota.quota_gpus,
                                                             need_gpus=oc.quota.need_gpus,
                                                             capped=PolicyMetrics.of(oc.quota.capped)),
            tuning=oc.tuning,
            backtest={m: ModelScores(mase=sc[m]["all"]["mase"], bands=sc[m]) for m in sc if "all" in sc[m]},
            plan=pl.plan,
            fallbacks=ledger.notes(sid),
            warnings=(policy_warnings(oc, coverage_target) + ledger.warnings(sid)
                      + risk_warnings(pl.kind, pl.plan, oc.params)),
            combination=fc.combination.get(sid, {}),
            reused=ledger.reused(sid),
        )
    failed = ledger.failed
    counted = {s: ledger.reused(s) for s in ledger.series
               if failed.get(s, {}).get("stage") not in ("regularise", "forecast")}
    run = run.model_copy(update={"models": fc.models, "reuse": reuse_totals(counted)})
    return Report(run=run, series=series, missing=missing or {},
                  failed={s: SeriesFailure(**f) for s, f in failed.items()})


def reuse_totals(reused: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Totals of per-series ``reused`` records (:attr:`SeriesReport.reused`):
    ``{"rolling_blocks": {"reused", "computed", "fit_reused"}, "search": {"reused", "tuning_reused", "computed"}}``
    (``fit_reused``: computed blocks that predicted with their stored fit); empty when nothing was cached."""
    out: dict[str, dict[str, int]] = {}
    for r in reused.values():
        for st in r.get("rolling", {}).values():
            t = out.setdefault("rolling_blocks", {"reused": 0, "computed": 0, "fit_reused": 0})
            for k in t:
                t[k] += st.get(k, 0)
        if "search" in r:
            t = out.setdefault("search", {"reused": 0, "tuning_reused": 0, "computed": 0})
            t[r["search"]] += 1
    return out


def versions() -> dict[str, str]:
    """Versions of the libraries that shape the numbers."""
    return {"python": platform.python_version(), **library_versions(VERSIONED_LIBS)}


def price_book_used(cfg) -> dict[str, dict[str, Any]]:
    """The price book a run used (``cfg.price_book()``: built-in entries, the config's ``prices:`` over them),
    per GPU model, unset limits left out: ``{model: {"on_demand", "reserved", "spot", ...}}``, USD per GPU-hour;
    ``interruption_rate`` (per spot GPU-hour) and ``recovery_s`` as the replay used them: the entry's, else
    ``plan.interruption_rate`` / ``plan.recovery_s`` (capplan.report.assumptions states them)."""
    plan = {"interruption_rate": cfg.plan.interruption_rate, "recovery_s": cfg.plan.recovery_s}
    return {k: {**plan, **v.model_dump(exclude_none=True)} for k, v in sorted(cfg.price_book().items())}


def schema() -> dict:
    """The JSON schema of ``report.json`` (published as ``schemas/report.schema.json``)."""
    s = Report.model_json_schema()
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return s


if __name__ == "__main__":
    print(json.dumps(schema(), indent=2, sort_keys=True))
