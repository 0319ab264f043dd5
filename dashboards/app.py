"""capplan planning dashboard (Streamlit multipage app).

Start it with ``capplan dashboard`` (binds 127.0.0.1:8501 by default). Pages:
Fleet, Forecasts, Plan, Manifests, What-if. The sidebar picks the run (the
store's latest by default) and, unless the dashboard is read-only, can start a new
run on the sample or on a config (``capplan plan`` in a subprocess, writing into the
same store). See docs/dashboard.md for what the dashboard trusts.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # a checkout run with `streamlit run dashboards/app.py`
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from dashboards import common, jobs  # noqa: E402

PAGES = Path(__file__).resolve().parent / "views"  # not "pages/": that name turns on Streamlit's v1 page discovery

st.set_page_config(page_title="capplan", page_icon=":material/monitoring:", layout="wide")


def store_picker() -> None:
    """Pick among the known stores (``--store``/``--config``, ``--config-dir`` configs, the
    default) and list each one's runs, so a run written into another store is found."""
    stores = common.known_stores()
    listed = {p: common.paths.run_ids(p) for p, _ in stores}
    options = [str(p) for p, _ in stores]
    where = {str(p): w for p, w in stores}
    if st.session_state.get(common.STORE_KEY) not in options:
        st.session_state[common.STORE_KEY] = str(common.store_root())
    if len(options) > 1:
        st.selectbox("Store", options, key=common.STORE_KEY,
                     format_func=lambda p: f"{common.shown(p)} ({where[p]}, {len(listed[Path(p)])} runs)")
    with st.expander("Runs by store"):
        for p, w in stores:
            ids = sorted(listed[p], reverse=True)
            st.markdown(f"`{common.shown(p)}` ({w}): {len(ids)} run(s)"
                        + "".join(f"\n- `{r}`" for r in ids[:20]) + ("\n- …" if len(ids) > 20 else ""))


def sidebar() -> None:
    with st.sidebar:
        st.markdown("### capplan")
        store_picker()
    runs = common.runs_newest_first()
    latest, refused = common.latest_run()
    with st.sidebar:
        if runs:
            # a run that became LATEST since the last rerun is selected automatically
            if st.session_state.get("_seen_latest") != latest:
                st.session_state["_seen_latest"] = latest
                st.session_state[common.RUN_KEY] = latest or runs[0]
            if st.session_state.get(common.RUN_KEY) not in runs:
                st.session_state[common.RUN_KEY] = latest or runs[0]
            st.selectbox("Run", runs, key=common.RUN_KEY,
                         format_func=lambda r: f"{r} (latest)" if r == latest else r)
        else:
            st.caption("No run yet.")
        if refused:
            st.warning(refused)
        st.caption(f"Store: `{common.shown(common.store_root())}`")
        if common.read_only():
            st.caption("Read-only: runs are started with `capplan plan`.")
        else:
            jobs.new_run_form()


sidebar()
nav = st.navigation([
    st.Page(PAGES / "fleet.py", title="Fleet", icon=":material/dns:", default=True),
    st.Page(PAGES / "forecasts.py", title="Forecasts", icon=":material/timeline:", url_path="forecasts"),
    st.Page(PAGES / "plan.py", title="Plan", icon=":material/savings:", url_path="plan"),
    st.Page(PAGES / "manifests.py", title="Manifests", icon=":material/description:", url_path="manifests"),
    st.Page(PAGES / "whatif.py", title="What-if", icon=":material/tune:", url_path="what-if"),
])
nav.run()
