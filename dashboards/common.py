"""Shared state, data loading and formatting for the dashboard pages.

Where the data comes from: the store named by ``CAPPLAN_STORE``, else the
``store`` of the config in ``CAPPLAN_CONFIG``, else capplan's default store
(``capplan dashboard`` sets these from ``--store`` / ``--config``).

What it trusts: the store. Every run folder is checked by :mod:`dashboards.paths` before
a file of it is read (no link, nothing outside the store); with ``CAPPLAN_DASHBOARD_READ_ONLY``
(``capplan dashboard --read-only``) no run can be started and no absolute path is shown.

Caching: frames are cached with ``st.cache_data`` keyed on the run
folder, the ``report.json`` modification time and the series id, all hashable,
so a new run (a new folder, or ``LATEST`` moving) shows up on the next rerun
without restarting the app. The run list itself is read fresh on every rerun.
Loaded replay models (What-if) are cached with ``st.cache_resource``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from capplan.config.settings import CapplanConfig, load_config
from capplan.errors import InputError
from capplan.store.local import Store
from dashboards import paths
from dashboards.notes import NO_MIX, Note, md_escape, mix_table

if TYPE_CHECKING:
    from capplan.report.model import Report, SeriesReport

ENV_STORE = "CAPPLAN_STORE"
ENV_CONFIG = "CAPPLAN_CONFIG"
ENV_CONFIG_DIR = "CAPPLAN_CONFIG_DIR"
ENV_READ_ONLY = "CAPPLAN_DASHBOARD_READ_ONLY"
RUN_KEY = "capplan_run_id"
STORE_KEY = "capplan_store"
MIN_SCORE_POINTS = 24
"""Backtest scores on fewer scored points than this (one day of hourly points) are marked
as unreliable: a MASE on 3 points says little."""

COLORS = {"demand": "#1f2937", "recommended": "#2563eb", "baseline": "#f59e0b", "unmet": "rgba(220,38,38,0.45)",
          "whatif": "#16a34a", "hourly": "#7c3aed", "daily": "#0891b2", "weekly": "#db2777",
          "combined": "#2563eb", "band": "rgba(37,99,235,0.18)", "history": "#374151"}


# -- where ----------------------------------------------------------------------------
def read_only() -> bool:
    """True when the dashboard was started with ``--read-only``: no new runs, no absolute paths."""
    return os.environ.get(ENV_READ_ONLY, "") not in ("", "0", "false")


def shown(path: str | os.PathLike) -> str:
    """A server path as the page shows it: absolute, or only its last part in read-only mode."""
    return Path(path).name if read_only() else str(path)


def redacted(text: str) -> str:
    """A message for the page: in read-only mode the store's and config's absolute paths are
    cut to their last part (a capplan error names the file it read)."""
    if not read_only():
        return text
    for p in filter(None, [os.environ.get(ENV_STORE), config_path(), os.environ.get(ENV_CONFIG_DIR)]):
        for form in {str(Path(p)), str(Path(p).resolve())}:
            text = text.replace(form, Path(form).name)
    return text


def config_path() -> str | None:
    return os.environ.get(ENV_CONFIG) or None


def allowed_configs() -> list[str]:
    """The configs a new run may use: the dashboard's ``--config`` and the ``*.yaml``/``*.yml``
    files directly in its ``--config-dir``, as absolute paths. Nothing else on the server
    can be named from the browser (no arbitrary server paths)."""
    out = []
    if config_path():
        out.append(str(Path(config_path()).resolve()))
    d = os.environ.get(ENV_CONFIG_DIR)
    if d and Path(d).is_dir():
        out += sorted(str(p.resolve()) for p in Path(d).iterdir()
                      if p.is_file() and p.suffix in (".yaml", ".yml"))
    return list(dict.fromkeys(out))


@st.cache_resource(show_spinner=False)
def _config(path: str | None, mtime: float) -> CapplanConfig:
    return load_config(path) if path else CapplanConfig()


def config() -> CapplanConfig:
    """The dashboard's capplan config (defaults when none was given)."""
    p = config_path()
    mtime = Path(p).stat().st_mtime if p and Path(p).exists() else 0.0
    return _config(p, mtime)


def _configured_store() -> Path:
    env = os.environ.get(ENV_STORE)
    return Path(env).resolve() if env else Path(config().store).resolve()


@st.cache_resource(show_spinner=False)
def _config_store(path: str, mtime: float) -> tuple[str | None, str | None]:
    """``(store of the config at path, None)`` or ``(None, why it could not be read)``."""
    try:
        store = str(load_config(path).store)
    except InputError as exc:
        return None, str(exc)
    return (None, f"{path}: store {store} is not a local folder") if "://" in store else (store, None)


