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
               f"({combo.get('method', 'exponentially weighted losses')}); members under 5 % are left out.")
    st.dataframe(pd.DataFrame([{"lead bucket": b, **{m: w for m, w in ws.items()}} for b, ws in members.items()]),
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
    every = table[table["horizon"] == "all"]
    best = every[every["n"] >= c.MIN_SCORE_POINTS].sort_values("MASE").head(1)
    if len(best):
        st.caption(f"Lowest MASE over all horizons: **{best['model'].iloc[0]}** ({best['MASE'].iloc[0]:.3f}, "
                   f"{int(best['n'].iloc[0])} points).")
    elif len(every):
        st.caption(f"No lowest MASE shown: every model is scored on fewer than {c.MIN_SCORE_POINTS} points.")
if s.fallbacks:
    with st.expander(f"Fallbacks ({len(s.fallbacks)})"):
        for f in s.fallbacks:
            st.write("- " + f)
