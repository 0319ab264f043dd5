"""The ``predictive`` family (optimizer.inference.predictive), the replay of cron windows
(optimizer.inference.cron_replay), the rolling-origin comparison and the predicted-demand export."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from optimizer.book.prices import GpuPrice
from optimizer.engine.replay import INFERENCE_FAMILIES, replay_inference
from optimizer.engine.replay_core import ReplayInput
from optimizer.exporters import export_warnings, render_all
from optimizer.exporters.checks.lint import lint_object
from optimizer.exporters.checks.validate import validate_object
from optimizer.exporters.predictive import predictive_query, promql_label
from optimizer.inference.cron_replay import replay_cron, window_replicas, windows_before
from optimizer.inference.predictive import predicted_metric, predictive_lead_s, predictive_quantile
from optimizer.inference.predictive_eval import candidates, choose, frontier
from optimizer.plan.policy import InferenceParams, Metrics, SeriesPlan

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)
STEP = 300


def _inp(demand, fc=None) -> ReplayInput:
    """5-minute demand; ``fc``: an hourly forecast issued every hour, row ``k`` for the step ``origin + k + 1``
    (as optimizer.engine.inputs lays out the hourly forecasts)."""
    n = len(demand)
    times = pd.date_range("2024-01-01", periods=n, freq="300s", tz="UTC")
    inp = ReplayInput(times=times, demand=np.asarray(demand, float), step_s=STEP, price=PRICE)
    if fc is not None:
        origins = np.arange(0, n, 12)
        arr = np.array([[fc[min(o + k + 1, n - 1)] for k in range(12)] for o in origins], float)
        inp.hourly_fc = {q: arr for q in ("p50", "p90", "p95", "p99")}
        idx = np.arange(n) // 12
        # the origin issued at a step is used from the next decision (issued strictly before it)
        oi = np.where(np.arange(n) % 12 == 0, idx - 1, idx)
        inp.hourly_origin_idx = oi
        inp.hourly_offset = np.where(oi >= 0, np.arange(n) - origins[np.clip(oi, 0, None)], 0)
    return inp


def _p(**kw) -> InferenceParams:
    base = dict(target_utilization=1.0, scale_down_window_s=0, scale_up_percent=1000, period_s=15,
                max_replicas=100, min_replicas=1)
    return InferenceParams(**{**base, **kw})


def test_family_is_registered_and_lead_and_quantile_follow_the_policy():
    assert "predictive" in INFERENCE_FAMILIES
    assert predictive_lead_s(90, 60) == 150
    assert predictive_quantile(_p(prescale_quantile="none")) == "p90"
    assert predictive_quantile(_p(prescale_quantile="p99")) == "p99"


def test_a_good_forecast_covers_a_step_the_reactive_hpa_misses():
    d = [1.0] * 30 + [10.0] * 30
    inp = _inp(d, fc=d)
    reactive, _ = replay_inference(inp, _p(family="hpa"))
    pred, s = replay_inference(inp, _p(family="predictive", prescale_quantile="p50"))
    assert pred.coverage > reactive.coverage
    assert pred.coverage == pytest.approx(1.0)
    assert (s["provisioned"] >= np.asarray(d) - 1e-9).all()


def test_the_prediction_only_adds_replicas_and_sees_no_later_demand():
    rng = np.random.default_rng(0)
    d = rng.uniform(1, 8, 120)
    low = _inp(d, fc=np.zeros(120))  # a forecast of nothing: the live metric alone
    a, sa = replay_inference(low, _p(family="predictive", prescale_quantile="p50"))
    b, sb = replay_inference(_inp(d), _p(family="hpa"))
    np.testing.assert_array_equal(sa["replicas"], sb["replicas"])
    # changing demand after step k changes no decision up to k (the forecast unchanged)
    inp1 = _inp(d, fc=d)
    d2 = d.copy()
    d2[80:] += 50
    inp2 = _inp(d2, fc=d)
    s1 = replay_inference(inp1, _p(family="predictive", prescale_quantile="p50"))[1]
    s2 = replay_inference(inp2, _p(family="predictive", prescale_quantile="p50"))[1]
    np.testing.assert_array_equal(s1["replicas"][:81], s2["replicas"][:81])
    pm = predicted_metric(inp1, _p(prescale_quantile="p50"))
    assert np.isnan(pm[0]) and np.isfinite(pm[12:]).all()


def test_cron_windows_raise_replicas_inside_them_only():
    d = [2.0] * 48
    inp = _inp(d)
    w = [{"start": str(inp.times[10]), "end": str(inp.times[20]), "desired_replicas": 7}]
    np.testing.assert_array_equal(window_replicas(inp.times, w)[[9, 10, 19, 20]], [0, 7, 7, 0])
    m, s = replay_cron(inp, _p(), w, cold_start_s=0)
    assert s["replicas"][10:20].min() == 7 and s["replicas"][25:].max() < 7


def test_cron_windows_come_from_a_forecast_issued_before_the_window():
    t0 = pd.Timestamp("2024-01-08", tz="UTC")
    ts = pd.date_range(t0, periods=7 * 288, freq="5min")
    v = np.where((ts.hour >= 9) & (ts.hour < 11), 20.0, 2.0)

    def origin(issued, scale):
        return pd.DataFrame({"series_id": "s", "tier": "combined", "issued_at": issued, "timestamp": ts,
                             "p50": v * scale, "p90": v * scale, "p95": v * scale, "p99": v * scale})
    comb = pd.concat([origin(t0 - pd.Timedelta("1h"), 1.0), origin(t0 + pd.Timedelta("1h"), 3.0)])
    w = windows_before(comb, t0, _p(prescale_quantile="p90"))
    assert w and max(x["desired_replicas"] for x in w) == 20  # the later (x3) origin is not seen
    assert windows_before(comb, t0, _p(prescale_quantile="none")) == []


def test_choose_takes_the_cheapest_that_reaches_the_target_else_the_best_coverage():
    def m(c, cov):
        return Metrics(cost_usd=c, coverage=cov, idle_ratio=0.1, unmet=0.0)
    a, b, c = _p(target_utilization=0.6), _p(target_utilization=0.7), _p(target_utilization=0.8)
    assert choose([(a, m(10, 0.97)), (b, m(8, 0.96)), (c, m(5, 0.90))], 0.95)[0] is b
    assert choose([(a, m(10, 0.90)), (c, m(5, 0.92))], 0.95)[0] is c


def test_the_front_keeps_exactly_the_undominated_settings_of_a_rule():
    rng = np.random.default_rng(3)
    d = np.round(8 + 4 * np.sin(np.arange(288) * 2 * np.pi / 96) + rng.normal(0, 1, 288)).clip(1)
    inp, base = _inp(d), _p(max_replicas=60)
    front = frontier("lookahead", inp, pd.DataFrame(), base)
    scored = [replay_inference(inp, p)[0] for p in candidates("lookahead", base)]
    assert len(scored) > len(front) >= 2 and all(p.family == "lookahead" for p, _ in front)
    costs, covs = [m.cost_usd for _, m in front], [m.coverage for _, m in front]
    assert costs == sorted(costs) and all(b > a for a, b in zip(covs, covs[1:]))
    for m in scored:  # every setting is matched or beaten by a point of the front
        assert any(f.cost_usd <= m.cost_usd + 1e-9 and f.coverage >= m.coverage - 1e-12 for _, f in front)
    for _, f in front:  # and no setting beats a point of the front
        assert not any(m.cost_usd < f.cost_usd - 1e-9 and m.coverage >= f.coverage for m in scored)


def _plan(family: str, quantile: str = "p95") -> SeriesPlan:
    p = _p(family=family, prescale_quantile=quantile, target_utilization=0.8, max_replicas=40).model_dump()
    m = Metrics(cost_usd=1.0, coverage=1.0, idle_ratio=0.1, unmet=0.0)
    return SeriesPlan(series_id="infer/llm-chat", kind="inference", unit="replica", params=p,
                      plan={"min_replicas": 1, "max_replicas": 40, "target_utilization": 0.8,
                            "prescale": [{"start": "2026-11-30T00:45:00+00:00", "end": "2026-11-30T03:45:00+00:00",
                                          "desired_replicas": 12}], "fallback_replicas": 9},
                      recommended=m, baseline=m)


@pytest.mark.parametrize("how", ["family", "option"])
def test_export_writes_the_predicted_demand_trigger_metric_and_rule(how):
    plan = _plan("predictive" if how == "family" else "hpa")
    settings = {"targets": {"infer/llm-chat": {"gpus_per_replica": 2}}, "predictive_lead_s": 150,
                **({"predictive_metric": True} if how == "option" else {})}
    files = render_all([plan], {**settings, "autoscaler": "keda"})
    so = yaml.safe_load(next(v for k, v in files.items() if k.endswith("-scaledobject.yaml")))
    hpa = yaml.safe_load(next(v for k, v in files.items() if k.endswith("-hpa.yaml")))
    adapter = yaml.safe_load(files["adapter/prometheus-adapter-rules.yaml"])
    for name, obj in (("so", so), ("hpa", hpa)):
        assert validate_object(obj, f"{name}.yaml") == []
        assert list(lint_object(obj, f"{name}.yaml")) == []
    trig = {t["name"]: t for t in so["spec"]["triggers"]}
    pd_ = trig["predicted-demand"]
    assert pd_["metricType"] == "AverageValue" and pd_["metadata"]["threshold"] == "0.8"
    assert pd_["metadata"]["query"] == 'max(capplan_forecast_demand{series="infer-llm-chat-' \
        + pd_["metadata"]["query"].split('series="infer-llm-chat-')[1].split('"')[0] + '",quantile="p95",lead="150"})'
    assert not [t for t in so["spec"]["triggers"] if t["type"] == "cron"]  # replaced by the served forecast
    ext = [m["external"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert ext[-1]["target"]["averageValue"] == "0.8" and ext[-1]["metric"]["name"].startswith("capplan_predicted_")
    rule = adapter["externalRules"][-1]
    assert rule["name"]["as"] == ext[-1]["metric"]["name"] and rule["metricsQuery"] == pd_["metadata"]["query"]
    # the option runs a rule the replay did not score on an hpa-family recommendation: the export says so
    said = [w for w in export_warnings([plan], settings).get("infer/llm-chat", []) if "predictive_metric" in w]
    assert len(said) == (1 if how == "option" else 0)


def test_without_the_option_cron_windows_stay():
    files = render_all([_plan("hpa")], {"autoscaler": "keda"})
    so = yaml.safe_load(next(v for k, v in files.items() if k.endswith("-scaledobject.yaml")))
    assert [t["type"] for t in so["spec"]["triggers"]].count("cron") == 1
    assert "predicted-demand" not in {t["name"] for t in so["spec"]["triggers"]}


def test_label_values_are_escaped():
    assert promql_label('a"b\\c') == 'a\\"b\\\\c'
    assert 'series="x\\"y"' in predictive_query('x"y', _p(), 150)