def known_stores() -> list[tuple[Path, str]]:
    """Every store the dashboard knows, as ``(absolute path, where it comes from)``, without
    repeats: ``--store`` (``CAPPLAN_STORE``) or the ``--config``'s store, the store of each
    config in ``--config-dir`` (a minimal config keeps its store next to itself), and
    capplan's default store. Nothing typed in the browser is ever one of them."""
    out: dict[Path, str] = {_configured_store(): "--store" if os.environ.get(ENV_STORE) else
                            ("--config" if config_path() else "default")}
    for cfg in allowed_configs():
        store, _ = _config_store(cfg, Path(cfg).stat().st_mtime)
        if store:
            out.setdefault(Path(store).resolve(), f"config {Path(cfg).name}")
    out.setdefault(Path(CapplanConfig().store).resolve(), "default")
    return list(out.items())


def store_root() -> Path:
    """The store the pages read: the one picked in the sidebar among :func:`known_stores`,
    else ``--store`` / the config's store / the default store."""
    picked = st.session_state.get(STORE_KEY)
    if picked and Path(picked) in {p for p, _ in known_stores()}:
        return Path(picked)
    return _configured_store()


def store() -> Store:
    return Store(store_root())


def runs_newest_first() -> list[str]:
    """Run ids in the store, newest first (run ids start with a UTC timestamp); run folders
    that are links or not plain names are left out (:func:`dashboards.paths.run_ids`)."""
    return sorted(paths.run_ids(store_root()), reverse=True)


def latest_run() -> tuple[str | None, str | None]:
    """``(run id of runs/LATEST, None)``, or ``(None, why LATEST was refused)`` (:func:`dashboards.paths.latest`)."""
    return paths.latest(store_root())


@dataclass(frozen=True)
class RunCtx:
    run_id: str
    run_dir: Path
    mtime: float  # report.json mtime: part of every cache key

    @property
    def key(self) -> tuple[str, float]:
        return str(self.run_dir), self.mtime


def current_run(stop_if_none: bool = True) -> RunCtx | None:
    """The run the user picked in the sidebar, else the store's latest run."""
    root = store_root()
    runs = paths.run_ids(root)
    rid = st.session_state.get(RUN_KEY)
    if rid not in runs:
        rid = latest_run()[0] or (max(runs) if runs else None)
    if rid is None:
        if stop_if_none:
            st.info(f"No run in the store `{shown(root)}` yet. "
                    + ("Start one with `capplan plan`." if read_only() else
                       "Start one from the sidebar (**New run**) or with `capplan plan`."))
            st.stop()
        return None
    try:
        d = paths.run_folder(root, rid)
    except InputError as exc:
        st.error(redacted(str(exc)))
        st.stop()
    rep = d / "report.json"
    if not rep.is_file():
        st.error(f"Run `{rid}` has no report.json (incomplete run folder `{shown(d)}`).")
        st.stop()
    return RunCtx(rid, d, rep.stat().st_mtime)


# -- data (cached on hashable keys) ------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=32)
def report(run_dir: str, mtime: float) -> "Report":
    """The run's ``report.json`` as the typed model (:class:`capplan.report.model.Report`), so a
    document of another shape fails here, not deep in a page; pages read its attributes."""
    from capplan.report.model import Report

    return Report.load(run_dir)


@st.cache_data(show_spinner=False, max_entries=32)
def raw_report(run_dir: str, mtime: float) -> dict:
    """The run's ``report.json`` as written (a dict): what :mod:`dashboards.notes` reads, so
    fields newer than the typed model (the purchase ``mix``) are seen."""
    return json.loads((Path(run_dir) / "report.json").read_text())


@st.cache_data(show_spinner=False, max_entries=32)
def frame(run_dir: str, mtime: float, name: str) -> pd.DataFrame:
    """A run's ``<name>.parquet`` (empty frame when the file is absent)."""
    p = Path(run_dir) / f"{name}.parquet"
    return pd.read_parquet(p) if p.exists() else pd.DataFrame()


@st.cache_data(show_spinner=False, max_entries=128)
def series_frame(run_dir: str, mtime: float, name: str, series_id: str) -> pd.DataFrame:
    f = frame(run_dir, mtime, name)
    if f.empty or "series_id" not in f:
        return f
    return f[f["series_id"] == series_id].reset_index(drop=True)


@st.cache_resource(show_spinner="Loading the replay model…", max_entries=16)
def whatif_model(run_dir: str, mtime: float, series_id: str, config_file: str | None):
    """The series' evaluation-window replay input (``capplan.backtest.whatif.WhatIf``)."""
    from capplan.backtest.whatif import load_whatif

    cfg = load_config(config_file) if config_file else CapplanConfig()
    return load_whatif(run_dir, series_id, cfg, store_root=str(store_root()))


