"""Fleet: the assumptions the figures rest on (capplan.report.assumptions), the pools above their quota
(held to it and raised), the run's warnings and notes (grouped, with counts), the fleet's purchase mix,
demand against provisioned capacity per series with the pool's quota drawn, unmet demand as its own band,
and a utilisation heatmap of series x hour-of-week (evaluation window); with a GPU fleet (fleet keys), its figures
beside each series alone and pooled, its mix per GPU model and purchase option, and per model its capacity
against demand (:mod:`dashboards.fleet_tables`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from capplan.report.summary import fleet_summary
from dashboards import common as c
from dashboards import fleet_tables as ft
from dashboards import notes as nt

ctx, rep = c.page("Fleet")
series = rep.series
replay = c.frame(*ctx.key, "replay")

raw = c.raw_report(*ctx.key)
summary = rep.summary if rep.summary is not None and rep.summary.assumptions else fleet_summary(raw)
if summary.assumptions:  # before the saving: the headline rests on them (capplan.report.assumptions)
    st.warning("**The figures assume:**\n" + "\n".join(f"- {nt.md_escape(a.text)} (set `{a.setting}`)"
                                                        for a in summary.assumptions))

rec_cost = sum(s.exported().cost_usd for s in series.values())  # what the exported objects allow (quota held)
base_cost = sum(s.baseline.cost_usd for s in series.values())
cols = st.columns(4)
cols[0].metric("Series", len(series))
cols[1].metric("Recommended cost (eval. window)", c.usd(rec_cost))
cols[2].metric("Baseline cost (eval. window)", c.usd(base_cost))
cols[3].metric("Saving vs baseline", c.pct(c.saving(rec_cost, base_cost)))

above = [(sid, s.quota) for sid, s in sorted(series.items()) if s.quota is not None]
if above:
    st.subheader(f"Pools above their quota ({len(above)})")
    st.caption("The plan needs more GPUs than the pool's quota. Held: the plan as the exported Volcano Queue holds "
               "it to the quota (demand above it queues and counts as unmet; the figures above count these). "
               "Raised: what raising the quota to the GPUs asked buys (the most GPUs the plan held at once on the "
               "evaluation window).")
    st.markdown("\n".join(
        f"- **{nt.md_escape(sid)}**: quota {q.quota_gpus:g} GPUs, raise to {q.need_gpus}; coverage "
        f"{c.pct(q.capped.coverage)} held, {c.pct(series[sid].recommended.coverage)} raised; cost "
        f"{nt.md_escape(c.usd(q.capped.cost_usd))} held, {nt.md_escape(c.usd(series[sid].recommended.cost_usd))} "
        "raised" + ("" if q.held else " (the Queue is not held to it: export.capability_limit plan)")
        for sid, q in above))

notes = nt.run_notes(raw)
n = nt.counts(notes)
st.subheader("Warnings and notes")
st.caption(f"{n['warnings']} warning line(s) covering {n['warning_items']} series warning(s), and "
           f"{n['notes']} note line(s) covering {n['note_items']} stated fallback(s); a line shared by several "
           "series names them. Each series' own lines are on its Plan page.")
c.show_notes(notes, len(series))

st.subheader("Purchase mix (recommended plan)")
c.show_mix(nt.fleet_mix(raw), "Reserved, spot and on-demand capacity the recommended plans buy over the "
           "evaluation windows, summed over the fleet (inference replicas are on demand).")

gpu_fleet = raw.get("fleet")  # a run with fleet keys (gpu_models, min_gpu_memory_gb, share): one plan per GPU model
if gpu_fleet:
    st.subheader(f"GPU fleet: {gpu_fleet['name']}")
    lo, hi = gpu_fleet["evaluation_window"]
    st.caption(f"The members planned as one fleet, each placed only on the GPU models it may use, over "
               f"{gpu_fleet['hours']} hours ({lo} to {hi} UTC). Beside it: each series alone on its own model, and "
               "the fleet pooled without substitution. Fleet regret (cost / limit): "
               + ("n/a" if gpu_fleet.get("regret") is None else f"{gpu_fleet['regret']:.2f}")
               + f"; steps on a model outside a series' list or below its memory floor: {gpu_fleet['violations']}.")
    st.dataframe(ft.figures_table(gpu_fleet), hide_index=True, width="stretch", key="gpu_fleet_figures")
    st.markdown("**Mix per GPU model and purchase option** (recommended plan)")
    st.dataframe(ft.mix_table(gpu_fleet), hide_index=True, width="stretch", key="gpu_fleet_mix")
    st.markdown("**Members**")
    st.dataframe(ft.series_table(gpu_fleet), hide_index=True, width="stretch", key="gpu_fleet_series")
    hourly = c.frame(*ctx.key, "fleet")
    if hourly.empty:
        st.info("This run has no fleet.parquet: the capacity per GPU model over time is not recorded.")
    for model in ft.shown_models(hourly):
        st.plotly_chart(ft.capacity_figure(hourly, model), key=f"gpu_fleet_{model}")

rows = []
for sid, s in sorted(series.items()):
    r, b = s.exported(), s.baseline  # a pool above its quota: held to it, as exported
    rows.append({"series": sid, "kind": s.kind, "unit": s.unit,
                 "coverage (rec.)": c.pct(r.coverage), "coverage (base.)": c.pct(b.coverage),
                 "unmet (rec.)": f"{r.unmet:,.1f} {c.unit_hours(s.unit)}",
                 "unmet (base.)": f"{b.unmet:,.1f} {c.unit_hours(s.unit)}",
                 "idle ratio (rec.)": c.pct(r.idle_ratio),
                 "warnings": sum(n.level == "warning" for n in nt.series_notes(notes, sid)),
                 "mix (rec.)": nt.mix_line(nt.mix_of(raw["series"].get(sid, {}).get("recommended")))
                 .replace(" of GPU-hours", "").replace(nt.NO_MIX, "not recorded")})
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="fleet_table")

st.subheader("Demand against provisioned capacity")
st.caption("Evaluation window, which the policy search never saw. The red band is unmet demand "
           "(pending GPUs or missing replicas) under the recommended policy.")
ids = sorted(series)
shown = st.multiselect("Series shown", ids, default=ids[:6], key="fleet_series")
show_base = st.toggle("Show the baseline's capacity", value=True, key="fleet_baseline")


def capacity_figure(g: pd.DataFrame, sid: str, unit: str) -> go.Figure:
    t = g["timestamp"]
    prov = g["provisioned_recommended"].to_numpy()
    dem = g["demand"].to_numpy()
    top = np.where(np.isfinite(dem), np.maximum(dem, prov), prov)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=t, y=prov, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=t, y=top, mode="lines", line=dict(width=0), fill="tonexty",
                             fillcolor=c.COLORS["unmet"], name="unmet demand",
                             customdata=np.maximum(np.nan_to_num(dem) - prov, 0),
                             hovertemplate="unmet %{customdata:.1f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=t, y=dem, mode="lines", name="demand", line=dict(color=c.COLORS["demand"], width=1)))
    fig.add_trace(go.Scatter(x=t, y=prov, mode="lines", name="provisioned (recommended)",
                             line=dict(color=c.COLORS["recommended"], width=1.5, shape="hv")))
    if show_base:
        fig.add_trace(go.Scatter(x=t, y=g["provisioned_baseline"], mode="lines", name="provisioned (baseline)",
                                 line=dict(color=c.COLORS["baseline"], width=1, dash="dot", shape="hv")))
    quota = getattr(series[sid].plan, "quota_gpus", None)
    if quota:  # the pool's quota: what the exported Queue holds it to (capplan.report.model.QuotaFigures)
        fig.add_hline(y=float(quota), line=dict(color=c.COLORS["baseline"], dash="dash", width=1),
                      annotation_text=f"quota {float(quota):g} GPUs", annotation_position="top left")
    fig.update_layout(title=sid, height=340, margin=dict(l=10, r=10, t=40, b=80),
                      yaxis_title="GPUs" if unit == "gpu" else "replicas",
                      legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0))
    return fig


if replay.empty:
    st.warning("This run has no replay.parquet.")
for sid in shown:
    g = c.series_frame(*ctx.key, "replay", sid)
    if g.empty:
        st.warning(f"{sid}: no replay rows.")
        continue
    st.plotly_chart(capacity_figure(g, sid, series[sid].unit), key=f"fleet_cap_{sid}")

st.subheader("Utilisation by hour of week")
st.caption("Mean of demand / provisioned capacity (recommended policy) per UTC hour of week, "
           "evaluation window (hover a cell for its value). Above 100 % means unmet demand. "
           "The colour scale (cividis) runs dark to light and reads the same in grey.")


@st.cache_data(show_spinner=False)
def heatmap_matrix(run_dir: str, mtime: float) -> pd.DataFrame:
    r = c.frame(run_dir, mtime, "replay")
    if r.empty:
        return pd.DataFrame()
    r = r.copy()
    prov = r["provisioned_recommended"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        r["util"] = np.where(prov > 0, r["demand"] / prov, np.nan)
    ts = r["timestamp"].dt.tz_convert("UTC")
    r["how"] = ts.dt.day_of_week * 24 + ts.dt.hour
    m = r.groupby(["series_id", "how"])["util"].mean().unstack("how")
    return m.reindex(columns=range(168))


hm = heatmap_matrix(*ctx.key)
if not hm.empty:
    days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    labels = [f"{days[h // 24]} {h % 24:02d}h" for h in range(168)]
    fig = go.Figure(go.Heatmap(z=hm.to_numpy() * 100, x=labels, y=list(hm.index), colorscale="Cividis",
                               zmin=0, zmax=120, colorbar=dict(title="util %"),
                               hovertemplate="%{y}<br>%{x}<br>%{z:.0f}%<extra></extra>"))
    fig.update_layout(height=140 + 40 * len(hm), margin=dict(l=10, r=10, t=40, b=10),
                      xaxis=dict(tickmode="array", tickvals=labels[::24], ticktext=days))
    st.plotly_chart(fig, key="fleet_heatmap")
