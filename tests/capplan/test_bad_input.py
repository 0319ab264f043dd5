"""Input files and series ids: every bad input exits 2 with one line naming the
file, row and column, or takes a documented fallback that the report records."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from capplan.errors import InputError
from capplan.sources import load_source
from capplan.sources.implausible import mask_implausible, spike_warnings
from capplan.store.local import Store
from forecasting.keys import file_key
from forecasting.registry import ModelRegistry
from forecasting.types import SeriesMeta
from tests.conftest import FAST_CONFIG, run_cli

T = pd.date_range("2024-05-01", periods=3 * 288, freq="5min", tz="UTC")


def demand(n: int = len(T)) -> np.ndarray:
    rng = np.random.default_rng(3)
    hour = np.arange(n) / 12.0
    return np.round(6 + 3 * np.sin(2 * np.pi * hour / 24) + rng.uniform(0, 1, n), 1)


def write_csv(path, ts=None, values=None, sid="a"):
    ts = [t.isoformat() for t in T] if ts is None else ts
    values = [repr(float(v)) for v in demand()] if values is None else values
    pd.DataFrame({"timestamp": ts, "series_id": sid, "value": values}).to_csv(path, index=False)
    return path


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


# -- 1, 2: implausible values, one policy -------------------------------------------------
@pytest.mark.parametrize("bad", ["inf", "-inf", "1e308", "3e7"])
def test_implausible_values_become_missing_with_a_note(tmp_path, bad):
    vals = [repr(float(v)) for v in demand()]
    vals[5] = bad
    h = load_source(f"csv:{write_csv(tmp_path / 'd.csv', values=vals)}")
    assert np.isnan(h.frame["value"].iloc[5]) and h.frame["value"].notna().sum() == len(T) - 1
    note = [n for n in h.notes if "implausible" in n]
    assert len(note) == 1 and note[0].startswith("a: 1 implausible") and "row 7" in note[0]


def test_uniformly_huge_values_are_implausible_too(tmp_path):
    h = load_source(f"csv:{write_csv(tmp_path / 'd.csv', values=['1e300'] * len(T))}")
    assert h.frame["value"].isna().all()
    assert any(n.startswith(f"a: {len(T)} implausible") for n in h.notes)


def test_plausible_peaks_are_kept():
    x = np.r_[np.zeros(500), [4000.0], np.full(10, 2.0)]  # a sparse pool: median 0, one big burst
    f = pd.DataFrame({"series_id": "a", "timestamp": pd.date_range("2024-01-01", periods=len(x), freq="5min",
                                                                     tz="UTC"), "value": x})
    out, notes = mask_implausible(f)
    assert notes == [] and out["value"].max() == 4000.0


def test_a_suspect_spike_is_kept_with_a_warning_naming_its_row(tmp_path):
    """one 900,000 in a pool of about 14 GPUs passed the
    implausible-value rule and the plan bought a million GPUs without a word."""
    vals = [repr(float(v) + 8) for v in demand()]
    vals[5] = "900000"
    h = load_source(f"csv:{write_csv(tmp_path / 'd.csv', values=vals)}")
    assert h.frame["value"].iloc[5] == 900000.0 and not any("implausible" in n for n in h.notes)
    w = h.warnings["a"]
    assert w.startswith("data: 1 value(s) above") and "900000" in w and "d.csv row 7" in w, w
    ok = load_source(f"csv:{write_csv(tmp_path / 'ok.csv', values=[repr(float(v) * 8) for v in demand()])}")
    assert ok.warnings == {}


def test_spike_warnings_judge_the_busy_level_not_the_idle_steps():
    def frame(busy, burst):  # a sparse pool: mostly idle, small jobs, one burst
        x = np.r_[np.zeros(5000), np.full(50, busy), [burst]]
        return pd.DataFrame({"series_id": "a", "value": x,
                             "timestamp": pd.date_range("2024-01-01", periods=len(x), freq="5min", tz="UTC")})

    assert list(spike_warnings(frame(0.5, 1500.0))) == ["a"]  # beyond the 1,000 floor
    assert spike_warnings(frame(0.5, 999.0)) == {}
    assert spike_warnings(frame(2.0, 1500.0)) == {}  # within 1,000 x the busy level of 2 GPUs
    assert list(spike_warnings(frame(2.0, 2500.0))) == ["a"]
    assert spike_warnings(frame(2.0, -2500.0)) == {}  # clipped to 0 later (a fallback note), never bought


@pytest.mark.slow
def test_plan_and_backtest_treat_implausible_values_alike(tmp_path, capsys):
    vals = [repr(float(v)) for v in demand()]
    vals[10], vals[400] = "inf", "1e308"
    vals[600] = "2e5"  # a suspect spike, kept with a warning (capplan.sources.implausible)
    p = write_csv(tmp_path / "d.csv", values=vals)
    cfg = tmp_path / "fast.yaml"
    cfg.write_text(FAST_CONFIG.replace("store: store", f"store: {tmp_path / 'store'}"))
    code, out, err = run_cli(["backtest", "--source", f"csv:{p}", "--config", str(cfg), "--format", "json", "-q"],
                             capsys)
    assert code == 0, err
    fb = json.loads(out)["series"]["a"]["fallbacks"]
    assert any("2 implausible value(s)" in n for n in fb), fb
    # the series' ledger, as in the plan: the data's own warnings first
    assert json.loads(out)["series"]["a"]["warnings"][0][:32] == "data: 1 value(s) above 6.5e+03 =", out
    # the peers forecast after the forecast stage are scored too (the naive-conformal rule)
    rows = json.loads(out)["series"]["a"]["horizons"].values()
    assert rows and any("naive_conformal" in row for row in rows), list(rows)
    code, out, err = run_cli(["plan", "--source", f"csv:{p}", "--config", str(cfg), "--out", str(tmp_path / "o"),
                              "--format", "json", "-q", "--n-calls", "4"], capsys)
    assert code == 0, err
    s = json.loads(out)["series"]["a"]
    assert any("2 implausible value(s)" in n for n in s["fallbacks"]), s["fallbacks"]
    # the report puts its verdicts on the evaluation window first (capplan.report.model); the ledger follows,
    # the data's own warnings first: the kept spike may well make the plan dearer than the baseline
    ledger = [w for w in s["warnings"] if not w.startswith("policy: ")]
    assert ledger[0].startswith("data: 1 value(s) above") and "row 602" in ledger[0], s["warnings"]
    assert np.isfinite(s["recommended"]["cost_usd"])


# -- 3: epoch milliseconds ------------------------------------------------------------------
def test_epoch_milliseconds_in_every_row_or_one(tmp_path):
    ms = [str(t.value // 10**6) for t in T]
    h = load_source(f"csv:{write_csv(tmp_path / 'ms.csv', ts=ms)}")
    assert (h.frame["timestamp"] == T).all()
    assert any("864 timestamp(s) of 12+ digits read as epoch milliseconds" in n for n in h.notes)
    mixed = [t.isoformat() for t in T]
    mixed[3] = str(T[3].value // 10**6)
    h = load_source(f"csv:{write_csv(tmp_path / 'one.csv', ts=mixed)}")
    assert (h.frame["timestamp"] == T).all() and any("1 timestamp(s)" in n for n in h.notes)


def test_epoch_nanoseconds_exit_2_naming_the_row(tmp_path, capsys):
    ts = [str(t.value // 10**6) for t in T]
    ts[4] = str(T[4].value)  # nanoseconds
    p = write_csv(tmp_path / "ns.csv", ts=ts)
    code, _, err = run_cli(["plan", "--source", f"csv:{p}", "--out", str(tmp_path / "o"), "-q"], capsys)
    line = one_line(err)
    assert code == 2 and str(p) in line and "row 6: column timestamp" in line and "nanoseconds" in line


# -- 4: an outlying date is rejected before resampling -----------------------------------------
def test_outlying_date_rejected_before_resampling(tmp_path, capsys):
    ts = [t.isoformat() for t in T]
    ts[100] = "2200-01-01T00:00:00Z"
    p = write_csv(tmp_path / "far.csv", ts=ts)
    t0 = time.perf_counter()
    code, _, err = run_cli(["backtest", "--source", f"csv:{p}", "-q"], capsys)
    assert time.perf_counter() - t0 < 60  # fails fast: the 2200 row is found before any resampling
    line = one_line(err)
    assert code == 2 and f"{p}: row 102: column timestamp: 2200-01-01" in line and "at most 1096 days" in line


# -- 5: options before any work ------------------------------------------------------------------
@pytest.mark.parametrize("cmd", ["plan", "backtest"])
def test_unknown_timezone_exits_2_first(tmp_path, capsys, cmd):
    code, _, err = run_cli([cmd, "--timezone", "Mars/Olympus", "--source", f"csv:{tmp_path / 'absent.csv'}"], capsys)
    line = one_line(err)
    # the option is checked before the (absent) file is even looked at
    assert code == 2 and "--timezone 'Mars/Olympus': unknown time zone" in line
    with pytest.raises(InputError, match="unknown time zone"):
        load_source("sample", timezone="Mars/Olympus")


# -- 6: series ids as file names -------------------------------------------------------------------
ODD_IDS = ["..", ".", ".team", "a/../../b", "x" * 300, "é" * 200]


def test_file_keys_are_safe_bounded_and_distinct():
    keys = [file_key(i) for i in ODD_IDS + ["x" * 299]]
    assert len(set(keys)) == len(keys)
    for k in keys:
        assert not k.startswith(".") and "/" not in k and len(k.encode()) <= 150


def test_store_keeps_every_odd_id(tmp_path):
    st = Store(tmp_path / "store")
    f = pd.DataFrame({"series_id": "x", "timestamp": T[:3], "value": [1.0, 2.0, 3.0]})
    for sid in ODD_IDS:
        st.write_series(sid, f.assign(series_id=sid), SeriesMeta())
    assert sorted(st.series_ids()) == sorted(ODD_IDS)
    assert {p.parent for p in (tmp_path / "store").rglob("*") if p.is_file()} == {st.history_dir}
    for sid in ODD_IDS:
        frame, _, _ = st.read_series(sid)
        assert list(frame["value"]) == [1.0, 2.0, 3.0]
    # an older store's file named by plain percent-encoding (".team.parquet") is still listed and read
    old = tmp_path / "old"
    Store(old).write_series("b", f.assign(series_id="b"), SeriesMeta())
    for ext in ("parquet", "json"):
        (old / "history" / f"b.{ext}").rename(old / "history" / f".team.{ext}")
    doc = json.loads((old / "history" / ".team.json").read_text())
    (old / "history" / ".team.json").write_text(json.dumps({**doc, "series_id": ".team"}))
    assert Store(old).series_ids() == [".team"] and len(Store(old).read_series(".team")[0]) == 3


def test_registry_folders_stay_inside_the_tier(tmp_path):
    reg = ModelRegistry(tmp_path / "models")
    for sid in ODD_IDS:
        reg.save("weekly", sid, {"model.json": b"{}"}, (T[0], T[-1]), [sid])
        assert reg.latest("weekly", sid)[1]["key"] == sid
    dirs = {p.parent.parent.parent for p in (tmp_path / "models").rglob("meta.json")}
    assert dirs == {tmp_path / "models" / "weekly"} and len(list((tmp_path / "models" / "weekly").iterdir())) == 6


def test_ingested_dot_id_is_planned_not_dropped(tmp_path, capsys):
    st = Store(tmp_path / "store")
    st.write_series(".team", pd.DataFrame({"series_id": ".team", "timestamp": T, "value": demand()}), SeriesMeta())
    h = load_source(f"store:{tmp_path / 'store'}")
    assert list(h.frame["series_id"].unique()) == [".team"]


@pytest.mark.parametrize("cmd", ["plan", "backtest"])
@pytest.mark.parametrize("value", ["", ",", " , "])
def test_an_empty_series_flag_exits_2_not_every_series(tmp_path, capsys, cmd, value):
    code, out, err = run_cli([cmd, "--series", value, "--out", str(tmp_path / "o"), "-q"] if cmd == "plan"
                             else [cmd, "--series", value, "-q"], capsys)
    assert code == 2 and "--series: no series id given" in err and out == ""


def test_out_that_is_not_a_capplan_output_is_refused_before_any_work(tmp_path, capsys):
    """--out replaces the whole folder: a file, a folder of other files or the store is refused (exit 2) and
    left as it was; an empty folder or a previous output (report.json) is accepted (checked elsewhere)."""
    f = tmp_path / "notes.txt"
    f.write_text("keep me")
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (home / "thesis.txt").write_text("keep me too")
    for out, why in ((f, "is a file"), (home, "not a capplan output")):
        code, stdout, err = run_cli(["plan", "--series", "infer/azure-llm-conv", "--out", str(out), "-q"], capsys)
        assert code == 2 and f"--out {out}: " in err and why in err and stdout == ""
    assert f.read_text() == "keep me" and (home / "thesis.txt").read_text() == "keep me too" and (home / "sub").is_dir()
    code, _, err = run_cli(["plan", "--series", "infer/azure-llm-conv", "--out", str(tmp_path / "o"), "--output",
                            str(home), "-q"], capsys)
    assert code == 2 and "--output" in err and "is a folder" in err


@pytest.mark.parametrize("stamp,why", [("2024-03-10 02:30:00", "does not exist"),
                                       ("2024-11-03 01:30:00", "happens twice")])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_naive_local_times_a_dst_change_skips_or_repeats_exit_2(tmp_path, capsys, stamp, why, fmt):
    ts = pd.to_datetime(pd.Series(["2024-03-09 00:00:00", stamp]))
    df = pd.DataFrame({"series_id": "pool/a", "timestamp": ts if fmt == "parquet" else ts.astype(str), "value": 1.0})
    p = tmp_path / f"d.{fmt}"
    df.to_parquet(p, index=False) if fmt == "parquet" else df.to_csv(p, index=False)
    code, _, err = run_cli(["plan", "--source", f"{fmt}:{p}", "--timezone", "America/New_York",
                            "--out", str(tmp_path / "o"), "-q"], capsys)
    line = one_line(err)
    assert code == 2 and f"{p}: row 3: column timestamp: {stamp} {why} in --timezone America/New_York" in line


def test_a_config_that_is_not_utf8_text_exits_2_without_its_content(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_bytes(b"\xff\xfe\x00secret-\x9c")
    code, out, err = run_cli(["plan", "--config", str(p), "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and f"config {p}: not UTF-8 text" in one_line(err) and "secret" not in out + err


@pytest.mark.slow
def test_a_series_without_any_observed_value_fails_alone(tmp_path, capsys):
    """So does a series too short to split into windows (three
    one-minute rows stopped the whole fleet with exit 2, counting grid points, naming no file)."""
    ts = pd.date_range("2026-01-01", periods=24 * 12 * 3, freq="5min", tz="UTC")
    df = pd.concat([pd.DataFrame({"series_id": "pool/nan", "timestamp": ts, "value": np.nan}),
                    pd.DataFrame({"series_id": "pool/short", "value": 3.0,  # three one-minute rows
                                  "timestamp": [ts[0] + pd.Timedelta(minutes=m) for m in (0, 1, 2)]}),
                    pd.DataFrame({"series_id": "pool/ok", "timestamp": ts, "value": 4.0 + (ts.hour > 12)})])
    p = tmp_path / "d.csv"
    df.to_csv(p, index=False)
    cfg = tmp_path / "fast.yaml"
    cfg.write_text(FAST_CONFIG)
    code, out, err = run_cli(["plan", "--config", str(cfg), "--source", f"csv:{p}", "--out", str(tmp_path / "o"),
                              "--format", "json", "-q"], capsys)
    rep = json.loads(out)
    assert code == 3 and list(rep["series"]) == ["pool/ok"]
    assert rep["failed"]["pool/nan"]["stage"] == "regularise"
    assert "every value is missing" in rep["failed"]["pool/nan"]["error"]
    short = rep["failed"]["pool/short"]
    assert short["stage"] == "regularise" and f"3 row(s) in {p}" in short["error"]
    assert "longer history" in short["error"]
    code, out, err = run_cli(["backtest", "--config", str(cfg), "--source", f"csv:{p}", "--format", "json", "-q"],
                             capsys)  # backtest leaves them out alike
    doc = json.loads(out)
    assert code == 3 and list(doc["series"]) == ["pool/ok"] and sorted(doc["failed"]) == ["pool/nan", "pool/short"]
    assert "2 series failed and were left out" in err
    alone = tmp_path / "short.csv"
    df[df["series_id"] == "pool/short"].to_csv(alone, index=False)
    code, _, err = run_cli(["plan", "--source", f"csv:{alone}", "--out", str(tmp_path / "o3"), "-q"], capsys)
    assert code == 2 and f"series pool/short: 3 row(s) in {alone}" in one_line(err)
    only = tmp_path / "nan.csv"
    df[df["series_id"] == "pool/nan"].to_csv(only, index=False)
    code, _, err = run_cli(["plan", "--source", f"csv:{only}", "--out", str(tmp_path / "o2"), "-q"], capsys)
    assert code == 2 and "every value of every series is missing" in one_line(err)


@pytest.mark.parametrize("sid,unit,want", [("pool/\x1b[31mred", "gpu", "holds control characters"),
                                           ("pool/a", "replica", "column unit: 'replica' for a training pool")])
def test_ids_and_units_the_exporters_cannot_take_exit_2_at_load(tmp_path, sid, unit, want):
    p = tmp_path / "d.csv"
    pd.DataFrame({"series_id": sid, "timestamp": T[:10].astype(str), "value": 1.0, "kind": "training",
                  "unit": unit}).to_csv(p, index=False)
    with pytest.raises(InputError, match=want):
        load_source(f"csv:{p}")


def test_min_replicas_above_max_replicas_is_refused_at_config_load(tmp_path):
    from capplan.config.settings import load_config

    p = tmp_path / "c.yaml"
    p.write_text("plan:\n  inference_bounds:\n    min_replicas: [5, 10]\n    max_replicas: 2\n")
    with pytest.raises(InputError, match="min_replicas: high 10 is above max_replicas 2"):
        load_config(p)


def test_yaml_errors_never_echo_the_file(tmp_path, capsys):
    """PyYAML quotes the offending lines; a secret file passed by mistake must not be printed by
    --config, export --policy or export --validate."""
    secret = tmp_path / "secret.yaml"
    secret.write_text('user: admin\ntoken: "hunter2-SECRET\n')
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "x.yaml").write_text(secret.read_text())
    for args in (["plan", "--config", str(secret), "--out", str(tmp_path / "o")],
                 ["export", "--policy", str(secret), "--out", str(tmp_path / "e"), "--diff"],
                 ["export", "--validate", str(folder)]):
        code, out, err = run_cli(args, capsys)
        assert code == 2, args
        assert "invalid YAML at line" in " ".join((out + err).split()) and "hunter2" not in out + err, args


@pytest.mark.parametrize("cmd", ["plan", "backtest"])
def test_a_negative_seed_exits_2_before_any_work(tmp_path, capsys, cmd):
    code, _, err = run_cli([cmd, "--seed", "-1", "--source", f"csv:{tmp_path / 'absent.csv'}", "-q"], capsys)
    assert code == 2 and "--seed -1: must be between 0" in one_line(err)


def test_a_config_key_given_twice_exits_2_naming_it(tmp_path):
    from capplan.config.settings import load_config

    p = tmp_path / "c.yaml"
    p.write_text("plan:\n  n_calls: 8\n  coverage_target: 0.9\n  n_calls: 30\n")
    with pytest.raises(InputError, match=r"key 'n_calls' appears twice in one mapping \(line 4\)"):
        load_config(p)


def test_validate_on_a_folder_without_manifests_exits_2(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a manifest")
    code, _, err = run_cli(["export", "--validate", str(tmp_path)], capsys)
    assert code == 2 and "nothing to validate" in " ".join(err.split())


def test_a_series_whose_kind_changes_midway_exits_2(tmp_path):
    p = tmp_path / "d.csv"
    pd.DataFrame({"series_id": "pool/a", "timestamp": T[:10].astype(str), "value": 1.0,
                  "kind": ["training"] * 5 + ["inference"] * 5}).to_csv(p, index=False)
    with pytest.raises(InputError, match="series pool/a: column kind has several values"):
        load_source(f"csv:{p}")


def test_a_store_setting_that_names_a_file_exits_2(tmp_path):
    from capplan.config.settings import load_config

    (tmp_path / "afile").write_text("x")
    p = tmp_path / "c.yaml"
    p.write_text("store: afile\n")
    with pytest.raises(InputError, match=r"store: .*afile is a file; point it at a folder"):
        load_config(p)


def test_a_stored_series_without_its_document_is_planned_with_a_note(tmp_path):
    s = Store(tmp_path)
    f = pd.DataFrame({"series_id": "pool/a", "timestamp": T, "value": 2.0})
    s.write_series("pool/a", f, SeriesMeta(kind="training", timezone="Asia/Shanghai"))
    next((tmp_path / "history").glob("*.json")).unlink()
    h = load_source(f"store:{tmp_path}")
    assert h.meta["pool/a"].timezone == "UTC"
    assert any(n.startswith("pool/a: no series document in the store; default metadata used") for n in h.notes)


def test_a_cold_start_beyond_an_hour_is_refused_at_config_load(tmp_path):
    from capplan.config.settings import load_config

    p = tmp_path / "c.yaml"
    p.write_text("plan:\n  cold_start_s: 7000\n")
    with pytest.raises(InputError, match="cold_start_s"):
        load_config(p)


@pytest.mark.parametrize("step_s", [60, 300, 3600])
def test_the_longest_lag_and_cold_start_build_a_policy_of_either_family(step_s):
    """Every inference policy carries the lookahead family's lead and span, so the largest metrics lag
    and cold start the settings allow must fit InferenceParams' bounds at any data step (they failed
    after the forecast stage before)."""
    from optimizer.inference.lookahead import cold_steps, lead_steps
    from optimizer.plan.policy import InferenceParams
    from optimizer.search.settings import SearchSettings
    from optimizer.search.space import INFERENCE_ANCHORS, inference_space

    hi = SearchSettings.model_fields["cold_start_s"].metadata
    cold = lag = 3600
    assert any(getattr(m, "le", None) == cold for m in hi)
    space = inference_space(10.0, None, step_s, lead_steps(step_s, cold, lag) * step_s,
                            (cold_steps(step_s, cold) + 1) * step_s)
    for anchor in INFERENCE_ANCHORS:
        InferenceParams(**{**anchor, **space.fixed})


def test_data_coarser_than_the_grid_exits_2_naming_the_series(tmp_path, capsys):
    """Hourly samples on the 5-minute grid would be 11 gaps in 12 and an oracle of zero demand between."""
    ts = pd.date_range("2026-01-01", periods=24 * 30, freq="1h", tz="UTC")
    df = pd.concat([pd.DataFrame({"series_id": "infer/hourly", "timestamp": ts, "value": 3.0, "kind": "inference",
                                  "unit": "replica"}),
                    pd.DataFrame({"series_id": "infer/fine", "timestamp": pd.date_range("2026-01-01", periods=30 * 288,
                                                                                         freq="5min", tz="UTC"),
                                  "value": 3.0, "kind": "inference", "unit": "replica"})])
    p = tmp_path / "h.csv"
    df.to_csv(p, index=False)
    code, out, err = run_cli(["plan", "--source", f"csv:{p}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and "series infer/hourly: sampled every 3600 s (median spacing)" in one_line(err)
    assert "infer/fine" not in err


@pytest.mark.parametrize("url", ["http://u:hunter2SECRET@prom:9090", "http://prom:9090/?token=hunter2SECRET",
                                 "prom:9090"])
@pytest.mark.parametrize("section", ["prometheus:\n  url", "export:\n  prometheus_url"])
def test_prometheus_urls_with_credentials_are_refused_where_they_would_reach_the_manifests(tmp_path, url, section):
    """export.prometheus_url becomes KEDA's serverAddress in every ScaledObject: credentials or a token in
    its query would be written into the manifests and the run's record, so it is checked as prometheus.url."""
    from capplan.config.settings import load_config

    p = tmp_path / "c.yaml"
    p.write_text(f"{section}: '{url}'\n")
    with pytest.raises(InputError) as e:
        load_config(p)
    assert "url" in str(e.value) and "hunter2" not in str(e.value)


