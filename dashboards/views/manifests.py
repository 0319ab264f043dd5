"""Manifests: every generated file with its validation status, a download button
per file and one for the whole set (zip)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboards import common as c
from dashboards.validation import run_files, validate_file

st.header("Manifests")
ctx = c.current_run()
rep = c.report(*ctx.key)
c.run_caption(ctx, rep)


@st.cache_data(show_spinner="Validating…")
def statuses(run_dir: str, mtime: float) -> list[dict]:
    d = Path(run_dir)
    out = []
    for p in run_files(d):
        rel = str(p.relative_to(d))
        s = validate_file(p, rel) if p.suffix in (".yaml", ".yml") else None
        out.append({"file": rel, "bytes": p.stat().st_size,
                    "status": ("valid" if s.ok else "invalid") if s else "not checked",
                    "checks": ", ".join(s.checks) if s else "", "problems": s.problems if s else []})
    return out


@st.cache_data(show_spinner=False)
def zipped(run_dir: str, mtime: float, files: tuple[str, ...]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            z.write(Path(run_dir) / f, f)
    return buf.getvalue()


rows = statuses(*ctx.key)
if not rows:
    st.warning("This run wrote no manifests.")
    st.stop()
n_bad = sum(r["status"] == "invalid" for r in rows)
n_ok = sum(r["status"] == "valid" for r in rows)
cols = st.columns(3)
cols[0].metric("Files", len(rows))
cols[1].metric("Valid", n_ok)
cols[2].metric("Invalid", n_bad)
table = pd.DataFrame([{"file": r["file"], "status": r["status"], "checks": r["checks"], "bytes": r["bytes"]}
                      for r in rows])
st.dataframe(table.style.map(lambda v: "color: #15803d; font-weight: 600" if v == "valid" else
                             "color: #b91c1c; font-weight: 600" if v == "invalid" else "", subset=["status"]),
             hide_index=True, width="stretch", key="man_table")

files = tuple(r["file"] for r in rows)
st.download_button("Download all (zip)", zipped(*ctx.key, files), file_name=f"capplan-{ctx.run_id}.zip",
                   mime="application/zip", key="man_zip", type="primary")

for r in rows:
    p = ctx.run_dir / r["file"]
    icon = {"valid": ":material/check_circle:", "invalid": ":material/error:"}.get(r["status"],
                                                                                  ":material/description:")
    with st.expander(f"{r['file']} — {r['status']}", expanded=r["status"] == "invalid", icon=icon):
        for prob in r["problems"]:
            st.error(prob)
        text = p.read_text(errors="replace")
        st.code(text, language="yaml" if p.suffix in (".yaml", ".yml") else "json")
        st.download_button(f"Download {p.name}", text, file_name=p.name, mime="application/x-yaml",
                           key=f"man_dl_{r['file']}")
