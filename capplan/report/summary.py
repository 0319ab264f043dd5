"""The fleet summary: ``report["summary"]`` and the lines under ``capplan plan``'s table.

Costs are USD on each series' evaluation window (the window the search never
saw), summed over the series. A *policy* is any metrics entry of a series
report that has ``cost_usd`` and ``coverage``: ``recommended``, ``baseline``,
``random_search`` and whatever other policies the report carries (top-level
entries, or one level down such as ``peers.reactive``), so new policies join
the summary without a change here; a series' ``quota`` block (its plan held to the
pool's quota) is not a policy and is summed apart (``quota``). The fleet's ``recommended`` is what the
exported objects allow: a pool whose exported Volcano Queue holds it to its quota counts its figures held
there (:func:`exported_metrics`), in the cost, the saving, the missed targets and the mix, and
``quota_raised`` is the fleet with every such quota raised to what the plan asks.

``mix``: the recommended fleet's purchase mix, the sum of the series' ``recommended.mix``
(:func:`optimizer.book.purchase.mix_total`; shares are the reader's, gpu_hours / total);
series without one (older runs) are left out and ``mix_series`` says how many were summed.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from capplan.report.assumptions import Assumption, assumptions
from capplan.report.selection_report import selection_lines, selection_summary
from optimizer.book.purchase import MIX_LAYERS, mix_total
from optimizer.book.purchase_check import NEED_BASIS
from optimizer.search.settings import COVERAGE_TARGET

#: the policies shown first, in this order; others follow by name
FIRST = ("recommended", "baseline")
#: series entries that hold metrics but are not policies
NOT_POLICIES = ("quota",)


def _is_metrics(v) -> bool:
    return isinstance(v, dict) and "cost_usd" in v and "coverage" in v


def policy_metrics(entry: dict) -> dict[str, dict]:
    """``policy name -> metrics dict`` of one series entry of the report (see module docstring)."""
    out: dict[str, dict] = {}
    for k, v in entry.items():
        if k in NOT_POLICIES:
            continue
        if _is_metrics(v):
            out[k] = v
        elif isinstance(v, dict):
            for k2, v2 in v.items():
                if _is_metrics(v2):
                    out.setdefault(k2, v2)
    return out


def ordered(names) -> list[str]:
    """Policy names: recommended, baseline, then the rest sorted."""
    names = list(dict.fromkeys(names))
    return [n for n in FIRST if n in names] + sorted(n for n in names if n not in FIRST)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


class MissedTarget(BaseModel):
    """A series whose recommended coverage is below the target on its evaluation window."""

    series_id: str
    coverage: float = Field(description="recommended policy's coverage (0-1)")
    target: float = Field(description="run.coverage_target (0-1)")


class QuotaShort(BaseModel):
    """A pool whose plan needs more than its quota (``series.<id>.quota``): its figures held to the quota
    (what the exported Volcano Queue allows) and with the quota raised to ``need_gpus``."""

    series_id: str
    quota_gpus: float
    need_gpus: int = Field(description="raise the quota to this many GPUs")
    capped_coverage: float | None = Field(description="the plan's coverage held to the quota (0-1)")
    raised_coverage: float | None = Field(default=None, description="its coverage with the quota raised to "
                                          "need_gpus (the uncapped recommendation, 0-1)")
    capped_cost_usd: float | None = Field(default=None, description="USD on the evaluation window held to the quota")
    raised_cost_usd: float | None = Field(default=None, description="USD with the quota raised to need_gpus")
    held: bool = Field(default=True, description="whether the exported Queue holds the pool to the quota (the "
                       "held figures are then the pool's headline)")


class FleetSummary(BaseModel):
    """``report.json``'s ``summary``: the fleet on the evaluation windows."""

    series: int = Field(description="series in the report")
    coverage_target: float = Field(description="ratio 0-1")
    cost_usd: dict[str, float] = Field(description="policy -> USD summed over the series that have it; "
                                       "recommended: what the exported objects allow (a pool the Queue holds to "
                                       "its quota counts its figures held there, SeriesReport.exported); "
                                       "quota_raised: the recommended fleet with every such quota raised")
    series_counted: dict[str, int] = Field(description="policy -> series summed in cost_usd")
    saving_usd: float | None = Field(description="baseline - recommended, USD (negative: the plan costs more)")
    saving_ratio: float | None = Field(description="saving_usd / baseline cost (0-1); null when the baseline costs 0")
    missing_target: list[MissedTarget] = Field(default_factory=list)
    mix: dict[str, dict[str, float]] | None = Field(default=None, description="the recommended fleet's purchase "
                                                    "mix: {reserved|spot|on_demand: {gpu_hours, cost_usd}}; null "
                                                    "when no series recorded one")
    mix_series: int = Field(default=0, description="series whose recommended mix is summed in mix")
    quota: list[QuotaShort] = Field(default_factory=list, description="pools whose plan needs more than their "
                                    "quota, each held to it and raised (cost_usd.recommended counts them held "
                                    "where the exported Queue holds them, cost_usd.quota_raised raised)")
    selection: dict | None = Field(default=None, description="the multi-week selection's week-to-week spread "
                                   "(capplan.report.selection_report); null when no pool was ranked on weeks")
    assumptions: list[Assumption] = Field(default_factory=list, description="the price book's assumptions that "
                                          "move the headline (no spot cap, the spot interruptions, whose prices), "
                                          "each with the setting that changes it (capplan.report.assumptions); "
                                          "stated first under the plan table and on the Fleet page")


