"""The fleet step of the export stage: the series that set fleet keys (``gpu_models``, ``min_gpu_memory_gb``,
``share``: the config's ``series:`` entries by id, or a CSV's columns; or the members the ``fleet:`` section
names) planned as one fleet (:mod:`optimizer.fleet`), for the report's ``fleet`` object and ``run.gpu_models``
(:mod:`capplan.report.fleet`). Without fleet keys there is no fleet and the report is unchanged.

Demand per member: the hourly peak (``Prepared.h1`` ``value``) in GPUs of its own model (``gpu_model``; an
inference service's replicas x ``gpus_per_replica``), times its numeric ``share`` (a MIG profile: its compute
slices / 7). Members are laid on one timeline by their evaluation windows' ends (hour by hour backwards): on a
cluster's series these are the same hours; where they differ (a sample of traces from different years) the
report's fleet notes say so. The evaluation window is the shortest member's; the causal plan reads the hours
before it (:mod:`optimizer.fleet.causal`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pydantic import ValidationError

from capplan.config.fleet import FLEET_KEYS, SeriesFleetKeys, check_series_keys
from capplan.errors import InputError
from capplan.report.fleet import FleetCost, FleetLimit, FleetReport, FleetSeries, MixFigures, catalogue_used
from capplan.run.state import PlanState
from optimizer.book.gpus import spec_for
from optimizer.exporters.fleet.kueue import FleetQuota
from optimizer.exporters.names import assign_names, k8s_name
from optimizer.fleet.causal import CausalRule, FleetPlan
from optimizer.fleet.compare import compare
from optimizer.fleet.limit import LAYERS
from optimizer.fleet.problem import FleetProblem, build_problem
from optimizer.fleet.quota import fleet_quota


def members(state: PlanState) -> dict[str, SeriesFleetKeys]:
    """Per planned series that belongs to the fleet, its fleet keys: a config entry's keys win over the
    source's (CSV columns, kept in the series metadata); the ``fleet:`` section's ``series`` adds members
    without keys. Empty when no series sets a key and there is no ``fleet:`` section."""
    cfg, meta = state.cfg, state.prep.meta
    entries = {s.id: s.fleet_keys() for s in cfg.series}
    named = set(cfg.fleet.series) if cfg.fleet is not None else set()
    out = {}
    for sid, m in meta.items():
        if sid not in state.prep.windows:
            continue
        keys = entries.get(sid)
        if keys is None or not keys.is_set():
            extra = {k: getattr(m, k) for k in FLEET_KEYS if getattr(m, k, None) is not None}
            keys = SeriesFleetKeys.model_validate(extra)
        if keys.is_set() or sid in named:
            out[sid] = keys
    if cfg.fleet is not None and not cfg.fleet.series and not out:
        out = {sid: SeriesFleetKeys() for sid in meta if sid in state.prep.windows}
    return out


def _share_factor(share, allowed: list[str], catalogue) -> float:
    if share is None:
        return 1.0
    if isinstance(share, float):
        return share
    for m in allowed:  # a MIG profile: its compute slices out of 7
        for p in catalogue[m].mig_profiles:
            if p.name == share:
                return p.slices / 7.0
    return 1.0


@dataclass
class FleetOutputs:
    """What the fleet step gives the export stage: ``report`` (``report.json``'s ``fleet``), ``gpu_models``
    (``run.gpu_models``), ``quota`` (the Kueue quotas of the recommended plan, :mod:`optimizer.fleet.quota`,
    written by the Kueue exporter and recorded in ``policy.yaml``'s ``spec.fleet``) and ``hourly``
    (``fleet.parquet``, :func:`hourly_frame`)."""

    report: FleetReport
    gpu_models: dict
    quota: FleetQuota
    hourly: pd.DataFrame


def teams_of(state: PlanState, ids: list[str]) -> dict[str, tuple[str | None, list[str]]]:
    """The fleet's teams: team name -> (namespace, member series). A series whose config names a namespace
    (its ``series:`` entry's ``namespace`` or ``export.targets.<id>.namespace``) joins the team of that
    namespace (named as it); any other is a team of its own, named as its other manifests
    (:func:`optimizer.exporters.names.assign_names`), in ``export.namespace``. Raises
    :class:`capplan.errors.InputError` when a namespace's team name is also a series' own team name."""
    cfg = state.cfg
    names = assign_names(list(ids))
    teams: dict[str, tuple[str | None, list[str]]] = {}
    for sid in ids:
        t = cfg.export.targets.get(sid)
        ns = t.namespace if t is not None and t.namespace else None
        name = k8s_name(ns) if ns is not None else names[sid]
        if name in teams and (ns is None or teams[name][0] != ns):
            raise InputError(f"fleet: team {name!r} is both a namespace and a series' own team (series "
                             f"{', '.join(teams[name][1] + [sid])}); set another namespace in their series: entries "
                             "or export.targets")
        if ns is not None:
            teams.setdefault(name, (ns, []))[1].append(sid)
        else:
            teams[name] = (cfg.export.namespace, [sid])
    return teams


def hourly_frame(problem: FleetProblem, plan: FleetPlan, window_end: pd.Timestamp) -> pd.DataFrame:
    """``fleet.parquet``: one row per hour of the evaluation window and GPU model of the recommended plan, columns
    ``timestamp`` (datetime64[ns, UTC], the hour's start), ``gpu_model`` (str), ``capacity_gpus`` (GPUs held, all
    purchase options), ``reserved_gpus``, ``spot_gpus``, ``on_demand_gpus`` (per option) and ``demand_gpus``
    (GPUs of that model serving the fleet's series in the hour, :func:`optimizer.fleet.replay.assign`), all
    float64 in GPUs of the row's model. ``window_end``: the last hour."""
    t = problem.hours
    ts = pd.date_range(end=window_end, periods=t, freq="h")
    served = plan.placed.sum(axis=0)
    parts = []
    for j, m in enumerate(problem.models):
        layer = {f"{k}_gpus": np.asarray(plan.capacity[k][j], float) + 0.0 for k in LAYERS}  # + 0.0: no -0.0
        parts.append(pd.DataFrame({"timestamp": ts, "gpu_model": m,
                                   "capacity_gpus": sum(layer.values()), **layer,
                                   "demand_gpus": np.asarray(served[j], float)}))
    return pd.concat(parts, ignore_index=True)


def fleet_section(state: PlanState) -> tuple[FleetReport, dict] | None:
    """The report's ``fleet`` object and ``run.gpu_models`` (:func:`fleet_outputs`), or None without a fleet."""
    out = fleet_outputs(state)
    return None if out is None else (out.report, out.gpu_models)


def checked_members(state: PlanState) -> dict[str, tuple[SeriesFleetKeys, list[str]]]:
    """Per fleet member (:func:`members`), its keys and the catalogue models it may use; run by the load stage as
    soon as the series' metadata is known, so a bad member fails before any forecast. Raises InputError naming
    the series and key: no ``gpu_model`` (the model its demand is measured on), an unknown one, or keys no model
    satisfies (:func:`capplan.config.fleet.check_series_keys`)."""
    catalogue = state.cfg.gpu_catalogue_used()
    out = {}
    for sid, k in sorted(members(state).items()):
        m = state.prep.meta[sid]
        if m.gpu_model in ("", "default"):
            raise InputError(f"fleet: series {sid!r} is a fleet member without gpu_model (the GPU model its demand "
                             "is measured on); set gpu_model in its series: entry or a gpu_model column")
        try:
            spec_for(catalogue, m.gpu_model)
            out[sid] = (k, check_series_keys(sid, catalogue, k.gpu_models, k.min_gpu_memory_gb, k.share))
        except (KeyError, ValueError) as exc:
            msg = str(exc) if isinstance(exc, ValueError) else f"series {sid!r}: gpu_model: {exc}"
            raise InputError(f"fleet: {msg}; a fleet member's demand is measured on a catalogue model: set gpu_model "
                             "(config series: entry or CSV column)") from None
    return out


def fleet_outputs(state: PlanState) -> FleetOutputs | None:
    """The fleet step's outputs (:class:`FleetOutputs`), or None when the run has no fleet. Raises
    :class:`capplan.errors.InputError` naming the series and key when a member's own model (``gpu_model``) is
    not in the catalogue, or a key read from the data is bad for the run's catalogue
    (:func:`capplan.config.fleet.check_series_keys`); or naming the team when the teams (:func:`teams_of`)
    cannot be Kueue queues (a namespace that is not an RFC 1123 label, a name taken twice)."""
    cfg = state.cfg
    checked = checked_members(state)
    if not checked:
        return None
    catalogue = cfg.gpu_catalogue_used()
    book = cfg.price_book()
    ids, kinds, own, allowed, floors, rows, ends, notes = [], [], [], [], [], [], [], []
    h1 = state.prep.h1
    for sid, (k, allow) in sorted(checked.items()):
        m = state.prep.meta[sid]
        w = state.prep.windows[sid]
        g = h1[h1["series_id"] == sid].set_index("timestamp")["value"]
        g = g[g.index <= w.end]
        unit = m.gpus_per_replica if m.kind == "inference" else 1.0
        rows.append(g.to_numpy(float) * unit * _share_factor(k.share, allow, catalogue))
        ends.append((pd.Timestamp(w.eval_start), pd.Timestamp(w.end)))
        ids.append(sid)
        kinds.append(m.kind)
        own.append(m.gpu_model)
        allowed.append(allow)
        floors.append(k.min_gpu_memory_gb)
    eval_hours = min(max(1, int((e - s) / pd.Timedelta("1h")) + 1) for s, e in ends)
    length = min(len(r) for r in rows)
    eval_hours = min(eval_hours, length)
    demand = np.vstack([r[-length:] for r in rows])
    if len({e for _, e in ends}) > 1:
        notes.append("members' histories end at different times; laid on one timeline by position from their "
                     "ends (hour by hour)")
    need = np.ceil(np.nan_to_num(np.maximum(demand, 0.0), nan=0.0) - 1e-9)
    problem = build_problem(ids, kinds, own, allowed, floors, need, catalogue, book)
    start = length - eval_hours
    rule = CausalRule()
    c = compare(problem.window(start, length), need, start, rule)
    rows_out = c.series_rows()
    end = max(e for _, e in ends).floor("h")
    window = ((end - pd.Timedelta(hours=eval_hours - 1)).isoformat(), end.isoformat())
    series = {sid: FleetSeries(share=checked[sid][0].share,
                               **{k: v for k, v in r.items() if k in FleetSeries.model_fields})
              for sid, r in rows_out.items()}
    fleet = FleetReport(
        name=cfg.fleet.name if cfg.fleet is not None else "fleet", evaluation_window=window, hours=eval_hours,
        rule=(f"{rule.method}: reserved (a week ahead) and spot (a day ahead) from the past {rule.lookback_days} "
              "days as scenarios; on-demand from the hour before"),
        limit=FleetLimit(cost_usd=c.limit.cost_usd, bound_usd=c.limit.bound_usd, method=c.limit.method),
        recommended=FleetCost(cost_usd=c.recommended.cost_usd, limit_usd=c.limit.cost_usd),
        alone=FleetCost(cost_usd=c.alone_cost_usd, limit_usd=c.alone_limit_usd),
        pooled=FleetCost(cost_usd=c.pooled.cost_usd, limit_usd=c.pooled_limit.cost_usd),
        regret=None if not np.isfinite(c.regret) else c.regret, violations=c.violations,
        mix={m: {k: MixFigures(**v) for k, v in opts.items()} for m, opts in c.mix().items()},
        series=series, notes=notes + list(problem.notes))
    try:
        quota = fleet_quota(c.problem, c.recommended, teams_of(state, ids),
                            k8s_name(cfg.fleet.name if cfg.fleet is not None else "fleet"), c.mix())
    except ValidationError as exc:  # a namespace that is not an RFC 1123 label: the config's, so bad input
        raise InputError(f"fleet: the Kueue quotas cannot be written: {exc.errors()[0]['msg']}") from None
    return FleetOutputs(report=fleet, gpu_models=catalogue_used(catalogue, book), quota=quota,
                        hourly=hourly_frame(c.problem, c.recommended, end))
