"""The Streamlit dashboard: AppTest per page on a real fixture run, the
``capplan dashboard`` command, and a real headless-Chromium pass over every page.

The fixture run is the session's one real plan (``plan_run`` in ``tests/conftest.py``:
``capplan plan`` on three sample series with small search and model settings),
shared with the end-to-end tests.

Screenshots of the browser test go to a temporary folder (logged), or to
``$CAPPLAN_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from capplan.report.model import Report
from capplan.report.summary import exported_metrics
from tests.ci import in_ci, unavailable
from tests.conftest import E2E_SERIES

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "dashboards" / "views"
SERIES = tuple(E2E_SERIES)
CHROMIUM = os.environ.get("CAPPLAN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CAPPLAN_CHROMEDRIVER", "/usr/bin/chromedriver")
log = logging.getLogger(__name__)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def fixture_run(request, fast_config) -> dict:
    """The session's one real plan (``plan_run`` in conftest.py), seen through its store:
    {store, run_id, run_dir, config, report}.

    ``CAPPLAN_TEST_STORE=DIR`` reuses a store that already holds such a run (a
    copy is used), for quick local iterations; CI always runs the pipeline.
    """
    reuse = os.environ.get("CAPPLAN_TEST_STORE")
    if reuse and not in_ci():
        base = Path(fast_config).parent
        shutil.copytree(reuse, base / "reused-store")
        store = base / "reused-store"
        run_id = (store / "runs" / "LATEST").read_text().strip()
        run_dir = store / "runs" / run_id
        return {"store": store, "run_id": run_id, "run_dir": run_dir, "config": None,
                "report": json.loads((run_dir / "report.json").read_text())}
    request.getfixturevalue("plan_run")
    store = Path(fast_config).parent / "store"
    run_id = (store / "runs" / "LATEST").read_text().strip()
    run_dir = store / "runs" / run_id
    return {"store": store, "run_id": run_id, "run_dir": run_dir, "config": fast_config,
            "report": json.loads((run_dir / "report.json").read_text())}


@pytest.fixture
def store_env(fixture_run, monkeypatch):
    monkeypatch.setenv("CAPPLAN_STORE", str(fixture_run["store"]))
    monkeypatch.delenv("CAPPLAN_CONFIG", raising=False)
    return fixture_run


def _app(path: Path):
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(path), default_timeout=120)


def _ok(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _usd(x: float) -> str:
    return f"${x:,.0f}"


# -- capplan.backtest.whatif ------------------------------------------------------------------------
def test_whatif_reproduces_recorded_figures(fixture_run):
    from capplan.backtest.whatif import load_whatif
    from optimizer.rivals.expressed import expressible

    for sid in SERIES:
        wi = load_whatif(fixture_run["run_dir"], sid)
        m, traj = wi.simulate(wi.recommended_params)
        s = fixture_run["report"]["series"][sid]
        # the params' own figures: the recommendation's when the exports carry it (a searched policy or an
        # expressible peer, optimizer.rivals.expressed), else the searched policy's
        word = s["recommendation"]  # one word: rule, searched or an expressible peer, all carried by the exports
        assert "recommended_policy" not in s and (word in ("rule", "searched") or expressible(word, s["kind"]))
        rec = s["recommended"]
        assert m.cost_usd == pytest.approx(rec["cost_usd"], rel=1e-9)
        assert m.coverage == pytest.approx(rec["coverage"])
        assert m.idle_ratio == pytest.approx(rec["idle_ratio"])
        b, _ = wi.baseline()
        assert b.cost_usd == pytest.approx(fixture_run["report"]["series"][sid]["baseline"]["cost_usd"], rel=1e-9)
        assert len(traj) == len(wi.inp.times) > 0
        assert wi.reproduces()


def test_whatif_policy_change_moves_cost(fixture_run):
    from capplan.backtest.whatif import load_whatif

    wi = load_whatif(fixture_run["run_dir"], "train/vc6YE")
    lo, _ = wi.simulate({**wi.recommended_params, "reservation_ratio": 0.0, "spot_fraction": 1.0})
    hi, _ = wi.simulate({**wi.recommended_params, "reservation_ratio": 2.5, "spot_fraction": 0.0})
    assert hi.cost_usd > lo.cost_usd
    assert hi.coverage >= lo.coverage


# -- AppTest per page -------------------------------------------------------------------------
def test_fleet_page(store_env):
    rep = store_env["report"]
    at = _app(PAGES / "fleet.py").run()
    _ok(at)
    assert at.header[0].value == "Fleet"
    m = _metrics(at)
    assert m["Series"] == str(len(SERIES))
    # the Fleet page's figures are those of what the exports allow: a pool above its quota held to it
    rec = sum(s.exported().cost_usd for s in Report.model_validate(rep).series.values())
    base = sum(s["baseline"]["cost_usd"] for s in rep["series"].values())
    assert m["Recommended cost (eval. window)"] == _usd(rec)
    assert m["Baseline cost (eval. window)"] == _usd(base)
    assert m["Saving vs baseline"] == f"{100 * (1 - rec / base):.1f}%"
    assert store_env["run_id"] in at.caption[0].value
    assert sorted(at.multiselect(key="fleet_series").value) == sorted(SERIES)
    # one capacity chart per series and the heatmap
    assert len(at.get("plotly_chart")) == len(SERIES) + 1
    table = at.dataframe[0].value
    assert sorted(table["series"]) == sorted(SERIES)
    at.multiselect(key="fleet_series").set_value(["train/vc6YE"]).run()
    _ok(at)
    assert len(at.get("plotly_chart")) == 2


def test_forecasts_page(store_env):
    rep = store_env["report"]
    at = _app(PAGES / "forecasts.py").run()
    _ok(at)
    assert at.header[0].value == "Forecasts"
    sel = at.selectbox(key="fc_series")
    assert sorted(sel.options) == sorted(SERIES)
    for sid in SERIES:
        at.selectbox(key="fc_series").set_value(sid).run()
        _ok(at)
        members = rep["series"][sid]["combination"]["members"]
        shown = at.dataframe[0].value  # who carries weight per lead bucket, as in report.json
        assert list(shown["lead bucket"]) == list(members)
        for _, r in shown.iterrows():
            ws = members[r["lead bucket"]]
            assert {m: r[m] for m in ws} == {m: f"{100 * w:.1f} %" for m, w in ws.items()}
            assert all(r[m] == "under 5 %" for m in shown.columns[1:] if m not in ws)
        bt = at.dataframe[-1].value
        assert {"hourly", "daily", "weekly", "combined", "seasonal_naive"} <= set(bt["model"])
        assert {"MASE", "pinball", "coverage_p95"} <= set(bt.columns)
        row = bt[(bt["model"] == "seasonal_naive") & (bt["horizon"] == "all")].iloc[0]
        assert row["MASE"] == pytest.approx(rep["series"][sid]["backtest"]["seasonal_naive"]["bands"]["all"]["mase"])
        assert len(at.get("plotly_chart")) == 1
    at.selectbox(key="fc_series").set_value("train/vc6YE").run()  # a series long enough for a 24h band
    at.radio(key="fc_horizon").set_value("24h").run()
    _ok(at)
    assert set(at.dataframe[-1].value["horizon"]) == {"24h"}


def test_plan_page(store_env):
    rep = store_env["report"]
    at = _app(PAGES / "plan.py").run()
    _ok(at)
    assert at.header[0].value == "Plan"
    table = at.dataframe[0].value
    assert sorted(table["series"]) == sorted(SERIES)
    regret = at.dataframe[1].value  # every policy against perfect foresight
    for sid in SERIES:
        for name in ("recommended", "baseline", "reactive", "naive_conformal"):
            row = regret[(regret["series"] == sid) & regret["policy"].str.startswith(name)]
            assert len(row) == 1 and row["regret"].iloc[0] == pytest.approx(rep["series"][sid]["peers"].get(
                name, rep["series"][sid].get(name))["regret"])
    for sid in SERIES:
        at.selectbox(key="plan_series").set_value(sid).run()
        _ok(at)
        s = rep["series"][sid]
        m = _metrics(at)
        ex = exported_metrics(s)  # held to a binding quota, as the exported Queue holds the pool
        assert m["Cost"] == _usd(ex["cost_usd"])
        assert m["Coverage"] == f"{100 * ex['coverage']:.1f}%"
        d = ex["cost_usd"] - s["baseline"]["cost_usd"]
        delta = next(x for x in at.metric if x.label == "Cost").delta
        assert delta.startswith("-" if d < 0 else "+") and f"${abs(d):,.0f}" in delta
        row = table[table["series"] == sid].iloc[0]
        assert row["cost base. (USD)"] == round(s["baseline"]["cost_usd"])
        assert row["saving"] == f"{100 * (1 - ex['cost_usd'] / s['baseline']['cost_usd']):.1f}%"
        assert len(at.get("plotly_chart")) == 2  # convergence curve and trial scatter
        assert json.loads(at.json[0].value) == s["recommended"]["params"]  # what the exports carry, first


def test_manifests_page(store_env):
    from capplan.report.validation import folder_files

    run_dir = store_env["run_dir"]
    files = sorted(str(p.relative_to(run_dir)) for p in folder_files(run_dir))  # what export --validate counts
    yamls = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*.yaml"))
    at = _app(PAGES / "manifests.py").run()
    _ok(at)
    assert at.header[0].value == "Manifests"
    m = _metrics(at)
    assert m["Files"] == str(len(files)) and "report.json" in files
    assert m["Invalid"] == "0" and int(m["Valid"]) >= len(yamls)
    assert int(m["Valid"]) + int(m["Not checked"]) == len(files)
    table = at.dataframe[0].value
    assert sorted(table["file"]) == files
    assert set(table["status"]) <= {"valid", "not checked"}
    assert table.set_index("file").loc["report.json", "status"] == "not checked"
    # one download per file and one for the whole set
    assert len(at.get("download_button")) == len(files) + 1


def test_manifests_flags_an_invalid_file(fixture_run, tmp_path, monkeypatch):
    store = tmp_path / "store"
    shutil.copytree(fixture_run["store"], store)
    bad = store / "runs" / fixture_run["run_id"] / "manifests" / "seeds-hpa.yaml"
    bad.write_text("apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: seeds-hpa}\n"
                   "spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: x}\n  maxReplicas: 4\n"
                   "  metrics:\n  - type: Resource\n    resource:\n      name: nvidia.com/gpu\n"
                   "      target: {type: Utilization, averageUtilization: 70}\n")
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    at = _app(PAGES / "manifests.py").run()
    _ok(at)
    assert _metrics(at)["Invalid"] == "1"
    assert any("cpu and memory only" in e.value for e in at.error)


def test_whatif_page(store_env):
    rep = store_env["report"]
    at = _app(PAGES / "whatif.py").run()
    _ok(at)
    assert at.header[0].value == "What-if"
    at.selectbox(key="wi_series").set_value("train/vc6YE").run()
    _ok(at)
    s = rep["series"]["train/vc6YE"]
    p = s["recommended"]["params"]
    assert at.slider(key="wi_train_vc6YE_ratio").value == pytest.approx(p["reservation_ratio"])
    assert at.slider(key="wi_train_vc6YE_spot").value == pytest.approx(p["spot_fraction"])
    assert at.select_slider(key="wi_train_vc6YE_q").value == p["quantile"]
    m = _metrics(at)
    tuned = s.get("searched") or s["recommended"]  # the params' own figures (a peer may be recommended)
    assert m["What-if cost"] == _usd(tuned["cost_usd"])
    assert any("reproduces the run's recorded figures" in x.value for x in at.caption)
    cmp = at.dataframe[0].value
    assert list(cmp["policy"]) == ["what-if", "recommended", "baseline"]
    assert cmp["cost (USD)"].iloc[2] == pytest.approx(s["baseline"]["cost_usd"])
    # the replay reruns live: more reservation costs more than the recommended policy
    at.slider(key="wi_train_vc6YE_ratio").set_value(3.0).run()
    _ok(at)
    cost = at.dataframe[0].value["cost (USD)"].iloc[0]
    assert cost > tuned["cost_usd"]
    assert _metrics(at)["What-if cost"] == _usd(cost)
    at.button(key="wi_train_vc6YE_reset").click().run()
    _ok(at)
    assert at.slider(key="wi_train_vc6YE_ratio").value == pytest.approx(p["reservation_ratio"])
    # inference: HPA target and windows
    at.selectbox(key="wi_series").set_value("infer/nasa-http").run()
    _ok(at)
    pi = rep["series"]["infer/nasa-http"]["recommended"]["params"]
    assert at.slider(key="wi_infer_nasa-http_target").value == pytest.approx(pi["target_utilization"])
    assert at.slider(key="wi_infer_nasa-http_downw").value == pi["scale_down_window_s"]
    si = rep["series"]["infer/nasa-http"]
    assert _metrics(at)["What-if cost"] == _usd((si.get("searched") or si["recommended"])["cost_usd"])


def test_app_navigation_and_new_run_shows_without_restart(fixture_run, tmp_path, monkeypatch):
    store = tmp_path / "store"
    shutil.copytree(fixture_run["store"], store)
    monkeypatch.setenv("CAPPLAN_STORE", str(store))
    at = _app(ROOT / "dashboards" / "app.py").run()
    _ok(at)
    assert at.header[0].value == "Fleet"
    run_sel = at.sidebar.selectbox(key="capplan_run_id")
    assert run_sel.value == fixture_run["run_id"]
    for page, heading in [("views/forecasts.py", "Forecasts"), ("views/plan.py", "Plan"),
                          ("views/manifests.py", "Manifests"), ("views/whatif.py", "What-if")]:
        at.switch_page(page).run()
        _ok(at)
        assert at.header[0].value == heading
    # a later run lands in the store (as `capplan plan` would write it): the next rerun shows it
    new_id = "29991231T000000Z-s7"
    shutil.copytree(store / "runs" / fixture_run["run_id"], store / "runs" / new_id)
    (store / "runs" / "LATEST").write_text(new_id + "\n")
    at.switch_page("views/fleet.py").run()
    _ok(at)
    assert at.sidebar.selectbox(key="capplan_run_id").value == new_id
    assert new_id in at.caption[0].value
    opts = at.sidebar.selectbox(key="capplan_run_id").options
    assert opts == [f"{new_id} (latest)", fixture_run["run_id"]]


def test_empty_store_shows_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPPLAN_STORE", str(tmp_path / "nothing"))
    at = _app(ROOT / "dashboards" / "app.py").run()
    _ok(at)
    assert any("No run in the store" in i.value for i in at.info)


def test_new_run_job_writes_into_the_dashboard_store(store_env, monkeypatch):
    import yaml

    from dashboards import jobs

    seen = {}

    class FakePopen:
        pid = 424242

        def __init__(self, args, **kw):
            seen["args"] = args

        def poll(self):
            return None

    monkeypatch.setattr(jobs.subprocess, "Popen", FakePopen)
    job = jobs.start_job("sample", None, ["train/vc6YE"], 5, quick=True)
    args = seen["args"]
    assert args[1:4] == ["-m", "capplan", "plan"]
    assert args[args.index("--source") + 1] == "sample" and args[args.index("--series") + 1] == "train/vc6YE"
    cfg = yaml.safe_load(Path(args[args.index("--config") + 1]).read_text())
    assert Path(cfg["store"]) == store_env["store"].resolve()
    assert cfg["plan"]["n_calls"] == 5 and "--quick" in args  # the CLI applies capplan.config.quick.apply_quick
    assert job.rc is None
    jobs._registry().clear()


# -- the command ---------------------------------------------------------------------------
def test_dashboard_command_defaults_and_errors(tmp_path):
    from capplan.cli.commands.dashboard import streamlit_command

    cmd = streamlit_command("127.0.0.1", 8501)
    assert cmd[1:4] == ["-m", "streamlit", "run"]
    assert Path(cmd[4]) == ROOT / "dashboards" / "app.py" or Path(cmd[4]).name == "app.py"
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8501"
    assert cmd[cmd.index("--server.headless") + 1] == "true"
    r = subprocess.run([sys.executable, "-m", "capplan", "dashboard", "--help"], env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "--port" in r.stdout and "127.0.0.1" in r.stdout
    r = subprocess.run([sys.executable, "-m", "capplan", "dashboard", "--config", str(tmp_path / "missing.yaml")],
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "missing.yaml" in r.stderr


# -- a real browser --------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def browser_available() -> None:
    """Fail under CI=true, else skip, when Chromium, chromedriver or selenium is missing."""
    _need_browser()


def _need_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (python package)")
    if missing:
        unavailable(f"browser test needs {', '.join(missing)} (Debian: apt-get install chromium chromium-driver)")


@pytest.fixture
def server(fixture_run):
    port = _free_port()
    logf = open(fixture_run["store"].parent / f"dashboard-{port}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "capplan", "dashboard", "--port", str(port), "--store",
                             str(fixture_run["store"])], env=_env(), stdout=logf, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            logf.close()
            pytest.fail("dashboard did not start:\n" + Path(logf.name).read_text()[-3000:])
        time.sleep(0.5)
    yield url
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    logf.close()


def _driver(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
              "--window-size=1400,2200", f"--user-data-dir={profile}"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_page_load_timeout(90)
    return d


def _wait_rendered(driver, heading: str, texts: list[str], timeout: float = 120) -> str:
    """Wait until the page shows its heading and ``texts`` and every chart drew
    (or a Streamlit exception box appeared). Returns the body text."""
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    body = ""
    while time.time() < deadline:
        if driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]'):
            return driver.find_element(By.TAG_NAME, "body").text
        body = driver.find_element(By.TAG_NAME, "body").text
        hs = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "h1, h2")]
        if any(heading in h for h in hs) and all(t in body for t in texts):
            charts = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"]')
            drawn = driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")
            if len(drawn) >= len(charts):
                time.sleep(1.0)  # let the last frame paint
                return driver.find_element(By.TAG_NAME, "body").text
        time.sleep(0.5)
    return body


def test_browser_every_page(browser_available, fixture_run, server, tmp_path_factory):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    rep = fixture_run["report"]
    shots = Path(os.environ.get("CAPPLAN_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    from dashboards.common import MIN_SCORE_POINTS, most_at_stake

    report = Report.model_validate(rep)
    rec = sum(s.exported().cost_usd for s in report.series.values())  # what the exports allow (quota held)
    first = most_at_stake(report)  # every picker starts at the series with the most at stake
    from capplan.report.validation import folder_files

    n_files = len(folder_files(fixture_run["run_dir"]))
    bands = {m: v["bands"]["1h"] for m, v in rep["series"][first]["backtest"].items()
             if "1h" in v["bands"] and (v["bands"]["1h"]["n"] or 0) >= MIN_SCORE_POINTS
             and v["bands"]["1h"]["mase"] is not None}
    low = min(b["mase"] for b in bands.values())
    tied = sorted(m for m in bands if bands[m]["mase"] <= low + 1e-12)  # ties are named together
    best = f"1h: {', '.join(tied)} ({low:.3f} of {len(bands)} models, {bands[tied[0]]['n']} points)"
    pages = [
        ("", "Fleet", ["Warnings and notes", "Purchase mix", "Demand against provisioned capacity",
                       "Utilisation by hour of week", _usd(rec)]),
        ("forecasts", "Forecasts", ["Backtest", "Lowest MASE per lead band", best]),
        ("plan", "Plan", ["Recommended against baseline", "Optimiser", _usd(report.series[first].exported().cost_usd)]),
        ("manifests", "Manifests", ["Download all (zip)", "policy.yaml", f"Files\n{n_files}"]),
        ("what-if", "What-if", ["Reset to recommended", "reproduces the run's recorded figures",
                                _usd(rep["series"][first]["recommended"]["cost_usd"])]),
    ]
    driver = _driver(tmp_path_factory.mktemp("chromium-profile"))
    try:
        for path, heading, texts in pages:
            driver.get(f"{server}/{path}")
            body = _wait_rendered(driver, heading, [fixture_run["run_id"], *texts])
            exc = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
            png = shots / f"{path or 'fleet'}.png"
            driver.save_screenshot(str(png))
            log.warning("dashboard screenshot: %s", png)
            print(f"dashboard screenshot: {png}")
            assert not exc, f"{path}: Streamlit exception: {exc[0].text[:1000]}"
            assert fixture_run["run_id"] in body, f"{path}: run id not shown"
            assert "Page not found" not in body, f"{path}: Streamlit says page not found"
            for t in texts:
                assert t in body, f"{path}: {t!r} not rendered"
            if path in ("", "forecasts", "plan", "what-if"):
                assert driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg"), f"{path}: no chart drawn"
        # the What-if replay reruns live in the browser: lower the HPA target with the keyboard

        driver.get(f"{server}/what-if")
        _wait_rendered(driver, "What-if", ["Reset to recommended"])
        # the costliest inference series: a target change moves its cost by whole dollars (the metric's unit)
        infer = max((sid for sid in rep["series"] if rep["series"][sid]["kind"] == "inference"),
                    key=lambda sid: rep["series"][sid]["recommended"]["cost_usd"])
        if infer != first:  # pick the inference series in the picker (it opened on the costliest one)
            box = driver.find_element(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stSelectbox"] input')
            box.click()
            box.send_keys(infer, Keys.ENTER)
            _wait_rendered(driver, "What-if", ["HPA target utilisation"])
        before = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')[0].text
        from selenium.webdriver.common.action_chains import ActionChains

        thumb = driver.find_element(By.CSS_SELECTOR, 'input[aria-label="HPA target utilisation"]')
        driver.execute_script("arguments[0].focus()", thumb)  # the range input itself is visually hidden
        ActionChains(driver).send_keys(*([Keys.ARROW_LEFT] * 15)).perform()
        deadline = time.time() + 60
        after = before
        while time.time() < deadline and after == before:
            time.sleep(0.5)
            after = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')[0].text
        time.sleep(1.0)
        driver.save_screenshot(str(shots / "what-if-changed.png"))
        log.warning("dashboard screenshot: %s", shots / "what-if-changed.png")
        assert after != before, "What-if cost did not change after moving the HPA target slider"
        assert float(after.strip("$").replace(",", "")) > float(before.strip("$").replace(",", "")), (before, after)
        assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    finally:
        driver.quit()
