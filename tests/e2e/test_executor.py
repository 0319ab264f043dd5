"""Executors (capplan/run/executor.py): same answers on every engine, one series' failure stays its own,
a dead worker's task is retried; and `capplan plan` on a Dask LocalCluster equals the local run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import E2E_SERIES, FAST_CONFIG, REPO


def square_or_fail(x: int) -> int:
    if x == 3:
        raise ValueError("three is bad")
    return x * x


def die_once(arg: tuple[str, int]) -> int:
    """Kills its worker process the first time it sees item 2 (a marker file remembers)."""
    marker, x = arg
    if x == 2 and not os.path.exists(marker):
        Path(marker).write_text("died")
        os._exit(1)
    return x + 100


@pytest.fixture(scope="module")
def inprocess_client():
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0")
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def _executors(client):
    from capplan.run.executor import DaskExecutor, Executor, ProcessExecutor

    return [Executor(), ProcessExecutor(2), DaskExecutor(client=client)]


def test_every_executor_keeps_order_reports_progress_and_isolates_a_failure(inprocess_client):
    from capplan.run.executor import Failed

    for ex in _executors(inprocess_client):
        seen = []
        with ex:
            out = ex.map(square_or_fail, [1, 2, 3, 4], ["a", "b", "c", "d"], lambda i, n, lab: seen.append((i, n, lab)))
        assert out[:2] == [1, 4] and out[3] == 16, ex.name
        assert isinstance(out[2], Failed) and out[2].error == "ValueError: three is bad", ex.name
        assert [s[0] for s in seen] == [1, 2, 3, 4] and {s[2] for s in seen} == {"a", "b", "c", "d"}, ex.name


def test_a_dead_worker_process_has_its_task_retried(tmp_path):
    from capplan.run.executor import ProcessExecutor

    with ProcessExecutor(2) as ex:
        out = ex.map(die_once, [(str(tmp_path / "m"), x) for x in range(4)])
    assert out == [100, 101, 102, 103]
    assert (tmp_path / "m").read_text() == "died"


def test_a_dead_dask_worker_has_its_task_retried(tmp_path):
    from capplan.run.executor import DaskExecutor

    with DaskExecutor(workers=2) as ex:  # a LocalCluster of 2 worker processes
        out = ex.map(die_once, [(str(tmp_path / "m"), x) for x in range(4)])
    assert out == [100, 101, 102, 103]
    assert (tmp_path / "m").read_text() == "died"


def test_keras_seed_draws_ignore_other_users_of_python_random():
    """Inside private_keras_seeds, Keras' unseeded draws follow random.Random(seed), whatever else
    draws from Python's random meanwhile (a Dask worker's event loop does)."""
    import random

    from keras.src.random.seed_generator import make_default_seed

    from capplan.run.executor import private_keras_seeds

    ref = random.Random(7)
    want = [ref.randint(1, int(1e9)) for _ in range(3)]
    with private_keras_seeds(7):
        got = [make_default_seed()]
        random.random()  # another user of the process-wide random, between two draws
        got += [make_default_seed(), make_default_seed()]
    assert got == want
    random.seed(7)
    assert make_default_seed() == want[0]  # outside the block Keras draws from Python's random again


def test_unknown_executor_and_misplaced_scheduler_are_input_errors(tmp_path, capsys):
    from tests.conftest import run_cli

    code, _, err = run_cli(["plan", "--executor", "spark", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "--executor spark" in err
    cfg = tmp_path / "c.yaml"
    cfg.write_text("plan: {executor: local, scheduler: 'tcp://127.0.0.1:8786'}\n")
    code, _, err = run_cli(["plan", "--config", str(cfg), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "needs executor: dask" in err and not (tmp_path / "o").exists()


def test_an_unreachable_scheduler_is_an_input_error_naming_it(tmp_path, capsys, monkeypatch):
    import socket

    from capplan.run import executor
    from tests.conftest import run_cli

    with socket.socket() as s:  # a free local port: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(executor, "CONNECT_TIMEOUT_S", 2.0)
    addr = f"tcp://127.0.0.1:{port}"
    code, _, err = run_cli(["plan", "--scheduler", addr, "--series", "infer/azure-llm-conv", "-q",
                            "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and addr in err and "no Dask scheduler answered" in err
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_plan_on_a_dask_cluster_equals_the_local_run(plan_run, tmp_path):
    """The session's plan (executor local) again on a Dask LocalCluster of 2 workers, same seed, cold registry."""
    cfg = tmp_path / "dask.yaml"
    cfg.write_text(FAST_CONFIG.replace("executor: local", "executor: dask\n  workers: 2"))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "capplan", "plan", "--config", str(cfg), "--out", str(out), "--format", "json",
            "--seed", "7", "-q"]
    for s in E2E_SERIES:
        args += ["--series", s]
    r = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    local, dask = plan_run[1], json.loads(r.stdout)
    assert local["run"]["executor"] == "local" and dask["run"]["executor"] == "dask"
    assert dask["series"] == local["series"]
    assert dask["failed"] == {} == local["failed"]
    import pandas as pd

    a = pd.read_parquet(plan_run[0] / "forecasts.parquet")
    b = pd.read_parquet(out / "forecasts.parquet")
    pd.testing.assert_frame_equal(a.sort_values(["tier", "series_id", "timestamp"]).reset_index(drop=True),
                                  b.sort_values(["tier", "series_id", "timestamp"]).reset_index(drop=True),
                                  rtol=1e-9)


def test_a_series_that_raises_fails_only_itself(plan_run, fast_config, tmp_path, capsys, monkeypatch):
    """One series' search raises: it is listed under `failed`, the others are planned, exit code 3.
    On a copy of the session plan's store and models (same seed), so the forecasts are read, not fitted;
    ``--n-calls 4`` keys the search apart from the session's, so it runs."""
    import shutil

    from capplan.run.stages import search as search_stage
    from optimizer.search import tuning
    from tests.conftest import run_cli

    real = tuning.tune_policy

    def flaky(task):
        if task.series_id == "infer/azure-llm-conv":
            raise RuntimeError("simulated solver crash")
        return real(task)

    # the search's tuning half (with a store, search_cached runs it)
    monkeypatch.setattr(search_stage, "tune_policy", flaky)
    for d in ("store", "models"):  # a copy: the session plan's store stays as the dashboard tests expect
        shutil.copytree(fast_config.parent / d, tmp_path / d)
    cfg = tmp_path / "fast.yaml"
    cfg.write_text(FAST_CONFIG)
    out = tmp_path / "out"
    code, stdout, err = run_cli(["plan", "--config", str(cfg), "--executor", "local", "--n-calls", "4", "--seed", "7",
                                 "--series", "infer/azure-llm-conv", "--series", "infer/nasa-http", "--out", str(out),
                                 "--format", "json", "-q"], capsys)
    assert code == 3, err
    rep = json.loads(stdout)
    assert list(rep["series"]) == ["infer/nasa-http"]
    f = rep["failed"]["infer/azure-llm-conv"]
    assert f["stage"] == "search" and f["error"] == "RuntimeError: simulated solver crash"
    assert "infer/azure-llm-conv" in err and "failed" in err
    assert json.loads((out / "report.json").read_text())["failed"] == rep["failed"]
    assert rep["run"]["reuse"]["rolling_blocks"]["computed"] == 0  # the copied store's forecasts were read