def fleet_summary(report) -> FleetSummary:
    """The fleet summary of a plan report (:class:`capplan.report.model.Report` or its dict,
    ``{"run": {...}, "series": {id: entry}}``).

    A policy missing from some series is summed over those that have it
    (``series_counted`` says how many). A series misses the target when its
    recommended coverage is below ``run.coverage_target``; a coverage that is
    undefined (no observed demand) is not a miss.
    """
    if hasattr(report, "model_dump"):
        report = report.model_dump()
    series = report.get("series") or {}
    target = float((report.get("run") or {}).get("coverage_target", COVERAGE_TARGET))
    cost: dict[str, float] = {}
    counted: dict[str, int] = {}
    missing = []
    exported = {sid: exported_metrics(e) for sid, e in series.items()}
    for sid, entry in series.items():
        pols = policy_metrics(entry)
        if "recommended" in pols:
            pols = {**pols, "recommended": exported[sid]}
            if exported[sid] is not entry["recommended"]:
                pols["quota_raised"] = entry["recommended"]
        for name, m in pols.items():
            if _finite(m.get("cost_usd")):
                cost[name] = cost.get(name, 0.0) + float(m["cost_usd"])
                counted[name] = counted.get(name, 0) + 1
        cov = exported[sid].get("coverage")
        if _finite(cov) and cov < target - 1e-9:
            missing.append({"series_id": sid, "coverage": round(float(cov), 6), "target": target})
    if "quota_raised" in cost:  # the fleet with every held quota raised: the other pools as they are
        cost["quota_raised"] += sum(float(m["cost_usd"]) for sid, m in exported.items() if _finite(m.get("cost_usd"))
                                    and m is (series[sid].get("recommended") or {}))
        counted["quota_raised"] = counted.get("recommended", 0)
    mixes = [(exported[sid].get("mix") or (e.get("recommended") or {}).get("mix")) for sid, e in series.items()]
    short = [{"series_id": sid, "quota_gpus": e["quota"]["quota_gpus"], "need_gpus": e["quota"]["need_gpus"],
              "capped_coverage": (e["quota"].get("capped") or {}).get("coverage"),
              "capped_cost_usd": (e["quota"].get("capped") or {}).get("cost_usd"),
              "raised_coverage": (e.get("recommended") or {}).get("coverage"),
              "raised_cost_usd": (e.get("recommended") or {}).get("cost_usd"), "held": e["quota"].get("held", True)}
             for sid, e in series.items() if e.get("quota")]
    rec, base = cost.get("recommended"), cost.get("baseline")
    saving = (base - rec) if rec is not None and base is not None else None
    return FleetSummary(
        series=len(series), coverage_target=target,
        cost_usd={k: round(cost[k], 2) for k in ordered(cost)},
        series_counted={k: counted[k] for k in ordered(counted)},
        saving_usd=round(saving, 2) if saving is not None else None,
        saving_ratio=round(saving / base, 4) if saving is not None and base else None,
        missing_target=[MissedTarget(**m) for m in missing], mix=mix_total(mixes),
        mix_series=sum(1 for m in mixes if m), quota=[QuotaShort(**q) for q in short],
        selection=selection_summary(series), assumptions=assumptions(report, mix_total(mixes)))


def exported_metrics(entry: dict) -> dict:
    """The metrics of what a series' exported objects allow (a report.json series entry; as
    :meth:`capplan.report.model.SeriesReport.exported`): ``quota.capped`` when the Queue holds the pool to its
    quota (``quota.held``, true when absent), else ``recommended`` (the same dict object)."""
    q = entry.get("quota")
    if q and q.get("held", True) and _is_metrics(q.get("capped")):
        return q["capped"]
    return entry.get("recommended") or {}


