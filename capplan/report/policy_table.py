"""The views of a walk-forward policy backtest (:func:`capplan.backtest.walk_forward.run_policy_backtest`):
the rich tables of ``capplan backtest --policies`` and its CSV rows.

* :func:`print_tables` — per series and week, one row per policy (cost in USD, coverage,
  idle ratio, regret = cost / perfect-foresight cost of that week; the recommendation's rank
  on the tuning weeks and on the scored week), then per series the week-to-week spread of
  the regrets, then the fleet's (Σ cost / Σ limit) per calendar week;
* :func:`csv_rows` — one row per series, week and policy.
"""

from __future__ import annotations

from rich.console import Console

from capplan.backtest.walk_forward import POLICIES
from capplan.cli.table import Column, fit_table


def _num(v, fmt: str = ".3f") -> str:
    return "n/a" if v is None or v != v else format(v, fmt)


def _pct(v) -> str:
    """A ratio 0-1 as the plan table prints it: ``94.7%``."""
    return "n/a" if v is None or v != v else f"{100 * v:.1f}%"


#: what the columns mean, printed under the table
LEGEND = ("(coverage: share of the week's intervals with capacity >= demand; idle: unused share of the capacity; "
          "regret: cost / the perfect-foresight cost of the week, below 1 only for a policy that left demand unmet; "
          "rank tune → next: the recommendation's rank among the candidates on its tuning weeks → on the scored "
          "week, of N)")


def _rank(r: dict) -> str:
    if r.get("tuning") is None:
        return "n/a"
    return f"{r['tuning']} → {r['next_week']} of {r['candidates']}"


def _label(p: str, week: dict) -> str:
    if p == "recommended":
        return f"recommended ({week['recommendation']})"
    if p == "searched":
        return "searched (not recommended)"
    return p


def _policies(week: dict) -> list[str]:
    """The week's policies in display order (``searched`` after the recommendation when a rival won)."""
    order = ["recommended", "searched", *POLICIES[1:]]
    return [p for p in order if p in week["policies"]]


def csv_rows(doc: dict) -> list[dict]:
    """One row per series, scored week and policy: ``series_id, week, start, end, tuning_start,
    tuning_end, policy, recommendation, limit_usd, cost_usd, coverage, idle_ratio, unmet,
    regret`` and, on the recommendation's row, ``rank_tuning, rank_next_week, candidates,
    rank_spearman``."""
    rows = []
    for sid, s in doc["series"].items():
        for w in s["weeks"]:
            for p in _policies(w):
                row = {"series_id": sid, "week": w["week"], "start": w["start"], "end": w["end"],
                       "tuning_start": w["tuning"][0], "tuning_end": w["tuning"][1], "policy": p,
                       "recommendation": w["recommendation"], "limit_usd": w["limit_usd"],
                       **w["policies"][p]}
                if p == "recommended":
                    r = w["rank"]
                    row.update(rank_tuning=r["tuning"], rank_next_week=r["next_week"], candidates=r["candidates"],
                               rank_spearman=r["spearman"])
                rows.append(row)
    return rows


def print_tables(doc: dict, console: Console) -> None:
    """The table view (module docstring), the skipped series' notes and the failed ones."""
    cols = [Column("series", min_width=10), Column("week", min_width=10), Column("tuned on", drop=2, min_width=10),
            Column("policy", min_width=12), Column("cost USD", numeric=True), Column("coverage", numeric=True),
            Column("idle", numeric=True, drop=3), Column("regret", numeric=True),
            Column("rank tune → next", numeric=True, drop=1)]
    rows = []
    for sid, s in doc["series"].items():
        for i, w in enumerate(s["weeks"]):
            weeks_tuned = f"{w['tuning'][0][:10]} – {w['tuning'][1][:10]}"
            for j, p in enumerate(_policies(w)):
                f = w["policies"][p]
                rows.append([sid if i == 0 and j == 0 else "", f"{w['week']}: {w['start'][:10]}" if j == 0 else "",
                             weeks_tuned if j == 0 else "", _label(p, w), _num(f["cost_usd"], ",.0f"),
                             _pct(f["coverage"]), _pct(f["idle_ratio"]), _num(f["regret"], ".2f"),
                             _rank(w["rank"]) if p == "recommended" else ""])
    t, dropped = fit_table("capplan backtest --policies — walk-forward: tuned on the weeks before, scored on the "
                           "week (regret = cost / perfect-foresight cost)", cols, rows, console.width)
    console.print(t)
    console.print(LEGEND, markup=False, highlight=False)
    if dropped:
        console.print(f"(not shown for width: {', '.join(dropped)}; --format json or csv has every field)")
    _print_spread(doc, console)
    for sid, why in doc.get("skipped", {}).items():
        console.print(f"skipped {sid}: {why}", markup=False, highlight=False)
    for sid, f in doc.get("failed", {}).items():
        console.print(f"failed {sid} ({f['stage']}): {f['error']}", style="red", markup=False, highlight=False)


def _print_spread(doc: dict, console: Console) -> None:
    """Per series the week-to-week spread of the recommendation's regret, Σ cost / Σ limit of
    every policy; then the fleet per calendar week and overall."""
    cols = [Column("series", min_width=10), Column("weeks", numeric=True), Column("rec. min", numeric=True),
            Column("median", numeric=True), Column("max", numeric=True), Column("std", numeric=True),
            *[Column(f"Σ {p}", numeric=True, drop=2) for p in POLICIES],
            Column("rank next (median)", numeric=True, drop=1)]
    rows = []
    for sid, s in doc["series"].items():
        sm = s["summary"]
        sp = sm["recommended"]["spread"]
        rows.append([sid, str(sp["weeks"]), _num(sp["min"]), _num(sp["median"]), _num(sp["max"]), _num(sp["std"]),
                     *[_num(sm[p]["regret"]) for p in POLICIES], _num(sm["rank_next_week"]["median"], "g")])
    t, dropped = fit_table("Week-to-week spread of the recommendation's regret; Σ = Σ cost / Σ limit over the weeks",
                           cols, rows, console.width)
    console.print(t)
    if dropped:
        console.print(f"(not shown for width: {', '.join(dropped)})")
    fleet = doc["summary"]
    for start, v in fleet["weeks"].items():
        console.print(f"fleet week of {start[:10]} ({v['series']} series): regret "
                      + ", ".join(f"{p} {_num(v[p])}" for p in POLICIES), markup=False, highlight=False)
    sp = fleet["recommended_spread"]
    overall = ", ".join(f"{p} {_num(fleet['policies'][p]['regret'])}" for p in POLICIES)
    console.print(f"fleet regret over every scored week (Σ cost / Σ limit): {overall}; the recommendation's fleet "
                  f"regret from week to week: min {_num(sp['min'])}, median {_num(sp['median'])}, max "
                  f"{_num(sp['max'])}, std {_num(sp['std'])} over {sp['weeks']} week(s)", markup=False,
                  highlight=False)
