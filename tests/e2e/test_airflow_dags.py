"""The Airflow DAGs, tested with Airflow itself.

* The DagBag of ``airflow_dags/`` imports without errors, cheaply, and each
  DAG's schedule and catchup are as specified.
* In a temporary ``AIRFLOW_HOME`` with SQLite (``airflow db migrate``),
  ``airflow dags test`` runs ingest -> the three forecast tiers -> plan on the
  embedded sample, with one configured series that does not exist: only its
  own mapped tasks fail, and the plan lists it as missing.
* Running ``capplan_plan`` again for the same logical date leaves the same
  single set of outputs.

Airflow runs in subprocesses with their own ``AIRFLOW_HOME`` so the test
process never reads or writes ``~/airflow``. Without Airflow these tests skip,
except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from capplan.airflow import jobs as jobs
from capplan.airflow import keys
from tests.ci import unavailable

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "airflow_dags"
LOGICAL_DATE = "2026-03-02T00:00:00+00:00"
LD = "20260302T000000Z"
GOOD = ["infer/nasa-http", "train/vc6YE"]
BAD = "train/not-in-the-sample"
TIERS = ("hourly", "daily", "weekly")
CLI_TIMEOUT = 600


@pytest.fixture(scope="module")
def airflow_required():
    if importlib.util.find_spec("airflow") is None:
        unavailable("apache-airflow is not installed (pip install 'capplan[airflow]')")


@pytest.fixture(scope="module")
def airflow_env(airflow_required, tmp_path_factory):
    """A migrated SQLite Airflow home, the fast capplan config and the env for the CLI."""
    root = tmp_path_factory.mktemp("airflow")
    home = root / "home"
    home.mkdir()
    cfg = root / "capplan.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        store: store
        source: sample
        series:
          - {{id: train/vc6YE, kind: training, unit: gpu, query: sample}}
          - {{id: infer/nasa-http, kind: inference, unit: replica, query: sample}}
          - {{id: {BAD}, kind: training, unit: gpu, query: sample}}
        plan: {{n_calls: 6, tune_days: 1, eval_days: 1}}
        forecast: {{lstm_epochs: 1, lstm_max_windows: 200, prophet_samples: 50}}
        """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.pop("CAPPLAN_INGEST_RETRIES", None)
    env.pop("CAPPLAN_TASK_RETRIES", None)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        # the Airflow Variable capplan_config (env-backed) wins over CAPPLAN_CONFIG, which points nowhere here
        "AIRFLOW_VAR_CAPPLAN_CONFIG": str(cfg),
        "CAPPLAN_CONFIG": str(root / "not-this.yaml"),
        "CAPPLAN_INGEST_RETRIES": "0",
        "CAPPLAN_TASK_RETRIES": "0",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONWARNINGS": "ignore",
    })
    _airflow(env, root, "db", "migrate")
    _airflow(env, root, "pools", "set", "capplan_fits", "2", "capplan fits")
    return {"env": env, "root": root, "config": cfg, "store": root / "store"}


