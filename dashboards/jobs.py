"""Start a new ``capplan plan`` run from the dashboard and follow it.

The run is the CLI (which calls :func:`capplan.pipeline.run_plan`) in a
subprocess, so a long run never blocks the app's server. It writes into the
dashboard's store: a temporary config carries the store path (and the
dashboard's or the chosen config's other settings). When it finishes, the
store's ``LATEST`` moves and the app shows the new run on the next rerun.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st
import yaml

from capplan.config import CapplanConfig, load_config
from dashboards import common


@dataclass
class Job:
    args: list[str]
    log: Path
    out: Path
    proc: subprocess.Popen
    started: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))

    @property
    def rc(self) -> int | None:
        return self.proc.poll()

    def tail(self, n: int = 12) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


@st.cache_resource(show_spinner=False)
def _registry() -> dict[str, Job]:
    """Jobs of this server process (shared by sessions; survives reruns)."""
    return {}


def sample_series() -> list[str]:
    import json

    from capplan.sources.sample import sample_dir

    try:
        return sorted(json.loads((sample_dir() / "series.json").read_text()))
    except OSError:
        return []


def start_job(source: str, config_file: str | None, series: list[str], n_calls: int, fast: bool,
              seed: int = 0) -> Job:
    """Launch ``capplan plan`` writing into the dashboard's store.

    Raises capplan.errors.InputError when ``config_file`` is invalid.
    """
    cfg = load_config(config_file) if config_file else CapplanConfig()
    cfg.store = str(common.store_root())
    cfg.plan.n_calls = int(n_calls)
    if fast:
        cfg.forecast.lstm_epochs = min(cfg.forecast.lstm_epochs, 2)
        cfg.forecast.lstm_max_windows = min(cfg.forecast.lstm_max_windows, 500)
        cfg.forecast.prophet_samples = min(cfg.forecast.prophet_samples, 100)
    work = Path(tempfile.mkdtemp(prefix="capplan-dash-run-"))
    cfg_file = work / "capplan.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    args = [sys.executable, "-m", "capplan", "plan", "--config", str(cfg_file), "--out", str(work / "out"),
            "--seed", str(seed)]
    if source == "sample":
        args += ["--source", "sample"]
    for s in series:
        args += ["--series", s]
    log = work / "run.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(work))
    job = Job(args, log, work / "out", proc)
    _registry()[str(proc.pid)] = job
    return job


def new_run_form() -> None:
    """The sidebar's **New run** expander and the status of the running job."""
    reg = _registry()
    running = {k: j for k, j in reg.items() if j.rc is None}
    with st.expander("New run", expanded=False):
        source = st.radio("Source", ["sample", "config"], horizontal=True, key="newrun_source",
                          help="sample: the embedded real traces; config: a capplan.yaml (its series "
                               "and Prometheus, or the sample when it names none)")
        cfg_file = None
        series: list[str] = []
        if source == "config":
            cfg_file = st.text_input("Config file", value=common.config_path() or "", key="newrun_config")
        else:
            series = st.multiselect("Series (empty: all)", sample_series(), key="newrun_series")
        n_calls = st.number_input("Policy evaluations per search", min_value=4, max_value=200, value=12,
                                  key="newrun_ncalls")
        fast = st.checkbox("Fast (fewer LSTM epochs and Prophet samples)", value=True, key="newrun_fast")
        if st.button("Start run", key="newrun_start", disabled=bool(running)):
            if source == "config" and not cfg_file:
                st.error("Give a config file.")
            else:
                try:
                    job = start_job(source, cfg_file or None, series, n_calls, fast)
                    st.session_state["_job"] = str(job.proc.pid)
                except Exception as exc:  # InputError and friends: show, don't crash the app
                    st.error(f"Could not start: {exc}")
    jid = st.session_state.get("_job")
    if jid and jid in reg:
        if st.session_state.get("_job_done") == jid:  # finished and shown: no more polling
            job = reg[jid]
            if job.rc == 0:
                st.success("Run finished: it is now the latest run.")
            else:
                st.error(f"Run failed (exit {job.rc}).")
                st.code(job.tail(12), language=None)
        else:
            _job_status(jid)


@st.fragment(run_every=3)
def _job_status(jid: str) -> None:
    job = _registry().get(jid)
    if job is None:
        return
    rc = job.rc
    if rc is None:
        secs = (dt.datetime.now(dt.timezone.utc) - job.started).total_seconds()
        st.info(f"Run in progress ({secs:.0f} s)…")
        st.code(job.tail(6) or "starting…", language=None)
    elif rc == 0:
        import shutil

        shutil.rmtree(job.out, ignore_errors=True)  # the run was copied into the store
        st.success("Run finished: it is now the latest run.")
        if st.session_state.get("_job_done") != jid:
            st.session_state["_job_done"] = jid
            st.rerun(scope="app")
    else:
        st.session_state["_job_done"] = jid
        st.rerun(scope="app")