def test_missing_columns_never_echo_a_file_that_is_not_data(tmp_path, capsys):
    """A secrets file given as --source csv: is named, its header (its first line) is not shown; real
    column names still are, so a typo is easy to see."""
    env = tmp_path / "env"
    env.write_text("AWS_SECRET_ACCESS_KEY=hunter2SECRET\nOTHER=1\n")
    code, _, err = run_cli(["plan", "--source", f"csv:{env}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and "missing column(s) timestamp, series_id, value" in one_line(err)
    assert "hunter2" not in err and "1 not shown" in one_line(err)
    for token in ("ghp_16C7e42F292c6912E7710c838347Ae178B4a",
                  "AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"):
        f = tmp_path / "token.txt"  # a token file's one line parses as one or two column names
        f.write_text(token + "\n")
        code, _, err = run_cli(["plan", "--source", f"csv:{f}", "--out", str(tmp_path / "o"), "-q"], capsys)
        assert code == 2 and "not shown" in one_line(err) and all(t not in err for t in token.split(","))
    typo = tmp_path / "typo.csv"
    typo.write_text("timestamp,series,value\n2024-01-01T00:00:00Z,a,1\n")
    code, _, err = run_cli(["plan", "--source", f"csv:{typo}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and "missing column(s) series_id; found timestamp, series, value" in one_line(err)


def test_output_that_would_destroy_the_source_file_exits_2_before_any_work(tmp_path, capsys):
    """`--format csv --output F --source csv:F` overwrote the input."""
    out = tmp_path / "prev"
    out.mkdir()
    (out / "report.json").write_text("{}")  # a previous capplan output, which --out may replace
    src = write_csv(out / "in.csv")
    before = src.read_bytes()
    for cmd in (["plan", "--out", str(tmp_path / "o")], ["backtest"]):
        code, _, err = run_cli([*cmd, "--source", f"csv:{src}", "--format", "csv", "--output", str(src), "-q"], capsys)
        assert code == 2 and "is the --source file" in one_line(err)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(FAST_CONFIG)
    for cmd in (["plan", "--out", str(tmp_path / "o")], ["backtest"]):  # nor the config
        code, _, err = run_cli([*cmd, "--config", str(cfg), "--output", str(cfg), "-q"], capsys)
        assert code == 2 and "is the --config file" in one_line(err) and cfg.read_text() == FAST_CONFIG
    code, _, err = run_cli(["plan", "--source", f"csv:{src}", "--out", str(out), "-q"], capsys)
    assert code == 2 and "holds the --source file" in one_line(err)
    assert src.read_bytes() == before and (out / "report.json").is_file()


def test_a_config_that_is_a_folder_says_so(tmp_path, capsys):
    code, _, err = run_cli(["plan", "--config", str(tmp_path), "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and f"config {tmp_path}: is a folder; name a capplan.yaml file" in one_line(err)


def test_validate_refuses_diff_rather_than_ignoring_it(tmp_path, capsys):
    code, _, err = run_cli(["export", "--validate", str(tmp_path), "--diff"], capsys)
    assert code == 2 and "--validate checks a folder as it is; it takes neither --diff nor --policy" in one_line(err)


def test_out_that_holds_files_capplan_did_not_write_is_refused_naming_them(tmp_path, capsys):
    """a previous output's own extra files were wiped without a word."""
    out = tmp_path / "o"
    (out / "manifests").mkdir(parents=True)
    (out / "manifests" / "q.yaml").write_text("kind: Queue\n")
    (out / "report.json").write_text(json.dumps({"run": {"files": ["manifests/q.yaml", "report.json"]}}))
    (out / "my-notes.md").write_text("keep me")
    code, stdout, err = run_cli(["plan", "--series", "infer/azure-llm-conv", "--out", str(out), "-q"], capsys)
    assert code == 2 and "holds 1 file(s) capplan did not write (my-notes.md)" in one_line(err) and stdout == ""
    assert (out / "my-notes.md").read_text() == "keep me"
    # without a readable file list: only capplan's own exports and data files may go
    gitops = tmp_path / "g"
    (gitops / "manifests").mkdir(parents=True)
    (gitops / "policy.yaml").write_text("apiVersion: v1\n")
    (gitops / "manifests" / "mine.yaml").write_text("kind: ConfigMap\n")
    (gitops / "thesis.tex").write_text("keep me")
    for report in (None, '{"coverage": 0.9}', "not json"):
        if report is not None:
            (gitops / "report.json").write_text(report)
        code, _, err = run_cli(["plan", "--series", "infer/azure-llm-conv", "--out", str(gitops), "-q"], capsys)
        assert code == 2 and "capplan did not write" in one_line(err) and "thesis.tex" in err, err
        assert "manifests/mine.yaml" in err and ("report.json" in err) is (report is not None)
    assert (gitops / "thesis.tex").read_text() == "keep me"


def test_export_out_refuses_to_delete_files_capplan_did_not_write(tmp_path, capsys):
    """`capplan export --out` deleted the user's files under manifests/ and crds/."""
    from tests.optimizer.inference.test_lookahead import _written

    out = _written(tmp_path / "o", lambda t: t)
    (out / "manifests" / "mine.yaml").write_text("kind: ConfigMap\n")
    (out / "crds" / "other-crd.yaml").write_text("kind: CustomResourceDefinition\n")
    code, _, err = run_cli(["export", "--out", str(out)], capsys)
    assert code == 2 and "2 file(s) under" in one_line(err) and "crds/other-crd.yaml, manifests/mine.yaml" in err
    assert (out / "manifests" / "mine.yaml").is_file() and (out / "crds" / "other-crd.yaml").is_file()
    (out / "manifests" / "mine.yaml").unlink()
    (out / "crds" / "other-crd.yaml").unlink()
    stale = next((out / "manifests").glob("*-scaledobject.yaml"))  # capplan's own, from a series since removed
    stale.rename(out / "manifests" / "old-series-scaledobject.yaml")
    code, _, err = run_cli(["export", "--out", str(out)], capsys)
    assert code == 0, err
    assert not (out / "manifests" / "old-series-scaledobject.yaml").exists()


@pytest.mark.parametrize("name,shown", [("CAPPLAN_PROM_TOKEN", True), ("eyJhbGciOiJIUzI1NiJ9.S3cretPAYLOAD.sig", False),
                                        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", False), ("S3cretPW!", False)])
def test_an_unset_credential_variable_is_named_only_when_it_looks_like_a_name(name, shown):
    """a token pasted into bearer_token_env was printed as the variable's name."""
    from capplan.prometheus.client import _credential

    with pytest.raises(InputError) as e:
        _credential({}, name, "prometheus.bearer_token_env", token=True)
    assert (name in str(e.value)) is shown and str(e.value).startswith("prometheus.bearer_token_env: ")


def test_out_inside_the_store_is_refused(tmp_path, capsys):
    """`--out <store>/runs/<LATEST>` replaced the published run with another."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(FAST_CONFIG.replace("store: store", f"store: {tmp_path / 'store'}"))
    run = tmp_path / "store" / "runs" / "20260101T000000Z-s0-abc"
    run.mkdir(parents=True)
    (run / "report.json").write_text(json.dumps({"run": {"run_id": "x", "files": ["report.json"]}}))
    code, _, err = run_cli(["plan", "--config", str(cfg), "--out", str(run), "-q"], capsys)
    assert code == 2 and "is inside the store" in one_line(err)


@pytest.mark.parametrize("url", ["https://prom.example:99999", "http://127.0.0.1:abc", "https://prom.example:9090;x=1"])
def test_a_prometheus_url_with_a_bad_port_is_a_config_error(tmp_path, url):
    """these passed the config check and failed only after retries as 'not Prometheus'."""
    from capplan.config.settings import load_config

    p = tmp_path / "c.yaml"
    p.write_text(f"prometheus: {{url: '{url}'}}\n")
    with pytest.raises(InputError) as e:
        load_config(p)
    assert "prometheus.url" in str(e.value) and ("invalid port" in str(e.value) or "parameters" in str(e.value))


def test_a_source_that_is_a_folder_says_so(tmp_path, capsys):
    code, _, err = run_cli(["plan", "--source", f"csv:{tmp_path}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and f"{tmp_path}: is a folder; name a csv file" in one_line(err)


def test_missing_value_words_and_header_case_are_read_as_a_user_expects(tmp_path):
    """`NA` was 'not a number' while `nan` was a gap; `Timestamp` was refused."""
    vals = [repr(float(v)) for v in demand()]
    vals[3], vals[4], vals[5] = "NA", "null", "N/A"
    p = tmp_path / "d.csv"
    pd.DataFrame({"Timestamp": [t.isoformat() for t in T], "SERIES_ID": "a", "Value": vals}).to_csv(p, index=False)
    h = load_source(f"csv:{p}")
    assert h.frame["value"].iloc[3:6].isna().all() and h.frame["value"].notna().sum() == len(T) - 3
    vals[3] = "n.a."
    pd.DataFrame({"timestamp": [t.isoformat() for t in T], "series_id": "a", "value": vals}).to_csv(p, index=False)
    with pytest.raises(InputError, match="row 5: column value: 'n.a.' is not a number"):
        load_source(f"csv:{p}")