# -- formatting ---------------------------------------------------------------------------
def pct(x, digits: int = 1) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.{digits}f}%"


def usd(x) -> str:
    return "n/a" if x is None or x != x else f"${x:,.0f}"


def usd_delta(x: float) -> str:
    """Signed money for ``st.metric`` deltas (the sign must lead for the arrow)."""
    return f"{'-' if x < 0 else '+'}${abs(x):,.0f}"


def unit_hours(unit: str) -> str:
    return "GPU-h" if unit == "gpu" else "replica-h"


def saving(rec: float | None, base: float | None) -> float:
    if not rec and rec != 0 or not base:
        return float("nan")
    return 1.0 - rec / base


def run_caption(ctx: RunCtx, rep: "Report") -> None:
    """Which run the page shows, and whether it is the fleet's published plan."""
    r = rep.run
    st.caption(f"Run `{ctx.run_id}` · source `{r.source}` · seed {r.seed} · "
               f"{len(rep.series)} series · store `{shown(store_root())}`")
    if r.series_filter:
        st.warning(f"Partial run: only {', '.join(r.series_filter)} (`--series`), "
                   + ("published as the fleet plan." if r.published else "not the fleet's published plan."))
    elif r.published is False:
        st.info("This run was not published: the fleet's plan is the store's latest run.")


def most_at_stake(rep: "Report") -> str | None:
    """The series with the highest recommended (else baseline) cost in USD: the one a
    page opens on (never on the smallest or weakest series by name)."""
    def cost(s: "SeriesReport") -> float:
        for m in (s.recommended, s.baseline):
            v = m.cost_usd
            if v is not None and v == v:
                return float(v)
        return float("-inf")

    series = rep.series
    return max(sorted(series), key=lambda sid: cost(series[sid])) if series else None


def page(title: str) -> tuple[RunCtx, "Report"]:
    """Start a run page: its header, the current run (stops if there is none), the
    run's report and its caption. Returns ``(run, report)``."""
    st.header(title)
    ctx = current_run()
    try:
        rep = report(*ctx.key)
    except InputError as exc:  # another version's or an edited report.json: say which and what to do
        st.error(redacted(str(exc)))
        st.stop()
    run_caption(ctx, rep)
    return ctx, rep


def series_picker(rep: "Report", key: str, label: str = "Series") -> str:
    """A series of the run (select box), opening on :func:`most_at_stake`; stops the page without series."""
    ids = sorted(rep.series)
    if not ids:
        st.warning("This run has no series.")
        st.stop()
    prev = st.session_state.get(key)
    if prev is not None and prev not in ids:
        del st.session_state[key]
    asked = st.query_params.get("series")
    if asked in ids and st.session_state.get(f"{key}_asked") != asked:  # a link such as plan?series=infer/x
        st.session_state[f"{key}_asked"] = asked
        st.session_state[key] = asked
    if key not in st.session_state:
        st.session_state[key] = most_at_stake(rep)
    return st.selectbox(label, ids, key=key, help="Opens on the series with the most at stake (highest cost), "
                        "or on the one named by the address's ?series=.")


def show_notes(notes: "list[Note]", n_series: int, per_series: bool = False) -> None:
    """The run's warnings, then its notes (stated fallbacks), one line each with whom it
    concerns (:class:`dashboards.notes.Note`); ``per_series``: the lines of one series page,
    without the list of series names."""
    warn = [n for n in notes if n.level == "warning"]
    other = [n for n in notes if n.level != "warning"]

    def line(n: "Note") -> str:
        who = "" if per_series and len(n.series) <= 1 else f"**{md_escape(n.who(n_series))}** — "
        shared = f" *(shared by {len(n.series)} series)*" if per_series and len(n.series) > 1 else ""
        return f"- {who}{md_escape(n.text)}{shared}"

    if warn:
        st.warning(f"**{len(warn)} warning(s)** to act on\n\n" + "\n".join(line(n) for n in warn),
                   icon=":material/warning:")
    else:
        st.success("No warning in this run." if not per_series else "No warning for this series.",
                   icon=":material/check_circle:")
    if other:
        with st.expander(f"{len(other)} note(s): stated fallbacks", expanded=per_series):
            st.markdown("\n".join(line(n) for n in other))


def show_mix(mix: dict | None, caption: str) -> None:
    """The purchase mix as a table (GPU-hours and USD, with shares), or "mix not recorded"."""
    if mix is None:
        st.info(NO_MIX)
        return
    st.caption(caption)
    st.table(mix_table(mix).set_index("purchase"))
