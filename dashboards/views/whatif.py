"""What-if: change one series' policy with sliders and replay it live on the
evaluation window, against the run's recommended policy and the baseline."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from capplan.backtest.whatif import DAILY_RULES
from capplan.backtest.whatif import QUANTILE_CHOICES as QUANTILES
from capplan.backtest.whatif import TOPUP_CHOICES as TOPUPS
from dashboards import common as c

ctx, rep = c.page("What-if")
sid = c.series_picker(rep, "wi_series")
s = rep.series[sid]
wi = c.whatif_model(*ctx.key, sid, c.config_path())
rec = dict(wi.recommended_params)
if not rec:
    st.warning("This run recorded no tuned parameters for this series.")
    st.stop()

chosen = s.recommended_policy
rl = "recommended" if wi.carried else "searched"  # what the sliders start from
k = sid.replace("/", "_")  # widget keys per series: switching series starts from its own policy


def reset() -> None:
    for key in [x for x in st.session_state if str(x).startswith(f"wi_{k}_")]:
        del st.session_state[key]


st.caption(f"{s.kind} · {s.unit} · GPU {s.gpu_model or '?'} · evaluation window "
           f"{s.windows.evaluation[0][:16]} → {s.windows.evaluation[1][:16]} UTC. "
           f"Sliders start at the {rl} policy.")
if chosen != "searched" and wi.carried:
    st.info(f"The run recommends the **{chosen}** policy for this series (it beat the searched policy on the "
            f"tuning window); the exports carry it as the {rec.get('family', 'policy')} policy that expresses it, "
            "so the sliders start at those parameters.")
elif chosen != "searched":
    st.info(f"The run recommends the **{chosen}** policy for this series (it beat the searched policy on the "
            "tuning window); no exported policy expresses that rule, so the sliders start at the searched policy.")
params = dict(rec)
left, right = st.columns([1, 2])
with left:
    if s.kind == "training":
        params["reservation_ratio"] = st.slider("Reservation ratio (× weekly forecast)", 0.0, 3.0,
                                                float(rec["reservation_ratio"]), 0.05, key=f"wi_{k}_ratio")
        params["daily_rule"] = st.selectbox("Daily spot level rule", DAILY_RULES,
                                            index=DAILY_RULES.index(rec.get("daily_rule", "max")), key=f"wi_{k}_rule",
                                            help="max: the day's highest forecast quantile; newsvendor: the level at "
                                                 "the price book's critical ratio; empirical: quantiles of the last "
                                                 "week's hourly maxima (no model)")
        params["quantile"] = st.select_slider("Forecast quantile", QUANTILES, value=rec.get("quantile", "p90"),
                                              key=f"wi_{k}_q")
        params["headroom"] = st.slider("Daily headroom (× daily forecast)", 0.5, 3.0, float(rec.get("headroom", 1.0)),
                                       0.05, key=f"wi_{k}_headroom")
        params["spot_fraction"] = st.slider("Spot fraction of the flexible part", 0.0, 1.0,
                                            float(rec.get("spot_fraction", 0.0)), 0.05, key=f"wi_{k}_spot")
        params["topup_quantile"] = st.select_slider("Hourly on-demand top-up quantile", TOPUPS,
                                                    value=rec.get("topup_quantile", "none"), key=f"wi_{k}_tq")
        params["topup_headroom"] = st.slider("Hourly top-up headroom (× hourly forecast)", 0.5, 3.0,
                                             float(rec.get("topup_headroom", 1.0)), 0.05, key=f"wi_{k}_th")
    else:
        params["target_utilization"] = st.slider("HPA target utilisation", 0.10, 1.0,
                                                 float(rec["target_utilization"]), 0.01, key=f"wi_{k}_target")
        mx = max(int(rec.get("max_replicas", 100)), 10)
        params["min_replicas"] = st.slider("Min replicas", 0, mx, int(rec.get("min_replicas", 1)), 1,
                                           key=f"wi_{k}_min")
        params["max_replicas"] = st.slider("Max replicas", 1, max(2 * mx, 20), int(rec.get("max_replicas", 100)), 1,
                                           key=f"wi_{k}_max")
        params["scale_up_window_s"] = st.slider("Scale-up stabilisation window (s)", 0, 3600,
                                                int(rec.get("scale_up_window_s", 0)), 30, key=f"wi_{k}_upw")
        params["scale_down_window_s"] = st.slider("Scale-down stabilisation window (s)", 0, 3600,
                                                  int(rec.get("scale_down_window_s", 300)), 30, key=f"wi_{k}_downw")
        params["prescale_quantile"] = st.select_slider("Pre-scaling quantile", ["none", *QUANTILES],
                                                       value=rec.get("prescale_quantile", "none"), key=f"wi_{k}_pq")
        params["prescale_lead_s"] = st.slider("Pre-scaling lead (s)", 0, 3600, int(rec.get("prescale_lead_s", 0)), 60,
                                              key=f"wi_{k}_lead")
        if rec.get("family") == "lookahead":  # optimizer.inference.lookahead: level window and error quantile
            params["level_window_s"] = st.slider("Lookahead level window (s)", 0, 3600,
                                                 int(rec.get("level_window_s", 0)), 60, key=f"wi_{k}_lw")
            params["headroom_quantile"] = st.slider("Lookahead quantile of past errors", 0.5, 0.999,
                                                    float(rec.get("headroom_quantile", 0.9)), 0.001, format="%.3f",
                                                    key=f"wi_{k}_hq")  # the search's 0.025 grid stays pickable
        # the spot fraction does not apply to inference replicas (paid on demand in the replay)
    st.button("Reset to recommended", on_click=reset, key=f"wi_{k}_reset")

if s.kind == "inference" and params["min_replicas"] > params["max_replicas"]:
    st.error("Min replicas must not exceed max replicas.")
    st.stop()
try:
    m, traj = wi.simulate(params)
except Exception as exc:  # pydantic validation of out-of-bounds values
    st.error(f"Invalid policy: {exc}")
    st.stop()
recm = wi.recorded["recommended"]
base = wi.recorded["baseline"]
u = c.unit_hours(s.unit)

with right:
    def _d(diff: float, text: str) -> str | None:  # no arrow when the what-if equals the recommendation
        return None if abs(diff) < 1e-9 else text

    cols = st.columns(4)
    dc = m.cost_usd - recm["cost_usd"]
    cols[0].metric("What-if cost", c.usd(m.cost_usd), delta=_d(dc, f"{c.usd_delta(dc)} vs {rl}"),
                   delta_color="inverse")
    dv = m.coverage - recm["coverage"]
    cols[1].metric("What-if coverage", c.pct(m.coverage), delta=_d(dv, f"{100 * dv:+.1f} pp"))
    di = m.idle_ratio - recm["idle_ratio"]
    cols[2].metric("What-if idle ratio", c.pct(m.idle_ratio), delta=_d(di, f"{100 * di:+.1f} pp"),
                   delta_color="inverse")
    du = m.unmet - recm["unmet"]
    cols[3].metric(f"What-if unmet ({u})", f"{m.unmet:,.1f}", delta=_d(du, f"{du:+,.1f}"), delta_color="inverse")
    cmp = pd.DataFrame([
        {"policy": "what-if", "cost (USD)": m.cost_usd, "coverage": m.coverage, "idle ratio": m.idle_ratio,
         f"unmet ({u})": m.unmet, "scale events": m.scale_events},
        {"policy": rl, "cost (USD)": recm["cost_usd"], "coverage": recm["coverage"],
         "idle ratio": recm["idle_ratio"], f"unmet ({u})": recm["unmet"], "scale events": recm["scale_events"]},
        {"policy": "baseline", "cost (USD)": base["cost_usd"], "coverage": base["coverage"],
         "idle ratio": base["idle_ratio"], f"unmet ({u})": base["unmet"], "scale events": base["scale_events"]},
    ])
    st.dataframe(cmp, hide_index=True, width="stretch", key="wi_compare",
                 column_config={"cost (USD)": st.column_config.NumberColumn(format="%.0f"),
                                "coverage": st.column_config.NumberColumn(format="percent"),
                                "idle ratio": st.column_config.NumberColumn(format="percent"),
                                f"unmet ({u})": st.column_config.NumberColumn(format="%.1f")})
    _, rec_traj = wi.simulate(rec)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=traj["timestamp"], y=traj["demand"], mode="lines", name="demand",
                             line=dict(color=c.COLORS["demand"], width=1)))
    fig.add_trace(go.Scatter(x=traj["timestamp"], y=traj["provisioned"], mode="lines", name="what-if",
                             line=dict(color=c.COLORS["whatif"], width=2, shape="hv")))
    fig.add_trace(go.Scatter(x=rec_traj["timestamp"], y=rec_traj["provisioned"], mode="lines",
                             name=rl, line=dict(color=c.COLORS["recommended"], width=1.2, dash="dash",
                                                           shape="hv")))
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=30, b=80),
                      yaxis_title="GPUs" if s.unit == "gpu" else "replicas",
                      legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0))
    st.plotly_chart(fig, key="wi_chart")


@st.cache_data(show_spinner=False)
def _reproduces(run_dir: str, mtime: float, series_id: str) -> bool:
    return c.whatif_model(run_dir, mtime, series_id, c.config_path()).reproduces()


if _reproduces(*ctx.key, sid):
    st.caption(f"✔ Replaying the {rl} policy here reproduces the run's recorded figures.")
else:
    st.warning(f"Replaying the {rl} policy here does not reproduce the run's recorded figures exactly "
               "(different prices or plan settings in this dashboard's config than in the run).")
