"""Forecasts: history with each tier's plan forecast and the combined p50–p95
band (series picker), the members carrying weight per lead bucket, and the
rolling-origin backtest table."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboards import common as c

TIERS = ("hourly", "daily", "weekly")
BANDS = ("1h", "24h", "7d", "all")
BENCHMARKS = ("prophet", "seasonal_naive")

ctx, rep = c.page("Forecasts")
sid = c.series_picker(rep, "fc_series")
s = rep.series[sid]

hist = c.series_frame(*ctx.key, "history", sid)
fc = c.series_frame(*ctx.key, "forecasts", sid)
days = st.slider("History shown (days)", 1, 28, 7, key="fc_days")

fig = go.Figure()
if not hist.empty:
    h = hist[hist["timestamp"] >= hist["timestamp"].max() - pd.Timedelta(days=days)]
    fig.add_trace(go.Scatter(x=h["timestamp"], y=h["value"], mode="lines", name="history",
                             line=dict(color=c.COLORS["history"], width=1)))
comb = fc[fc["tier"] == "combined"] if not fc.empty else fc
if not comb.empty:
    fig.add_trace(go.Scatter(x=comb["timestamp"], y=comb["p50"], mode="lines", line=dict(width=0),
                             showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=comb["timestamp"], y=comb["p95"], mode="lines", line=dict(width=0), fill="tonexty",
                             fillcolor=c.COLORS["band"], name="combined p50–p95"))
    fig.add_trace(go.Scatter(x=comb["timestamp"], y=comb["p50"], mode="lines", name="combined p50",
                             line=dict(color=c.COLORS["combined"], width=2)))
for tier in TIERS:
    t = fc[fc["tier"] == tier] if not fc.empty else fc
    if not t.empty:
        fig.add_trace(go.Scatter(x=t["timestamp"], y=t["p50"], mode="lines", name=f"{tier} p50",
                                 line=dict(color=c.COLORS[tier], width=1.2, dash="dot")))
if not comb.empty:
    issued = comb["issued_at"].iloc[0]
    fig.add_vline(x=issued, line=dict(color="#6b7280", dash="dash", width=1))
    st.caption(f"Forecast issued at {issued:%Y-%m-%d %H:%M} UTC (the last history point the models saw).")
fig.update_layout(height=420, margin=dict(l=10, r=10, t=30, b=80),
                  yaxis_title="GPUs" if s.unit == "gpu" else "replicas",
                  legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0))
st.plotly_chart(fig, key="fc_chart")
if fc.empty:
    st.warning("This run has no plan forecast for this series.")

st.subheader("Which models carry weight")
combo = s.combination
members = combo.get("members") or {}
if members:
    st.caption("Weights of the plan forecast's p50 per lead bucket, from each member's recent pinball loss "
               f"({combo.get('method', 'exponentially weighted losses')}); a member under 5 % in a bucket "
               "is left out of it.")
    names = list(dict.fromkeys(m for ws in members.values() for m in ws))
    st.dataframe(pd.DataFrame([{"lead bucket": b, **{m: "under 5 %" if ws.get(m) is None else
                                                      f"{100 * ws[m]:.1f} %" for m in names}}
                               for b, ws in members.items()]),
                 hide_index=True, width="stretch", key="fc_members")
else:
    st.caption("This run records no combination weights for this series.")

st.subheader("Backtest")
st.caption("Rolling-origin scores over the tuning and evaluation windows (each origin fits only on data "
           "before it). MASE < 1 beats seasonal-naive; coverage_p95 should be close to 0.95.")
rows = []
for model, sc in sorted(s.backtest.items()):
    for band in BANDS:
        b = sc.bands.get(band)
        if b:
            n = b.get("n") or 0
            rows.append({"model": model, "horizon": band, "MASE": b.get("mase"), "sMAPE": b.get("smape"),
                         "pinball": b.get("pinball"), "coverage_p95": b.get("coverage_p95"), "n": n,
                         "note": f"too few points (< {c.MIN_SCORE_POINTS})" if n < c.MIN_SCORE_POINTS else ""})
table = pd.DataFrame(rows)
if table.empty:
    st.warning("No backtest scores in this run.")
else:
    horizon = st.radio("Horizon", ["every", *BANDS], horizontal=True, key="fc_horizon")
    shown = table if horizon == "every" else table[table["horizon"] == horizon]
    st.dataframe(shown, hide_index=True, width="stretch", key="fc_backtest",
                 column_config={"MASE": st.column_config.NumberColumn(format="%.3f"),
                                "sMAPE": st.column_config.NumberColumn(format="%.1f"),
                                "pinball": st.column_config.NumberColumn(format="%.3f"),
                                "coverage_p95": st.column_config.NumberColumn(format="%.3f")})
    missing = [m for m in BENCHMARKS if m not in set(table["model"])]
    if missing:
        st.caption(f"Not scored in this run: {', '.join(missing)}.")
    few = table[table["n"] < c.MIN_SCORE_POINTS]
    if len(few):
        st.warning(f"{len(few)} of {len(table)} scores rest on fewer than {c.MIN_SCORE_POINTS} points "
                   f"(as few as {int(few['n'].min())}); they are marked and say little.")
    best = []
    for band in BANDS[:-1]:  # like with like: models scored on the same lead band, never the mixed "all"
        g = table[(table["horizon"] == band) & (table["n"] >= c.MIN_SCORE_POINTS) & table["MASE"].notna()]
        if len(g) > 1:
            low = g["MASE"].min()
            top = g[g["MASE"] <= low + 1e-12]  # ties named together, by model name
            best.append(f"{band}: **{', '.join(top['model'])}** ({low:.3f} of {len(g)} models, "
                        f"{int(top['n'].iloc[0])} points)")
    if best:
        st.caption("Lowest MASE per lead band (models scored on the same leads): " + " · ".join(best) + ".")
    else:
        st.caption(f"No lowest MASE shown: no lead band has two models scored on {c.MIN_SCORE_POINTS} points "
                   "or more.")
if s.fallbacks:
    with st.expander(f"Fallbacks ({len(s.fallbacks)})"):
        for f in s.fallbacks:
            st.write("- " + f)
