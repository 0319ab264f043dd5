"""Start a new ``capplan plan`` run from the dashboard and follow it.

The run is the CLI (which calls :func:`capplan.run.pipeline.run_plan`) in a
subprocess, so a long run never blocks the app's server. It writes into the
dashboard's store: a temporary config carries the store path (and the
dashboard's or the chosen config's other settings). A run of every series is
published (``--publish``: the store's ``LATEST`` moves and the app shows it on
the next rerun); a run of chosen series is saved but not published, and is
selected in the sidebar's run list.

Only configs of :func:`dashboards.common.allowed_configs` (the dashboard's
``--config`` and its ``--config-dir``) can be chosen: the browser never names
a server path. The temporary folder (``capplan-dash-run-<server pid>-*``) is
removed when the run ends, failed or not (a reaper thread keeps the log's
tail); folders of a dashboard server that died are removed at the next start.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st
import yaml

from capplan.config.settings import CapplanConfig, load_config
from capplan.errors import InputError
from dashboards import common

WORK_PREFIX = "capplan-dash-run-"


@dataclass
class Job:
    args: list[str]
    log: Path
    out: Path
    proc: subprocess.Popen
    started: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    published: bool = True
    final_tail: str | None = None  # the log's last lines, kept when the folder is removed

    @property
    def rc(self) -> int | None:
        return self.proc.poll()

    def tail(self, n: int = 12) -> str:
        if self.final_tail is not None:
            return "\n".join(self.final_tail.splitlines()[-n:])
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _reap(job: Job) -> None:
    """Wait for the run, keep its log's tail, remove its temporary folder."""
    job.proc.wait()
    job.final_tail = job.tail(40)
    shutil.rmtree(job.log.parent, ignore_errors=True)


def clean_orphans(tmp: str | None = None) -> list[Path]:
    """Remove ``capplan-dash-run-<pid>-*`` folders of dashboard servers that are gone."""
    removed = []
    for d in Path(tmp or tempfile.gettempdir()).glob(f"{WORK_PREFIX}*"):
        m = re.match(rf"{WORK_PREFIX}(\d+)-", d.name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        except PermissionError:
            pass
    return removed


@st.cache_resource(show_spinner=False)
def _registry() -> dict[str, Job]:
    """Jobs of this server process (shared by sessions; survives reruns)."""
    clean_orphans()
    return {}


def sample_series() -> list[str]:
    import json

    from capplan.sources.sample import sample_dir

    try:
        return sorted(json.loads((sample_dir() / "series.json").read_text()))
    except OSError:
        return []


def start_job(source: str, config_file: str | None, series: list[str], n_calls: int, quick: bool,
              seed: int = 0) -> Job:
    """Launch ``capplan plan`` writing into the dashboard's store (``--publish`` when
    ``series`` is empty: a run of every series becomes the fleet plan). ``quick`` adds ``--quick``
    (:func:`capplan.config.quick.apply_quick`, the CLI's first-look preset; it caps ``n_calls`` too).

    Raises capplan.errors.InputError in read-only mode, when ``config_file`` is not one of
    :func:`dashboards.common.allowed_configs` or is invalid (the message never
    shows file content).
    """
    if common.read_only():
        raise InputError("this dashboard is read-only (--read-only): start runs with capplan plan")
    if config_file and str(Path(config_file).resolve()) not in common.allowed_configs():
        raise InputError("that config is not one this dashboard offers (start it with --config FILE or "
                         "--config-dir DIR)")
    cfg = load_config(config_file) if config_file else CapplanConfig()
    cfg.store = str(common.store_root())
    cfg.plan.n_calls = int(n_calls)
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    cfg_file = work / "capplan.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    args = [sys.executable, "-m", "capplan", "plan", "--config", str(cfg_file), "--out", str(work / "out"),
            "--seed", str(seed)] + (["--quick"] if quick else [])
    if source == "sample":
        args += ["--source", "sample"]
    for s in series:
        args += ["--series", s]
    args += ["--no-publish"] if series else ["--publish"]
    log = work / "run.log"
    try:
        with log.open("w") as fh:
            proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=str(work))
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    job = Job(args, log, work / "out", proc, published=not series)
    _registry()[str(proc.pid)] = job
    if hasattr(proc, "wait"):
        threading.Thread(target=_reap, args=(job,), daemon=True, name=f"capplan-reap-{proc.pid}").start()
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
        allowed = common.allowed_configs()
        if source == "config":
            if allowed:
                cfg_file = st.selectbox("Config", allowed, key="newrun_config",
                                        help="The dashboard's --config and the files of its --config-dir.")
            else:
                st.caption("No config offered: start the dashboard with `--config FILE` or `--config-dir DIR`.")
        else:
            series = st.multiselect("Series (empty: all)", sample_series(), key="newrun_series")
        n_calls = st.number_input("Policy evaluations per search", min_value=4, max_value=200, value=12,
                                  key="newrun_ncalls")
        quick = st.checkbox("Quick (capplan plan --quick: a smaller search and forecast, figures for a first look)",
                            value=True, key="newrun_quick")
        if st.button("Start run", key="newrun_start", disabled=bool(running)):
            if source == "config" and not cfg_file:
                st.error("No config to run on: start the dashboard with --config FILE or --config-dir DIR.")
            else:
                try:
                    job = start_job(source, cfg_file or None, series, n_calls, quick)
                    st.session_state["_job"] = str(job.proc.pid)
                except Exception as exc:  # InputError and friends: show, don't crash the app
                    st.error(f"Could not start: {exc}")
    jid = st.session_state.get("_job")
    if jid and jid in reg:
        if st.session_state.get("_job_done") == jid:  # finished and shown: no more polling
            job = reg[jid]
            if job.rc == 0:
                st.success(_finished(job))
            else:
                st.error(f"Run failed (exit {job.rc}).")
                st.code(job.tail(12), language=None)
        else:
            _job_status(jid)


def _finished(job: Job) -> str:
    if job.published:
        return "Run finished: it is now the latest run (the fleet plan)."
    return ("Run finished and saved in the store, not published (it covers only the chosen series): "
            "pick it in the Run list; the fleet plan is unchanged.")


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
        st.success(_finished(job))
        if st.session_state.get("_job_done") != jid:
            st.session_state["_job_done"] = jid
            st.rerun(scope="app")
    else:
        st.session_state["_job_done"] = jid
        st.rerun(scope="app")
