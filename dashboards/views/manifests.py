"""Manifests: every file that ``capplan export --validate`` reads in the run folder
(:func:`capplan.report.validation.folder_files`: the manifests and the JSON data files such as
report.json, so both count the same files), with its validation status, a download
button per file and one for the whole set (zip)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pandas as pd
import streamlit as st

from capplan.report.validation import CROSS_FILE_RULES, file_statuses, validate_folder
from dashboards import common as c
from dashboards import paths

ctx, rep = c.page("Manifests")


@st.cache_data(show_spinner="Validating…")
def statuses(run_dir: str, mtime: float) -> tuple[list[dict], list[str]]:
    """(one row per generated file, folder-level findings) from capplan's validator."""
    d = Path(run_dir)
    problems = validate_folder(d, c.config().export)
    rows = [{"file": s.file, "bytes": paths.inside(d, s.file).stat().st_size, "status": s.status,
             "problems": [f"{p.path or '.'}: [{p.rule}] {p.message}" for p in s.problems]}
            for s in file_statuses(d, problems)]
    return rows, [str(p) for p in problems if p.rule in CROSS_FILE_RULES]


@st.cache_data(show_spinner=False)
def zipped(run_dir: str, mtime: float, files: tuple[str, ...]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            z.write(paths.inside(Path(run_dir), f), f)
    return buf.getvalue()


rows, folder_problems = statuses(*ctx.key)
if not rows:
    st.warning("This run wrote no manifests.")
    st.stop()
n_bad = sum(r["status"] == "invalid" for r in rows)
n_ok = sum(r["status"] == "valid" for r in rows)
cols = st.columns(4)
cols[0].metric("Files", len(rows))
cols[1].metric("Valid", n_ok)
cols[2].metric("Invalid", n_bad)
cols[3].metric("Not checked", len(rows) - n_ok - n_bad)
st.caption("The files `capplan export --validate` counts in this run folder: Kubernetes and KEDA/Volcano "
           "manifests are validated; JSON data files without an apiVersion (report.json) are listed, not checked.")
for prob in folder_problems:
    st.warning(prob)
table = pd.DataFrame([{"file": r["file"], "status": r["status"], "problems": len(r["problems"]),
                       "bytes": r["bytes"]} for r in rows])
st.dataframe(table.style.map(lambda v: "color: #15803d; font-weight: 600" if v == "valid" else
                             "color: #b91c1c; font-weight: 600" if v == "invalid" else "", subset=["status"]),
             hide_index=True, width="stretch", key="man_table")

files = tuple(r["file"] for r in rows)
st.download_button("Download all (zip)", zipped(*ctx.key, files), file_name=f"capplan-{ctx.run_id}.zip",
                   mime="application/zip", key="man_zip", type="primary")

for r in rows:
    p = paths.inside(ctx.run_dir, r["file"])  # the run was checked (no link in it); each name is, again
    icon = {"valid": ":material/check_circle:", "invalid": ":material/error:"}.get(r["status"],
                                                                                  ":material/description:")
    with st.expander(f"{r['file']} — {r['status']}", expanded=r["status"] == "invalid", icon=icon):
        for prob in r["problems"]:
            st.error(prob)
        text = p.read_text(errors="replace")
        st.code(text, language="yaml" if p.suffix in (".yaml", ".yml") else "json")
        st.download_button(f"Download {p.name}", text, file_name=p.name,
                           mime="application/json" if p.suffix == ".json" else "application/x-yaml",
                           key=f"man_dl_{r['file']}")
