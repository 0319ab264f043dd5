"""Plan: recommended against baseline per series, every policy's regret against
the perfect-foresight limit; then per series its warnings and notes, its purchase mix,
the recommended policy's parameters beside its own figures (a peer or the baseline
when one beat the searched policy, which is then shown apart), the optimiser's
convergence curve and the trial scatter of cost against coverage (trial log)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from capplan.report.peer_params import policy_parameters
from dashboards import common as c
from dashboards import notes as nt

ctx, rep = c.page("Plan")
series = rep.series
target = rep.run.coverage_target

st.subheader("Recommended against baseline")
st.caption("Evaluation window, never seen by the search. Saving = 1 − recommended cost / baseline cost.")
rows = []
for sid, s in sorted(series.items()):
    r, b = s.exported(), s.baseline  # a pool above its quota: held to it, as the exported Queue holds it
    u = c.unit_hours(s.unit)
    rows.append({"series": sid, "kind": s.kind,
                 "cost rec. (USD)": round(r.cost_usd), "cost base. (USD)": round(b.cost_usd),
                 "saving": c.pct(c.saving(r.cost_usd, b.cost_usd)),
                 "coverage rec.": c.pct(r.coverage), "coverage base.": c.pct(b.coverage),
                 "idle rec.": c.pct(r.idle_ratio), "idle base.": c.pct(b.idle_ratio),
                 "unmet rec.": f"{r.unmet:,.1f} {u}", "unmet base.": f"{b.unmet:,.1f} {u}"})
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="plan_table",
             column_config={"cost rec. (USD)": st.column_config.NumberColumn(format="localized"),
                            "cost base. (USD)": st.column_config.NumberColumn(format="localized")})

st.subheader("Against perfect foresight")
st.caption("Regret = policy cost / the cheapest capacity that meets demand in every interval of the evaluation "
           "window with the demand known in advance (same prices, layers and cadences; "
           "optimizer.rivals.perfect_foresight).")
reg = []
for sid_, s_ in sorted(series.items()):
    pols = {"recommended": s_.recommended, "baseline": s_.baseline, **s_.peers}
    for name, m in pols.items():
        reg.append({"series": sid_, "policy": name + (f" ({s_.recommendation})" if name == "recommended" else ""),
                    "regret": m.regret, "cost (USD)": round(m.cost_usd),
                    "coverage": c.pct(m.coverage), "idle ratio": c.pct(m.idle_ratio),
                    "oracle (USD)": round(s_.oracle.cost_usd) if s_.oracle else None})
if reg:
    st.dataframe(pd.DataFrame(reg), hide_index=True, width="stretch", key="plan_regret",
                 column_config={"regret": st.column_config.NumberColumn(format="%.2f"),
                                "cost (USD)": st.column_config.NumberColumn(format="localized"),
                                "oracle (USD)": st.column_config.NumberColumn(format="localized")})

sid = c.series_picker(rep, "plan_series")
s = series[sid]
raw = c.raw_report(*ctx.key)
raw_s = raw["series"].get(sid, {})
r, b = s.exported(), s.baseline  # the figures of what the exports allow (held to a binding quota)
params = s.recommended.params  # what the exports carry
shown = s.recommendation  # the one word: rule, searched or the peer the exports express
chosen = s.recommended_policy  # "searched" for the rule or the searched policy
st.markdown(f"#### {nt.md_escape(sid)}: recommended policy **{nt.md_escape(shown)}**"
            + ("" if chosen == "searched" else " (it beat the searched policy, shown apart below)"))

sn = nt.series_notes(nt.run_notes(raw), sid)
c.show_notes(sn, len(series), per_series=True)

cols = st.columns(4)
cols[0].metric("Cost", c.usd(r.cost_usd), delta=f"{c.usd_delta(r.cost_usd - b.cost_usd)} vs baseline",
               delta_color="inverse")
cols[1].metric("Coverage", c.pct(r.coverage), delta=f"{100 * (r.coverage - b.coverage):+.1f} pp")
cols[2].metric("Idle ratio", c.pct(r.idle_ratio), delta=f"{100 * (r.idle_ratio - b.idle_ratio):+.1f} pp",
               delta_color="inverse")
cols[3].metric(f"Unmet ({c.unit_hours(s.unit)})", f"{r.unmet:,.1f}", delta=f"{r.unmet - b.unmet:+,.1f}",
               delta_color="inverse")
st.caption(f"Figures of the recommendation ({shown}) on the evaluation window: the replay of the exported "
           "objects.")
if s.quota is not None and s.quota.held:
    st.info(f"Held to the pool's quota of {s.quota.quota_gpus:g} GPUs (the exported Volcano Queue's capability). "
            f"Raising the quota to {s.quota.need_gpus} GPUs would buy coverage {c.pct(s.recommended.coverage)} "
            f"for {nt.md_escape(c.usd(s.recommended.cost_usd))} (the 'quota raised' figures).")


def figures(m) -> pd.DataFrame:
    return pd.DataFrame([{"cost (USD)": c.usd(m.cost_usd), "coverage": c.pct(m.coverage),
                          "idle ratio": c.pct(m.idle_ratio), "unmet": f"{m.unmet:,.1f} {c.unit_hours(s.unit)}",
                          "regret": "n/a" if m.regret is None else f"{m.regret:.2f}"}])


left, right = st.columns(2)
with left:
    if shown == "rule":
        st.markdown("**Recommended: the calibrated rule** (optimizer.rivals.incumbent: the day on spot at the "
                    "calibrated level, the adaptive a95 top-up, no headroom; the searched policy did not beat it "
                    "on the tuning window by more than the days' noise). Its parameters and figures:")
        st.json(params, expanded=True)
    elif chosen == "searched":
        st.markdown("**Recommended: the searched policy** (tuned parameters and their figures)")
        st.json(params, expanded=True)
    else:
        baseline_plan = s.plan.baseline.model_dump() if chosen == "baseline" else None
        st.markdown(f"**Recommended: {nt.md_escape(chosen)}** as exported (optimizer.rivals.expressed): the "
                    "parameters the exports carry and their figures; the peer's own replay is its row above")
        st.json(params, expanded=True)
        st.markdown(f"The {nt.md_escape(chosen)} rule the exports express:")
        st.json(policy_parameters(chosen, raw_s.get("peers", {}).get(chosen), baseline_plan), expanded=True)
    st.table(figures(r).set_index("cost (USD)"))
    st.markdown("**Purchase mix** (recommended)")
    c.show_mix(nt.mix_of(r.model_dump() if r is not s.recommended else raw_s.get("recommended")),
               "GPU-hours and USD per purchase on the evaluation window.")
with right:
    if chosen != "searched":
        st.markdown("**Searched policy (not recommended)**: its figures on the evaluation window; the exports "
                    "carry the recommendation's parameters (left)")
        if s.searched is not None:
            st.table(figures(s.searched).set_index("cost (USD)"))
    st.markdown("**Capacity plan**")
    st.json(s.plan.model_dump(), expanded=False)

trials = c.series_frame(*ctx.key, "trials", sid)
st.subheader("Optimiser")
if trials.empty:
    st.warning("No trials logged for this series.")
else:
    st.caption("Trials replay the tuning window; the chosen policy is then scored on the later evaluation window.")
    conv = go.Figure()
    for method, g in trials.sort_values("trial").groupby("method"):
        conv.add_trace(go.Scatter(x=g["trial"], y=g["objective"], mode="markers", name=f"{method} trial",
                                  marker=dict(size=6, opacity=0.5,
                                              color=c.COLORS["recommended"] if method == "gp" else "#9ca3af")))
        conv.add_trace(go.Scatter(x=g["trial"], y=np.minimum.accumulate(g["objective"].to_numpy()), mode="lines",
                                  name=f"{method} best so far", line=dict(
                                      color=c.COLORS["recommended"] if method == "gp" else "#6b7280", shape="hv")))
    bo = s.tuning.get("baseline_objective")
    if bo is not None:
        conv.add_hline(y=bo, line=dict(color=c.COLORS["baseline"], dash="dash"), annotation_text="baseline")
    conv.update_layout(height=380, xaxis_title="trial", yaxis_title="objective",
                       margin=dict(l=10, r=10, t=30, b=10),
                       legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
    scat = go.Figure()
    for method, g in trials.groupby("method"):
        scat.add_trace(go.Scatter(x=g["coverage"], y=g["cost_usd"], mode="markers", name=method,
                                  text=[f"trial {t}" for t in g["trial"]],
                                  marker=dict(size=8, opacity=0.7,
                                              color=c.COLORS["recommended"] if method == "gp" else "#9ca3af")))
    if target:
        scat.add_vline(x=target, line=dict(color="#dc2626", dash="dash"), annotation_text=f"target {target:g}")
    scat.update_layout(height=380, xaxis_title="coverage", yaxis_title="cost (USD)",
                       margin=dict(l=10, r=10, t=30, b=10),
                       legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
    a, b2 = st.columns(2)
    a.markdown("**Convergence** (objective, lower is better)")
    a.plotly_chart(conv, key="plan_convergence")
    b2.markdown("**Trials: cost against coverage** (tuning window)")
    b2.plotly_chart(scat, key="plan_scatter")
    with st.expander("Trial log"):
        show = trials.drop(columns=["series_id"]).copy()
        show["params"] = show["params"].map(lambda p: json.dumps(json.loads(p), separators=(",", ":")))
        st.dataframe(show, hide_index=True, width="stretch", key="plan_trials")
