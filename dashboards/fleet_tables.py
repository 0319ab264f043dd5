"""The Fleet page's GPU fleet section (a run with fleet keys): the fleet's figures beside each series alone and
pooled, the recommended mix per GPU model and purchase option, each member's placement, and per GPU model its
capacity against the demand it served over the evaluation window.

Inputs are ``report.json``'s ``fleet`` object (:class:`capplan.report.fleet.FleetReport`, as a dict) and
``fleet.parquet`` (:func:`capplan.run.stages.fleet.hourly_frame`: ``timestamp``, ``gpu_model``,
``capacity_gpus``, ``reserved_gpus``, ``spot_gpus``, ``on_demand_gpus``, ``demand_gpus``, in GPUs of the row's
model). Pure functions of those, so they are tested without Streamlit.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

OPTIONS = (("reserved", "reserved"), ("spot", "spot"), ("on_demand", "on-demand"))
OPTION_COLORS = {"reserved": "#1d4ed8", "spot": "#60a5fa", "on_demand": "#f59e0b"}


def _usd(x) -> str:
    return "n/a" if x is None else f"${x:,.0f}"


def figures_table(fleet: dict) -> pd.DataFrame:
    """One row per variant on the fleet's evaluation window: ``plan`` (recommended: pooled with substitution;
    pooled on each series' own model; each series alone on its own model, summed; the perfect-foresight limit),
    ``cost`` (USD), ``vs alone`` (the change against the alone sum, %) and ``own limit`` (the variant's own
    perfect-foresight limit, USD; blank where not recorded)."""
    alone = fleet["alone"]["cost_usd"]
    rows = [("recommended (pooled, models substituted)", fleet["recommended"]),
            ("pooled, each series on its own model", fleet["pooled"]),
            ("each series alone on its own model (sum)", fleet["alone"]),
            ("perfect-foresight limit", {"cost_usd": fleet["limit"]["cost_usd"], "limit_usd": None})]
    out = []
    for name, v in rows:
        cost = v["cost_usd"]
        out.append({"plan": name, "cost": _usd(cost),
                    "vs alone": "" if not alone else f"{100 * (cost - alone) / alone:+.1f} %",
                    "own limit": _usd(v.get("limit_usd")) if v.get("limit_usd") is not None else ""})
    return pd.DataFrame(out)


def mix_table(fleet: dict) -> pd.DataFrame:
    """One row per GPU model and purchase option of the recommended plan: ``GPU model``, ``purchase``,
    ``GPUs`` (the most held at once), ``GPU-hours``, ``USD``; a ``total`` row per model."""
    rows = []
    for model, opts in sorted(fleet.get("mix", {}).items()):
        for key, label in OPTIONS:
            v = opts.get(key)
            if v is not None:
                rows.append({"GPU model": model, "purchase": label, "GPUs": f"{v['gpus']:,.0f}",
                             "GPU-hours": f"{v['gpu_hours']:,.0f}", "USD": _usd(v["cost_usd"])})
        rows.append({"GPU model": model, "purchase": "total", "GPUs": "",
                     "GPU-hours": f"{sum(v['gpu_hours'] for v in opts.values()):,.0f}",
                     "USD": _usd(sum(v["cost_usd"] for v in opts.values()))})
    return pd.DataFrame(rows, columns=["GPU model", "purchase", "GPUs", "GPU-hours", "USD"])


def series_table(fleet: dict) -> pd.DataFrame:
    """One row per member series: its own model, the models it may use, its memory floor, where the recommended
    plan placed it (GPU-hours per model), its coverage in the fleet and alone, and its alone cost (USD)."""
    rows = []
    for sid, s in sorted(fleet.get("series", {}).items()):
        floor = s.get("min_gpu_memory_gb")
        rows.append({"series": sid, "own model": s["gpu_model"], "may use": ", ".join(s["allowed"]),
                     "memory floor": "" if floor is None else f"{floor:g} GB",
                     "placement (GPU-hours)": ", ".join(f"{m} {h:,.0f}" for m, h in
                                                        sorted(s["placement"].items(), key=lambda x: -x[1])),
                     "coverage (fleet)": f"{100 * s['coverage']:.1f}%",
                     "coverage (alone)": f"{100 * s['alone_coverage']:.1f}%",
                     "cost alone": _usd(s["alone_cost_usd"])})
    return pd.DataFrame(rows)


def shown_models(hourly: pd.DataFrame) -> list[str]:
    """The GPU models of ``fleet.parquet`` with any capacity or demand (a member's own model that the plan never
    buys nor uses is left out), in the frame's order."""
    if hourly.empty:
        return []
    busy = hourly.groupby("gpu_model", sort=False)[["capacity_gpus", "demand_gpus"]].max().max(axis=1)
    return [m for m, v in busy.items() if v > 0]


def capacity_figure(hourly: pd.DataFrame, model: str) -> go.Figure:
    """One GPU model over the evaluation window: the recommended plan's GPUs held, stacked by purchase option
    (reserved, spot, on-demand; the top is ``capacity_gpus``), and the demand it served (``demand_gpus``), in
    GPUs of that model."""
    g = hourly[hourly["gpu_model"] == model].sort_values("timestamp")
    fig = go.Figure()
    for key, label in OPTIONS:
        fig.add_trace(go.Scatter(x=g["timestamp"], y=g[f"{key}_gpus"], mode="lines", name=label, stackgroup="cap",
                                 line=dict(width=0.5, color=OPTION_COLORS[key], shape="hv")))
    fig.add_trace(go.Scatter(x=g["timestamp"], y=g["demand_gpus"], mode="lines", name="demand served",
                             line=dict(color="#1f2937", width=1.2)))
    fig.update_layout(title=f"{model}: capacity against demand", height=320, yaxis_title=f"{model} GPUs",
                      margin=dict(l=10, r=10, t=40, b=70),
                      legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0))
    return fig


__all__ = ["figures_table", "mix_table", "series_table", "shown_models", "capacity_figure"]