def summary_lines(summary) -> list[str]:
    """Human lines for the summary (:class:`FleetSummary` or its dict), printed under the plan table."""
    if hasattr(summary, "model_dump"):
        summary = summary.model_dump()
    n = summary["series"]
    parts = []
    for k, v in summary["cost_usd"].items():
        c = summary["series_counted"].get(k, n)
        parts.append(f"{k.replace('_', ' ')} {v:,.0f}" + (f" ({c} of {n} series)" if c != n else ""))
    lines = [f"Fleet ({n} series), cost USD on the evaluation windows: " + ", ".join(parts)]
    if summary["saving_usd"] is not None:
        ratio = summary["saving_ratio"]
        pct = f" ({100 * abs(ratio):.1f} % of the baseline)" if ratio is not None else ""
        word = "saving" if summary["saving_usd"] >= 0 else "extra cost"
        raised = summary["cost_usd"].get("quota_raised")
        base = summary["cost_usd"].get("baseline")
        also = (f"; with every quota raised (row quota raised) the plan costs {raised:,.0f} USD, "
                f"{'saving' if base >= raised else 'extra cost'} {abs(base - raised):,.0f} USD"
                if raised is not None and base is not None else "")
        lines.append(f"Overall {word} against the baseline: {abs(summary['saving_usd']):,.0f} USD{pct}, the plan "
                     f"held to the pools' quotas{also}" if raised is not None else
                     f"Overall {word} against the baseline: {abs(summary['saving_usd']):,.0f} USD{pct}")
    miss = summary["missing_target"]
    target = f"{100 * summary['coverage_target']:.0f} %"
    if miss:
        lines.append(f"Below the coverage target of {target}: " +
                     ", ".join(f"{m['series_id']} ({100 * m['coverage']:.1f} %)" for m in miss))
    else:
        lines.append(f"Every series meets the coverage target of {target}.")
    return lines + mix_lines(summary) + selection_lines(summary.get("selection"))


def mix_lines(summary: dict) -> list[str]:
    """The purchase-mix line of the recommended fleet (shares of GPU-hours and of USD; "mix not
    recorded" for an older run) and one line naming every pool whose plan needs more than its quota."""
    mix = summary.get("mix")
    if not mix:
        lines = ["Purchase mix: mix not recorded"]
    else:
        hours = sum(mix[k]["gpu_hours"] for k in MIX_LAYERS) or 1.0
        usd = sum(mix[k]["cost_usd"] for k in MIX_LAYERS) or 1.0
        lines = ["Purchase mix (recommended), share of GPU-hours / of USD: " + ", ".join(
            f"{k.replace('_', ' ')} {100 * mix[k]['gpu_hours'] / hours:.0f} % / {100 * mix[k]['cost_usd'] / usd:.0f} % "
            f"({mix[k]['gpu_hours']:,.0f} GPU-h, {mix[k]['cost_usd']:,.0f} USD)" for k in MIX_LAYERS)]
    return lines


def _pct(x) -> str:
    return f"{100 * x:.1f} %" if _finite(x) else "n/a"


def quota_note(summary) -> str | None:
    """The "act on" note naming every pool whose plan needs more than its quota (:class:`FleetSummary` or its
    dict): per pool the quota now and the GPUs to ask for (:data:`optimizer.book.purchase_check.NEED_BASIS`),
    its coverage and USD held to the quota (the table's recommended row, what the exported Queue allows) and
    with the quota raised (the row ``quota raised``). None when no pool is above its quota."""
    if hasattr(summary, "model_dump"):
        summary = summary.model_dump()
    qs = summary.get("quota") or []
    if not qs:
        return None
    parts = []
    for q in qs:
        extra = (f", {q['raised_cost_usd'] - q['capped_cost_usd']:+,.0f} USD"
                 if _finite(q.get("raised_cost_usd")) and _finite(q.get("capped_cost_usd")) else "")
        held = "" if q.get("held", True) else " (the Queue is not held to it: export.capability_limit plan)"
        parts.append(f"{q['series_id']} {q['quota_gpus']:g} -> {q['need_gpus']} GPUs{held}: coverage "
                     f"{_pct(q.get('capped_coverage'))} -> {_pct(q.get('raised_coverage'))}{extra}")
    noun = "pool is" if len(qs) == 1 else "pools are"
    return (f"quota: {len(qs)} {noun} above the quota; the recommended row is the plan held to it (what the "
            f"exported Volcano Queue allows), the quota raised row what raising it to {NEED_BASIS} buys: "
            + "; ".join(parts))
