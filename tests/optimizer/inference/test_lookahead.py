"""The ``lookahead`` inference family (optimizer.inference.lookahead): causal, reactive to a step only after the
lag and cold start, learning its headroom from past errors, searched, and exported for a cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from optimizer.book.prices import GpuPrice
from optimizer.engine.replay import INFERENCE_FAMILIES, replay_inference
from optimizer.engine.replay_core import ReplayInput
from optimizer.exporters import render_all
from optimizer.exporters.checks.lint import lint_object
from optimizer.exporters.checks.validate import validate_object
from optimizer.inference.lookahead import lead_steps, lookahead_target, promql
from optimizer.plan.policy import InferenceParams, Metrics, SeriesPlan
from optimizer.rivals.perfect_foresight import inference_oracle
from optimizer.search.policy_search import grid_scan
from optimizer.search.space import inference_space

PRICE = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)


def inp(demand, step_s=300, before=None):
    times = pd.date_range("2024-01-01", periods=len(demand), freq=f"{step_s}s", tz="UTC")
    return ReplayInput(times=times, demand=np.asarray(demand, float), step_s=step_s, price=PRICE,
                       history_before=None if before is None else np.asarray(before, float))


def params(**kw) -> InferenceParams:
    base = dict(target_utilization=0.95, family="lookahead", level_window_s=0, headroom_quantile=0.9,
                scale_down_window_s=0, scale_up_percent=1000, period_s=15, max_replicas=500)
    return InferenceParams(**{**base, **kw})


def test_family_is_registered_and_dispatched():
    assert set(INFERENCE_FAMILIES) >= {"lookahead"}
    i = inp(np.full(50, 4.0), before=np.full(50, 4.0))
    m, s = replay_inference(i, params())
    assert m.coverage == 1.0 and (s["replicas"] == 5).all()  # 4 / 0.95 -> 5 from the utilisation floor


def test_step_up_is_missed_for_the_lag_and_cold_start_then_covered():
    step_s, lag, cold = 60, 60, 90
    d = np.r_[np.full(120, 2.0), np.full(60, 20.0)]
    i = inp(d, step_s=step_s, before=np.full(600, 2.0))
    m, s = replay_inference(i, params(), cold, metrics_lag_s=lag)
    missed = np.flatnonzero(s["provisioned"][120:] < 20.0)
    # no look-ahead: an unforeseen step is missed from its first minute for at least lag + cold start
    assert missed[0] == 0 and len(missed) * step_s >= lag + cold and m.unmet > 0
    # ... and covered once the observation and the new replicas arrive (H steps)
    assert missed[-1] < lead_steps(step_s, cold, lag)


def test_headroom_learnt_from_recurring_steps_covers_the_next_one():
    step_s = 300
    day = np.r_[np.full(200, 3.0), np.full(88, 12.0)]  # the same step up every day
    hist = np.tile(day, 14)
    i = inp(day, step_s=step_s, before=hist)
    lo = replay_inference(i, params(headroom_quantile=0.5))[1]
    hi = replay_inference(i, params(headroom_quantile=0.999, scale_down_window_s=0))[1]
    assert (lo["provisioned"][200:203] < 12).any()  # the median error is 0: the step is missed
    assert (hi["provisioned"] >= day).all()  # the top quantile of past errors holds the step's size


def test_decisions_never_depend_on_later_demand():
    rng = np.random.default_rng(3)
    d = rng.gamma(2.0, 5.0, 600).round()
    before = rng.gamma(2.0, 5.0, 300).round()
    k = 350
    d2 = d.copy()
    d2[k:] = rng.gamma(2.0, 20.0, len(d) - k).round()
    for lag in (0, 60):
        p = params(level_window_s=900, headroom_quantile=0.8)
        a = replay_inference(inp(d, before=before), p, 90, metrics_lag_s=lag)[1]["replicas"]
        b = replay_inference(inp(d2, before=before), p, 90, metrics_lag_s=lag)[1]["replicas"]
        seen = k + 1 + int(np.ceil(lag / 300))  # the first decision that can observe step k
        assert (a[:seen] == b[:seen]).all()
        assert (a[seen:] != b[seen:]).any()
        t1 = lookahead_target(inp(d, before=before), p, 90, lag)
        t2 = lookahead_target(inp(d2, before=before), p, 90, lag)
        assert np.array_equal(t1[:seen], t2[:seen])


@pytest.mark.parametrize("shape", ["step", "spike", "zeros", "noise"])
def test_never_cheaper_than_the_limit_when_it_covers_every_step(shape):
    rng = np.random.default_rng(4)
    d = {"step": np.r_[np.full(300, 3.0), np.full(300, 30.0)],
         "spike": np.r_[np.full(300, 5.0), [60.0], np.full(299, 5.0)],
         "zeros": np.zeros(600), "noise": rng.gamma(2.0, 6.0, 600).round()}[shape]
    for step_s in (60, 300):
        i = inp(d, step_s=step_s, before=d[:200])
        limit = inference_oracle(i, 90).cost_usd
        for q in (0.5, 0.8, 0.95, 0.999):
            for lw in (0, 900):
                m = replay_inference(i, params(headroom_quantile=q, level_window_s=lw), 90, metrics_lag_s=60)[0]
                if m.coverage == 1.0:
                    assert m.cost_usd >= limit - 1e-6, (shape, step_s, q, lw, m, limit)


def test_search_scans_both_families_and_can_pick_lookahead():
    sp = inference_space(10.0, step_s=300, lead_s=900, cover_s=600)
    fams = [sp.to_params(x).family for x in sp.grid_points()]
    assert fams.count("lookahead") == 3 * 11 * 3 and "hpa" in fams
    assert all((sp.to_params(x).lookahead_lead_s, sp.to_params(x).lookahead_cover_s) == (900, 600)
               for x in sp.grid_points())
    rng = np.random.default_rng(5)
    t = np.arange(2016)
    d = np.round(10 + 6 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 1, len(t))).clip(0)
    i = inp(d, before=d)  # no forecasts: the HPA family can only react
    res, _ = grid_scan(lambda p: replay_inference(i, p)[0], sp, 0.96, float(d.mean()) * 2016 / 12, 0.5)
    assert res.best_params.family == "lookahead" and res.best_metrics.coverage >= 0.96


def _plan(**kw) -> SeriesPlan:
    p = params(level_window_s=1800, headroom_quantile=0.85, data_step_s=300, lookahead_lead_s=900,
               lookahead_cover_s=600, min_replicas=1, max_replicas=40).model_dump()
    m = Metrics(cost_usd=1.0, coverage=1.0, idle_ratio=0.1, unmet=0.0)
    return SeriesPlan(series_id="infer/llm-chat", kind="inference", unit="replica", params=p,
                      plan={"min_replicas": 1, "max_replicas": 40, "target_utilization": 0.95,
                            "prescale": [{"start": "2026-11-30T00:45:00+00:00", "end": "2026-11-30T03:45:00+00:00",
                                          "desired_replicas": 12}], "fallback_replicas": 9},
                      recommended=m, baseline=m, **kw)


@pytest.mark.parametrize("autoscaler", ["keda", "hpa"])
def test_exported_manifests_carry_the_lookahead_query_and_validate(autoscaler):
    files = render_all([_plan()], {"autoscaler": autoscaler, "targets": {"infer/llm-chat": {"gpus_per_replica": 2}}})
    so = yaml.safe_load(next(v for k, v in files.items() if k.endswith("-scaledobject.yaml")))
    hpa = yaml.safe_load(next(v for k, v in files.items() if k.endswith("-hpa.yaml")))
    adapter = yaml.safe_load(files["adapter/prometheus-adapter-rules.yaml"])
    for name, obj in (("so", so), ("hpa", hpa)):
        assert validate_object(obj, f"{name}.yaml") == []
        assert [p for p in lint_object(obj, f"{name}.yaml")] == []
    trig = {t["name"]: t for t in so["spec"]["triggers"]}
    la = trig["lookahead"]
    assert la["metricType"] == "AverageValue" and la["metadata"]["threshold"] == "200"  # 100 % x 2 GPUs
    q = la["metadata"]["query"]
    # each 5-minute step's peak at the 1-minute scrape resolution first (optimizer.inference.lookahead.promql)
    assert q.startswith("sum(avg_over_time((max_over_time((sum(DCGM_FI_DEV_GPU_UTIL") and "[299s:60s]" in q
    assert "quantile_over_time(0.85," in q
    assert "[1799s:300s]" in q and "max_over_time((sum(" in q and "[599s:300s])" in q and "offset 900s" in q
    assert "[604799s:300s]" in q  # whole steps less 1 s (optimizer.inference.lookahead._range)
    assert not any(t["type"] == "cron" for t in so["spec"]["triggers"])  # the family uses no forecast peaks
    ext = [m["external"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert [e["target"]["averageValue"] for e in ext] == ["190", "200"]  # 0.95 x 100 x 2, then 100 x 2
    names = [r["name"]["as"] for r in adapter["externalRules"]]
    assert names[1] == ext[1]["metric"]["name"] and adapter["externalRules"][1]["metricsQuery"].startswith("sum(")


def test_promql_durations_follow_the_policy():
    p = params(level_window_s=60, headroom_quantile=0.9, data_step_s=60, lookahead_lead_s=240, lookahead_cover_s=180)
    q = promql("sum(x)", p)
    assert q == ("sum(avg_over_time((sum(x))[59s:60s]) + quantile_over_time(0.9, (max_over_time((sum(x))[179s:60s])"
                 " - avg_over_time((sum(x))[59s:60s] offset 240s))[604799s:60s]))")


def test_target_is_level_plus_quantile_of_the_peak_over_the_steps_still_to_decide():
    # 5-minute steps, lag 60 s, cold start 90 s: g = 2, d = 1, so errors are max(v[s+2], v[s+3]) - v[s]
    before = np.array([0.0, 0.0, 9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0])
    i = inp(np.zeros(4), before=before)
    t = lookahead_target(i, params(headroom_quantile=0.999), 90, 60)
    # errors known by the first decision (j = 9 - 2 + 1 = 8): s = 0..5; the 9 at s+2 = 2 gives e_0 = 9;
    # an observation one step after s (already decided) never counts: e_1 = max(v[3], v[4]) - v[1] = 0
    v = np.r_[before, np.zeros(4)]
    errs = [max(v[s + 2], v[s + 3]) - v[s] for s in range(0, 6)]
    assert errs == [9.0, 0.0, -9.0, 0.0, 0.0, 0.0]
    assert t[0] == pytest.approx(v[8] + np.quantile(errs, 0.999))
    assert lead_steps(300, 90, 60) == 3 and lead_steps(60, 90, 60) == 4


def test_a_tuning_window_shorter_than_a_day_searches_the_hpa_family_only():
    from optimizer.search.settings import SearchSettings
    from optimizer.search.tuning import PolicyReplay

    pr = PolicyReplay("inference", SearchSettings())
    short = inp(np.full(16, 8.0), step_s=60, before=np.full(20, 8.0))
    long = inp(np.full(600, 8.0), step_s=300, before=np.full(20, 8.0))
    fam = lambda sp: {sp.to_params(x).family for x in sp.grid_points()}  # noqa: E731
    assert fam(pr.space(short)) == {"hpa"} and all(a["family"] == "hpa" for a in
                                                   [pr.space(short).to_params(x).model_dump()
                                                    for x in pr.space(short).anchor_points()])
    sp = pr.space(long)
    assert fam(sp) == {"hpa", "lookahead"}
    p = sp.to_params(sp.grid_points()[-1])
    assert (p.data_step_s, p.lookahead_lead_s, p.lookahead_cover_s) == (300, 900, 600)


def test_a_short_window_says_when_it_overrides_the_configured_family():
    """``inference_bounds: {family: [lookahead]}`` became HPA with only the generic note."""
    from optimizer.search.settings import SearchSettings
    from optimizer.search.tuning import SearchTask, tune_policy

    def notes(family):
        st = SearchSettings(n_calls=4, random_search=False, inference_bounds={"family": family})
        task = SearchTask("s", "inference", inp(np.full(16, 8.0), step_s=60, before=np.full(20, 8.0)),
                          inp(np.full(16, 8.0), step_s=60), st, 0, [])
        return [n for n in tune_policy(task).notes if "shorter than a day, too short to learn" in n]

    assert len(notes(["lookahead"])) == 1 and "overriding the configured inference_bounds.family ['lookahead']" in \
        notes(["lookahead"])[0]
    assert len(notes(["hpa", "lookahead"])) == 1 and "overriding" not in notes(["hpa", "lookahead"])[0]


def _written(tmp_path, edit) -> Path:
    """A rendered output folder whose policy.yaml went through ``edit(text) -> text``."""
    files = render_all([_plan()], {"targets": {"infer/llm-chat": {"gpus_per_replica": 2}}})
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(edit(text) if rel == "policy.yaml" else text)
    return tmp_path


@pytest.mark.parametrize("edit,field", [(lambda t: t.replace("family: lookahead", "family: lookahaed"),
                                         "params.family"),
                                        (lambda t: t.replace("headroomQuantile: 0.85", "headroomQuantile: 1.5"),
                                         "params.headroomQuantile"),
                                        # --validate and --diff let these through
                                        (lambda t: t.replace("minReplicas: 1", "minReplicas: 50"),
                                         "params.minReplicas"),
                                        (lambda t: t.replace("maxReplicas: 40", "maxReplicas: 60", 1),
                                         "scaling.maxReplicas")])
def test_a_hand_edited_policy_param_is_a_validate_problem_and_a_one_line_export_error(tmp_path, capsys, edit, field):
    from tests.conftest import run_cli

    out = _written(tmp_path / "o", edit)
    code, stdout, err = run_cli(["export", "--validate", str(out)], capsys)
    assert code == 2 and f"policy.yaml: spec.series[0].{field}: [policy-params]" in stdout
    for args in (["--out", str(out)], ["--diff", "--out", str(out)]):
        code, stdout, err = run_cli(["export", *args], capsys)
        assert code == 2 and f"spec.series[0] (infer/llm-chat): {field}:" in err  # camelCase, as written
        assert "pydantic" not in err and "lookahaed" not in err and "1.5" not in err and "60" not in err


def test_duplicate_trigger_names_and_a_zero_threshold_are_lint_problems():
    files = render_all([_plan()], {"targets": {"infer/llm-chat": {"gpus_per_replica": 2}}})
    so = yaml.safe_load(next(v for k, v in files.items() if k.endswith("-scaledobject.yaml")))
    assert lint_object("so.yaml", so) == []
    so["spec"]["triggers"][1]["name"] = so["spec"]["triggers"][0]["name"]
    so["spec"]["triggers"][1]["metadata"]["threshold"] = "0"
    rules = {p.rule for p in lint_object("so.yaml", so)}
    assert {"keda-trigger-names", "keda-threshold"} <= rules


def test_a_lookahead_series_writes_no_prescale_windows_and_its_own_hpa_comment():
    files = render_all([_plan()], {"autoscaler": "hpa", "targets": {"infer/llm-chat": {"gpus_per_replica": 2}}})
    entry = yaml.safe_load(files["policy.yaml"])["spec"]["series"][0]
    assert "prescale" not in entry["scaling"] and entry["params"]["family"] == "lookahead"
    hpa_text = next(v for k, v in files.items() if k.endswith("-hpa.yaml"))
    lines = [ln for ln in hpa_text.splitlines() if "averageValue" in ln]
    assert "tuned target" in lines[0] and "lookahead family" in lines[1] and "tuned target" not in lines[1]
    hpa_plan = _plan()
    hpa_plan = hpa_plan.model_copy(update={"params": {**hpa_plan.params, "family": "hpa"}})
    entry = yaml.safe_load(render_all([hpa_plan], {})["policy.yaml"])["spec"]["series"][0]
    assert entry["scaling"]["prescale"]["windows"][0]["desiredReplicas"] == 12  # the HPA family keeps its windows