def _airflow(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the ``airflow`` CLI of this interpreter; fail with the output's tail on a non-zero exit."""
    proc = subprocess.run([sys.executable, "-m", "airflow", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=CLI_TIMEOUT)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        pytest.fail(f"airflow {' '.join(args)} exited {proc.returncode}:\n{tail}", pytrace=False)
    return proc


# -- DagBag -------------------------------------------------------------------------------
DAGBAG_PROBE = """
import json, sys, time
t0 = time.perf_counter()
from airflow.models.dagbag import DagBag
t1 = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
t2 = time.perf_counter()
out = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {},
       "heavy": sorted(m for m in ("tensorflow", "prophet", "keras", "cmdstanpy", "statsmodels", "torch")
                       if m in sys.modules),
       "dagbag_s": t2 - t1}
for d in bag.dags.values():
    tasks = {}
    for t in d.tasks:
        tasks[t.task_id] = {"mapped": any(c.__name__ == "MappedOperator" for c in type(t).__mro__),
                            "retries": t.retries,
                            "timeout_s": t.execution_timeout.total_seconds() if t.execution_timeout else None,
                            "pool": t.pool,
                            "backoff": bool(getattr(t, "retry_exponential_backoff", False)),
                            "trigger_rule": str(getattr(t.trigger_rule, "value", t.trigger_rule)),
                            "outlets": [a.name for a in t.outlets]}
    sched = d.schedule
    objs = getattr(sched, "objects", None)
    objs = [sched] if objs is None and hasattr(sched, "uri") else (objs or [])
    out["dags"][d.dag_id] = {"schedule": sched if isinstance(sched, str) else None,
                             "timetable": type(d.timetable).__name__,
                             "assets": sorted(a.name for a in objs),
                             "catchup": d.catchup, "tasks": tasks}
print("PROBE" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def dagbag(airflow_env):
    # the shipped defaults (the end-to-end runs set CAPPLAN_INGEST_RETRIES=0)
    env = {k: v for k, v in airflow_env["env"].items() if k not in ("CAPPLAN_INGEST_RETRIES", "CAPPLAN_TASK_RETRIES")}
    proc = subprocess.run([sys.executable, "-c", DAGBAG_PROBE, str(DAGS)], env=env,
                          cwd=airflow_env["root"], capture_output=True, text=True, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE")), None)
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    return json.loads(line[len("PROBE"):])


def test_dagbag_has_no_import_errors_and_is_cheap(dagbag):
    assert dagbag["import_errors"] == {}
    assert set(dagbag["dags"]) == {"capplan_ingest", "capplan_forecast_hourly", "capplan_forecast_daily",
                                   "capplan_forecast_weekly", "capplan_plan"}
    # parsing the DAG files loads no model library (TensorFlow, Prophet ...)
    assert dagbag["heavy"] == []


def test_schedules_and_catchup(dagbag):
    d = dagbag["dags"]
    assert d["capplan_ingest"]["schedule"] == "*/15 * * * *"
    # the forecasts run on fresh history (the ingest's Asset), never beside an ingest that is still writing
    for t in TIERS:
        assert d[f"capplan_forecast_{t}"]["timetable"] == "AssetTriggeredTimetable"
        assert d[f"capplan_forecast_{t}"]["assets"] == ["capplan_history"]
    # the plan is data-aware: scheduled on the forecast Assets, not on a clock
    assert d["capplan_plan"]["timetable"] == "AssetTriggeredTimetable"
    assert d["capplan_plan"]["assets"] == sorted(f"capplan_forecasts_{t}" for t in TIERS)
    assert all(v["catchup"] is False for v in d.values())


def test_per_series_mapping_retries_and_assets(dagbag):
    d = dagbag["dags"]
    ingest = d["capplan_ingest"]["tasks"]
    assert ingest["ingest"]["mapped"]
    assert ingest["ingest"]["retries"] == 3 and ingest["ingest"]["backoff"]
    assert ingest["record"]["trigger_rule"] == "all_done"
    assert ingest["record"]["outlets"] == ["capplan_history"]
    for t in TIERS:
        tasks = d[f"capplan_forecast_{t}"]["tasks"]
        assert tasks["fit"]["mapped"]
        assert tasks["record"]["trigger_rule"] == "all_done"
        assert tasks["record"]["outlets"] == [f"capplan_forecasts_{t}"]
        assert tasks["fit"]["pool"] == "capplan_fits" and tasks["fit"]["timeout_s"] >= 1800
    assert d["capplan_plan"]["tasks"]["plan"]["pool"] == "capplan_fits"
    # every task retries and has a time limit
    for dag in d.values():
        for tid, t in dag["tasks"].items():
            assert t["retries"] >= 2 and t["timeout_s"] and t["timeout_s"] <= 3 * 3600, (tid, t)


# -- end to end with `airflow dags test` -------------------------------------------------------
@pytest.fixture(scope="module")
def pipeline(airflow_env):
    """ingest -> hourly, daily, weekly forecasts -> plan, each with ``airflow dags test``."""
    env, root = airflow_env["env"], airflow_env["root"]
    for dag_id in ("capplan_ingest", "capplan_forecast_hourly", "capplan_forecast_daily", "capplan_forecast_weekly",
                   "capplan_plan"):
        _airflow(env, root, "dags", "test", dag_id, LOGICAL_DATE)
    return airflow_env


def _tree(p: Path) -> list[str]:
    return sorted(str(f.relative_to(p)) for f in p.rglob("*"))


def test_end_to_end_artefacts(pipeline):
    store = pipeline["store"]
    # ingest: the good series in the store, the bad one recorded as missing
    assert sorted(jobs_store_ids(store)) == GOOD
    ing = json.loads((store / "ingest" / f"{LD}.json").read_text())
    assert ing["ok"] == GOOD and ing["missing"] == [BAD]
    # each tier: a forecast per good series for the logical date; the bad series is missing
    import pandas as pd

    for t in TIERS:
        d = store / "forecasts" / t / LD
        man = json.loads((d / "_manifest.json").read_text())
        assert man["ok"] == GOOD and man["missing"] == [BAD]
        assert (store / "forecasts" / t / "LATEST").read_text().strip() == LD
        for sid in GOOD:
            key = sid.replace("/", "%2F")
            f = pd.read_parquet(d / f"{key}.parquet")
            assert list(f.columns) == ["series_id", "tier", "issued_at", "timestamp", "p50", "p90", "p95", "p99"]
            assert set(f["tier"]) == {t} and set(f["series_id"]) == {sid} and len(f) > 0
            assert (f["p50"] <= f["p99"] + 1e-9).all()
            assert len(pd.read_parquet(d / f"{key}.backtest.parquet")) > 0
            assert json.loads((d / f"{key}.json").read_text())["tier"] == t
    # plan: the output folder, keyed by the logical date, and the store run
    out = store / "plans" / LD
    for name in ("policy.yaml", "report.json", "forecasts.parquet", "trials.parquet", "replay.parquet"):
        assert (out / name).is_file(), name
    manifests = sorted(p.name for p in (out / "manifests").iterdir())
    # object names are RFC 1123 labels with a collision-safe suffix (optimizer/exporters/names.py)
    assert any(m.startswith("infer-nasa-http-") and m.endswith("-scaledobject.yaml") for m in manifests)
    assert any(m.startswith("train-vc6ye-") and m.endswith("-queue.yaml") for m in manifests)
    assert "kustomization.yaml" in manifests
    assert jobs.check_manifests(out) == []
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["series"]) == GOOD
    assert list(report["missing"]) == [BAD] and "ingest failed" in report["missing"][BAD]
    assert report["run"]["run_id"] == f"airflow-{LD}-s0"
    assert report["run"]["forecast_runs"] == {t: LD for t in TIERS}
    fc = pd.read_parquet(out / "forecasts.parquet")
    assert {"combined", *TIERS} <= set(fc["tier"])
    run_dir = store / "runs" / f"airflow-{LD}-s0"
    assert (store / "runs" / "LATEST").read_text().strip() == run_dir.name
    assert _tree(run_dir) == _tree(out)
    # the Assets were emitted, each naming the series that failed in its extra
    for name in ("capplan_history", *(f"capplan_forecasts_{t}" for t in TIERS)):
        extras = [e for e in _asset_events(pipeline["env"], name) if e.get("logical_date") == LD]
        assert extras and extras[-1]["ok"] == GOOD and extras[-1]["missing"] == [BAD] and extras[-1]["partial"], name


def jobs_store_ids(store: Path) -> list[str]:
    from capplan.store.local import Store

    return Store(store).series_ids()


def test_rerun_same_logical_date_leaves_one_set_of_outputs(pipeline):
    store, env, root = pipeline["store"], pipeline["env"], pipeline["root"]
    out = store / "plans" / LD
    before_tree = _tree(store)
    before = {p: (out / p).read_bytes() for p in ("policy.yaml", *[f"manifests/{m}" for m in
                                                                   os.listdir(out / "manifests")])}
    _airflow(env, root, "dags", "test", "capplan_plan", LOGICAL_DATE)
    assert _tree(store) == before_tree  # same files, no second run folder, no temporaries left
    assert sorted(os.listdir(store / "plans")) == [LD]
    assert sorted(os.listdir(store / "runs")) == ["LATEST", f"airflow-{LD}-s0"]
    after = {p: (out / p).read_bytes() for p in before}
    assert after == before  # deterministic for a fixed seed


# -- capplan.airflow.jobs without Airflow ------------------------------------------------------------
def test_ld_key():
    import datetime as dt

    assert jobs.ld_key(dt.datetime(2026, 3, 2, 1, 2, 3, tzinfo=dt.timezone.utc)) == "20260302T010203Z"
    assert jobs.ld_key("2026-03-02T09:00:00+08:00") == "20260302T010000Z"
    assert jobs.ld_key(dt.datetime(2026, 3, 2)) == "20260302T000000Z"


def test_resolve_config_path(tmp_path, monkeypatch):
    monkeypatch.delenv(keys.CONFIG_ENV, raising=False)
    with pytest.raises(keys.JobError, match="capplan_config"):
        keys.resolve_config_path(None)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store: s\n")
    monkeypatch.setenv(keys.CONFIG_ENV, str(cfg))
    assert keys.resolve_config_path(None) == cfg
    other = tmp_path / "other.yaml"
    other.write_text("store: s\n")
    assert keys.resolve_config_path(str(other)) == other  # the Variable wins
    with pytest.raises(keys.JobError, match="not found"):
        keys.resolve_config_path(str(tmp_path / "missing.yaml"))


def test_connection_secrets_stay_out_of_the_config(tmp_path, monkeypatch):
    from capplan.config.settings import load_config

    # setenv first, so that monkeypatch records the variables and removes what the code sets
    # (delenv of an absent variable records nothing: the token would leak into later tests)
    for var in ("CAPPLAN_PROMETHEUS_TOKEN", "CAPPLAN_PROMETHEUS_PASSWORD"):
        monkeypatch.setenv(var, "placeholder")
        monkeypatch.delenv(var)
    cfg = load_config(None)
    cfg, secrets = jobs.connection_overrides(cfg, {"host": "prom.example:9090", "schema": "https", "login": None,
                                                   "password": None, "extra": {"bearer_token": "s3cret"}})
    assert cfg.prometheus.url == "https://prom.example:9090"
    assert cfg.prometheus.bearer_token_env == "CAPPLAN_PROMETHEUS_TOKEN"
    assert secrets == {"CAPPLAN_PROMETHEUS_TOKEN": "s3cret"}
    assert "CAPPLAN_PROMETHEUS_TOKEN" not in os.environ  # the worker's environment never holds the secret
    assert "s3cret" not in cfg.model_dump_json()
    cfg, secrets = jobs.connection_overrides(load_config(None), {"host": "http://p:9090", "login": "u",
                                                                 "password": "pw", "extra": "{}"})
    assert cfg.prometheus.basic_auth.username == "u" and cfg.prometheus.bearer_token_env is None
    assert secrets == {"CAPPLAN_PROMETHEUS_PASSWORD": "pw"} and "CAPPLAN_PROMETHEUS_PASSWORD" not in os.environ
    assert "pw" not in cfg.model_dump_json()
    assert jobs.connection_overrides(cfg, None) == (cfg, {})
    # the client reads the secret from the mapping it is given
    from capplan.prometheus.client import PrometheusClient

    client = PrometheusClient(cfg.prometheus, env={**os.environ, **secrets})
    assert "pw" in client._secrets
    client.close()


def test_connection_secrets_do_not_outlive_their_test():
    """Runs after the test above (file order): the token it handed over is gone again."""
    assert os.environ.get("CAPPLAN_PROMETHEUS_TOKEN") != "s3cret"
    assert os.environ.get("CAPPLAN_PROMETHEUS_PASSWORD") != "pw"


def test_record_forecasts_keeps_exactly_the_successful_set(tmp_path):
    cfg = tmp_path / "capplan.yaml"
    cfg.write_text("store: store\n")
    from capplan.store.local import Store

    d = Store(tmp_path / "store").forecast_dir("daily", LD)
    d.mkdir(parents=True)
    for key in ("train%2Fa", "train%2Fb"):  # b: left over from an earlier try of the same logical date
        for suffix in (".parquet", ".backtest.parquet", ".json"):
            (d / f"{key}{suffix}").write_text("x")
    doc = jobs.record_forecasts(cfg, "daily", LOGICAL_DATE, [{"series_id": "train/a"}, None],
                                ["train/a", "train/b"])
    assert doc["ok"] == ["train/a"] and doc["missing"] == ["train/b"]
    assert sorted(os.listdir(d)) == ["_manifest.json", "train%2Fa.backtest.parquet", "train%2Fa.json",
                                     "train%2Fa.parquet"]
    key, man = Store(tmp_path / "store").latest_forecasts("daily")
    assert key == LD and man["missing"] == ["train/b"]


def test_missing_series_reasons():
    latest = {t: (LD, {"ok": ["a", "b"] if t != "weekly" else ["a"]}) for t in TIERS}
    got = jobs.missing_series(["a", "b", "c"], {"a", "b"}, latest)
    assert set(got) == {"b", "c"}
    assert "ingest failed" in got["c"]
    assert got["b"].startswith("no forecast from tier weekly")


# -- failures stay loud: no demo data, no Asset event for a run that produced nothing ---------------------------
def _asset_events(env: dict, name: str) -> list[dict]:
    """The ``extra`` of every event of the Asset ``name`` in the Airflow home's SQLite database."""
    import sqlite3

    db = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///")
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = ? "
                         "ORDER BY e.id", (name,)).fetchall()
    return [json.loads(r[0]) if isinstance(r[0], str) else (r[0] or {}) for r in rows]


def _dags_test_with(env: dict, cfg: Path, dag_id: str, logical_date: str) -> str:
    """``airflow dags test`` with another capplan config; its output (the run may fail)."""
    env = {**env, "AIRFLOW_VAR_CAPPLAN_CONFIG": str(cfg)}
    proc = subprocess.run([sys.executable, "-m", "airflow", "dags", "test", dag_id, logical_date], env=env,
                          cwd=cfg.parent, capture_output=True, text=True, timeout=CLI_TIMEOUT)
    return proc.stdout + proc.stderr


def test_missing_connection_fails_ingest_and_no_sample_reaches_the_store(airflow_env, tmp_path):
    cfg = tmp_path / "capplan.yaml"  # a production-like config: series ids that the sample also has, no `source`
    cfg.write_text(f"store: store\nseries:\n  - {{id: {GOOD[1]}, kind: training, unit: gpu, query: 'sum(up)'}}\n")
    env = {k: v for k, v in airflow_env["env"].items() if not k.startswith("AIRFLOW_CONN_")}
    before = len(_asset_events(env, "capplan_history"))
    out = _dags_test_with(env, cfg, "capplan_ingest", "2026-03-03T00:00:00+00:00")
    assert "no Prometheus to ingest from" in out and "capplan_prometheus" in out, out[-3000:]
    assert jobs_store_ids(tmp_path / "store") == []  # no demo data in the store
    ing = json.loads((tmp_path / "store" / "ingest" / "20260303T000000Z.json").read_text())
    assert ing["ok"] == [] and ing["missing"] == [GOOD[1]]
    assert len(_asset_events(env, "capplan_history")) == before  # nothing landed: no history event


def test_forecast_run_whose_tasks_all_fail_emits_no_asset_event(airflow_env, tmp_path):
    cfg = tmp_path / "capplan.yaml"  # the sample selected, but nothing ingested into this store: every fit fails
    cfg.write_text(f"store: store\nsource: sample\nseries:\n  - {{id: {GOOD[1]}, kind: training, unit: gpu, "
                   "query: sample}\n")
    env = airflow_env["env"]
    before = len(_asset_events(env, "capplan_forecasts_hourly"))
    out = _dags_test_with(env, cfg, "capplan_forecast_hourly", "2026-03-04T00:00:00+00:00")
    assert "no series succeeded" in out, out[-3000:]
    assert len(_asset_events(env, "capplan_forecasts_hourly")) == before
    assert not (tmp_path / "store" / "forecasts" / "hourly" / "LATEST").exists()


def test_a_connection_that_cannot_be_read_fails_naming_it(airflow_required, monkeypatch):
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

    from airflow_dags import common

    def denied(conn_id):
        raise PermissionError("secrets backend: access denied for token abc123")

    monkeypatch.setattr(Connection, "get", classmethod(lambda cls, conn_id: denied(conn_id)))
    with pytest.raises(AirflowException, match="capplan_prometheus") as ei:
        common.prometheus_connection()
    assert "PermissionError" in str(ei.value) and "abc123" not in str(ei.value)

    def missing(conn_id):
        raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")

    monkeypatch.setattr(Connection, "get", classmethod(lambda cls, conn_id: missing(conn_id)))
    assert common.prometheus_connection() is None  # only "not found" means "no Connection configured"
