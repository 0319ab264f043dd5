"""`capplan plan` end to end on a slice of the real sample (one run, shared by these tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import E2E_SERIES, REPO


def test_outputs_exist(plan_run):
    out, report, _ = plan_run
    for name in ("policy.yaml", "forecasts.parquet", "report.json", "trials.parquet"):
        assert (out / name).is_file(), name
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["series"].keys() == report["series"].keys()
    # the file is the run's report, down to the files it lists and the export stage's seconds
    assert on_disk["run"]["files"] == report["run"]["files"] and "report.json" in on_disk["run"]["files"]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == on_disk["run"]["files"]
    assert on_disk["run"]["stage_seconds"] == report["run"]["stage_seconds"]
    assert "export" in report["run"]["stage_seconds"]


def test_forecasts_cover_seven_days_without_nan_or_negatives(plan_run):
    out, _, _ = plan_run
    f = pd.read_parquet(out / "forecasts.parquet")
    comb = f[f["tier"] == "combined"]
    assert set(comb["series_id"]) == set(E2E_SERIES)
    for sid, g in comb.groupby("series_id"):
        assert len(g) == 2016, sid  # 7 days of 5-minute steps
        q = g[["p50", "p90", "p95", "p99"]].to_numpy()
        assert np.isfinite(q).all() and (q >= 0).all()
        assert (np.diff(q, axis=1) >= -1e-9).all(), "quantiles cross"
        assert (g["timestamp"] > g["issued_at"]).all()
        assert g["timestamp"].diff().dropna().eq(pd.Timedelta("5min")).all()


def test_manifests_parse_as_the_right_kinds(plan_run):
    out, report, _ = plan_run
    kinds = {}
    # manifests/ holds what `kubectl apply -k` applies; alternatives/hpa/ the HPA variant of each autoscaler
    for p in list((out / "manifests").glob("*.yaml")) + list((out / "alternatives").rglob("*.yaml")):
        for doc in yaml.safe_load_all(p.read_text()):
            if doc:
                kinds.setdefault(doc["kind"], []).append(doc)
    assert "HorizontalPodAutoscaler" in kinds and "ScaledObject" in kinds and "Queue" in kinds
    for hpa in kinds["HorizontalPodAutoscaler"]:
        assert hpa["apiVersion"] == "autoscaling/v2"
        for m in hpa["spec"]["metrics"]:
            assert m["type"] != "Resource" or m["resource"]["name"] in ("cpu", "memory")
    q = kinds["Queue"][0]
    assert q["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    pol = yaml.safe_load((out / "policy.yaml").read_text())
    assert {"apiVersion", "kind", "metadata", "spec"} <= pol.keys()


def test_report_shape_and_same_window_for_baseline_and_recommended(plan_run):
    _, report, _ = plan_run
    run = report["run"]
    assert run["seed"] == 7 and run["source"] == "sample" and "statsmodels" in run["versions"]
    for sid, s in report["series"].items():
        assert s["kind"] in ("training", "inference") and s["unit"] in ("gpu", "replica")
        start, end = (pd.Timestamp(x) for x in s["evaluation_window"])
        assert start < end
        for k in ("baseline", "recommended"):
            for m in ("cost_usd", "coverage", "idle_ratio", "unmet"):
                assert m in s[k], (sid, k, m)
            assert 0.0 <= s[k]["coverage"] <= 1.0 and 0.0 <= s[k]["idle_ratio"] <= 1.0
        assert "params" in s["recommended"]
        # the perfect-foresight limit and every policy's regret against it
        peers = {"reactive", "naive_conformal"} | ({"empirical"} if s["kind"] == "training" else set())
        assert s["oracle"]["cost_usd"] >= 0 and set(s["peers"]) == peers
        for k, m in {"baseline": s["baseline"], "recommended": s["recommended"], **s["peers"]}.items():
            if s["oracle"]["cost_usd"] > 0:
                assert m["regret"] == pytest.approx(m["cost_usd"] / s["oracle"]["cost_usd"]), (sid, k)
                assert m["coverage"] < 1.0 or m["regret"] >= 1.0 - 1e-9, (sid, k)
        for tier in ("hourly", "daily", "weekly", "seasonal_naive"):
            assert tier in s["backtest"], (sid, tier)
    # the replay of both policies ran over exactly the evaluation window
    out = plan_run[0]
    rp = pd.read_parquet(out / "replay.parquet")
    for sid, g in rp.groupby("series_id"):
        w = report["series"][sid]["evaluation_window"]
        assert g["timestamp"].min() == pd.Timestamp(w[0]) and g["timestamp"].max() == pd.Timestamp(w[1])
        assert g["provisioned_baseline"].notna().all() and g["provisioned_recommended"].notna().all()
    # the 1-minute Azure trace is replayed per minute, not as 5-minute maxima
    az = rp[rp["series_id"] == "infer/azure-llm-conv"]
    assert len(az) and (az["timestamp"].diff().dropna() == pd.Timedelta("1min")).all()


def test_models_the_plan_fitted_record_their_backtest_scores(plan_run, fast_config):
    """Every model the plan fitted records, in its registry metadata, its tier's scores on each
    series' evaluation window, the report's figures (docs/method.md, "Data contracts": models)."""
    from forecasting.keys import file_key

    _, report, _ = plan_run
    root = fast_config.parent / "models"
    checked = []
    for tier, log in report["run"]["models"].items():
        for key, version in log.get("versions", {}).items():
            if key == "_global":
                if log["reused"]:
                    continue  # a model an earlier run fitted keeps that run's scores
                sids = log["fitted"]
            elif key in log["fitted"]:
                sids = [key]
            else:
                continue
            meta = json.loads((root / tier / file_key(key) / version / "meta.json").read_text())
            assert sorted(meta["scores"]) == sorted(sids), (tier, key)
            for sid in sids:
                want = report["series"][sid]["backtest"][tier]["bands"]
                got = meta["scores"][sid]
                assert sorted(got) == sorted(want), (tier, sid)
                for band in want:
                    for fig in ("mase", "pinball", "coverage_p95", "n"):
                        assert got[band][fig] == pytest.approx(want[band][fig], nan_ok=True), (tier, sid, band, fig)
            checked.append(tier)
    assert "hourly" in checked and len(checked) >= 3, checked  # the hourly tier refits every run


def test_short_series_fallbacks_are_stated(plan_run):
    _, report, stderr = plan_run
    fb = report["series"]["infer/azure-llm-conv"]["fallbacks"]
    text = " ".join(fb)
    assert "hourly:" in text and "daily:" in text and "weekly:" in text and "thirds" in text
    assert not any(f.startswith(("hourly:", "backtest: hourly")) for f in report["series"]["train/vc6YE"]["fallbacks"])


def test_failed_run_keeps_previous_output(tmp_path, fast_config, monkeypatch):
    """A run that dies at export leaves the previous good output folder untouched."""
    from capplan.config.settings import load_config
    from capplan.run import pipeline

    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"good": true}')
    cfg = load_config(fast_config)
    cfg.plan.n_calls = 4

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr("capplan.run.stages.export.write_all", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        pipeline.run_plan("sample", cfg, out, series=["infer/azure-llm-conv"], seed=0)
    assert json.loads((out / "report.json").read_text()) == {"good": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left behind


def test_plan_runs_from_an_installed_wheel(tmp_path):
    """Build the wheel, run capplan from it outside the repository: the sample ships as package data."""
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist),
                        str(REPO)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:  # hatchling may be absent from the venv: build isolated
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(REPO)],
                           capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    whl = next(dist.glob("capplan-*.whl"))
    site = tmp_path / "site"
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        assert "capplan/_sample/history.parquet" in names and "capplan/_sample/NOTICE" in names
        z.extractall(site)
    work = tmp_path / "elsewhere"
    work.mkdir()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import capplan; "
            "assert capplan.__file__.startswith(sys.argv[1]), capplan.__file__; "
            "from capplan.cli.app import main; main(sys.argv[2:])")
    r = subprocess.run([sys.executable, "-c", code, str(site), "plan", "--series", "infer/azure-llm-conv",
                        "--n-calls", "4", "--format", "json", "-q"], capture_output=True, text=True, cwd=work,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    assert list(rep["series"]) == ["infer/azure-llm-conv"]
    assert (work / "capplan-out" / "report.json").is_file()
