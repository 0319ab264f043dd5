"""Whether a change of code keeps a plan's figures: the same ``report.json`` figures, parquet files and manifests.

``python -m benchmarks same-figures --against REV`` plans the embedded sample twice with the same seed, once with the
code at git revision ``REV`` (checked out into a temporary worktree and put first on ``PYTHONPATH``) and once with the
working tree, each in its own folder with its own store and model registry, then compares the two output folders.
``--rev REV`` tests the code at another revision instead of the working tree (a refactor measured after later
changes landed); ``--old DIR --new DIR`` compares two folders already written. ``--plan-args`` passes options to
both plans (for example ``--quick`` or ``--series train/vc6YE``).

What may differ: run ids, timings, dates of the run, absolute paths, library-version and code-fingerprint fields
(:data:`VOLATILE_KEYS`, also as parquet columns), and lines of YAML that carry them. A text (a note, a description)
that differs only in wording, holding the same numbers in the same order, is counted apart. Everything else must be
equal: numbers in ``report.json``
within a relative tolerance of 1e-9 (the same code on the same seed is bit-identical; the tolerance only absorbs the
JSON float round trip), parquet frames cell by cell, manifests and ``policy.yaml`` line by line. A refactor that moves
code without changing method (the layout of the packages, a renamed module) must print ``same figures: yes``; the
benchmark exits 1 otherwise, listing the first differences.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.common import REPO

#: report keys whose values name the run rather than its figures
VOLATILE_KEYS = {"run_id", "created_at", "started_at", "finished_at", "duration_s", "seconds", "timings", "elapsed_s",
                 "stage_seconds", "store", "models", "out", "path", "versions", "code", "git", "hostname", "cwd",
                 "config_path", "generated_at", "wall_s", "cpu_s", "peak_rss_mb", "size_bytes"}
#: numbers in a line of text: two lines with the same numbers differ in wording only, not in figures
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
#: YAML lines that carry the run's identity (a run id, a generation time) rather than a figure
VOLATILE_LINE = re.compile(r"run[-_ ]?id|generated|created|capplan\.io/run|\d{8}T\d{6}Z")


def _wording(a: str, b: str) -> str:
    """`` (wording)`` when two differing texts hold the same numbers in the same order, else empty."""
    return WORDING if NUMBER.findall(a) == NUMBER.findall(b) else ""


WORDING = " (wording)"


def _walk(a, b, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in VOLATILE_KEYS:
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'new' if k not in a else 'old'}")
            else:
                _walk(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items against {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{path}[{i}]", out)
    elif isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and (a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12))):
            out.append(f"{path}: {a!r} against {b!r}")
    elif isinstance(a, str) and isinstance(b, str):
        if a != b and not VOLATILE_LINE.search(a):
            out.append(f"{path}: {a[:80]!r} against {b[:80]!r}" + _wording(a, b))
    elif a != b:
        out.append(f"{path}: {a!r} against {b!r}")


def compare(old: Path, new: Path) -> dict[str, list[str]]:
    """Differences between two plan output folders, per file (relative path -> descriptions; empty when equal).

    ``report.json`` is compared as data (:data:`VOLATILE_KEYS` left out), ``*.parquet`` as frames
    (``pandas.testing.assert_frame_equal``, exact), other text files line by line less :data:`VOLATILE_LINE` lines.
    A file present in one folder only is a difference."""
    diffs: dict[str, list[str]] = {}
    files = {p.relative_to(old) for p in old.rglob("*") if p.is_file()} | {
        p.relative_to(new) for p in new.rglob("*") if p.is_file()}
    for rel in sorted(files, key=str):
        a, b = old / rel, new / rel
        if not a.exists() or not b.exists():
            diffs[str(rel)] = [f"only in {'new' if not a.exists() else 'old'}"]
            continue
        out: list[str] = []
        if rel.name == "report.json":
            _walk(json.loads(a.read_text()), json.loads(b.read_text()), "report", out)
        elif rel.suffix == ".parquet":
            try:
                fa, fb = (pd.read_parquet(x) for x in (a, b))
                fa, fb = (f.drop(columns=[c for c in f.columns if c in VOLATILE_KEYS]) for f in (fa, fb))
                pd.testing.assert_frame_equal(fa, fb, check_exact=True)
            except AssertionError as exc:
                out.append(str(exc).splitlines()[0] + " " + " ".join(str(exc).splitlines()[1:4]))
        else:
            la = [ln for ln in a.read_text(errors="replace").splitlines() if not VOLATILE_LINE.search(ln)]
            lb = [ln for ln in b.read_text(errors="replace").splitlines() if not VOLATILE_LINE.search(ln)]
            out += [f"line {i + 1}: {x[:70]!r} against {y[:70]!r}" + _wording(x, y)
                    for i, (x, y) in enumerate(zip(la, lb)) if x != y]
            if len(la) != len(lb):
                out.append(f"{len(la)} lines against {len(lb)}")
        if out:
            diffs[str(rel)] = out
    return diffs


def _plan(code_root: Path | None, workdir: Path, plan_args: list[str]) -> Path:
    """Run ``capplan plan`` on the embedded sample in ``workdir`` (own store and models) with the code at
    ``code_root`` first on ``PYTHONPATH`` (None: the working tree); returns the output folder.
    Raises CalledProcessError when the plan fails."""
    env = dict(os.environ)
    if code_root is not None:
        env["PYTHONPATH"] = str(code_root) + os.pathsep + env.get("PYTHONPATH", "")
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "capplan", "plan", "--out", "out", "--store", "store", "-q", *plan_args],
                   cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL)
    return workdir / "out"


def main(argv: list[str] | None = None) -> None:
    """Plan at ``--against REV`` and at the working tree (or take ``--old``/``--new``), compare, print the verdict;
    exit 1 when the figures differ."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks same-figures", description=__doc__.splitlines()[0])
    ap.add_argument("--against", help="git revision whose plan is the reference (default: HEAD)", default="HEAD")
    ap.add_argument("--rev", help="git revision of the code under test (default: the working tree)")
    ap.add_argument("--old", type=Path, help="a reference output folder already written (skips planning)")
    ap.add_argument("--new", type=Path, help="an output folder already written by the code under test")
    ap.add_argument("--plan-args", default="", help="options for both plans, e.g. '--quick --series train/vc6YE'")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="capplan-same-figures-") as tmp:
        tmpd = Path(tmp)
        old, new = args.old, args.new
        if old is None:
            wt = tmpd / "code"
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(wt), args.against], cwd=REPO, check=True)
            try:
                old = _plan(wt, tmpd / "old", shlex.split(args.plan_args))
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=REPO, check=False)
        if new is None and args.rev:
            wt = tmpd / "code-new"
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(wt), args.rev], cwd=REPO, check=True)
            try:
                new = _plan(wt, tmpd / "new", shlex.split(args.plan_args))
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=REPO, check=False)
        if new is None:
            new = _plan(None, tmpd / "new", shlex.split(args.plan_args))
        diffs = compare(old, new)
        n_files = len({p.relative_to(old) for p in old.rglob("*") if p.is_file()})
        print(f"reference: {args.old or args.against}; under test: {args.new or args.rev or 'the working tree'}; "
              f"compared {n_files} files of the plan output")
        figures = {rel: [d for d in lines if not d.endswith(WORDING)] for rel, lines in diffs.items()}
        figures = {rel: lines for rel, lines in figures.items() if lines}
        wording = sum(d.endswith(WORDING) for lines in diffs.values() for d in lines)
        print(f"same figures: {'yes' if not figures else 'no'}; texts whose wording differs (same numbers): {wording}")
        for rel, lines in list(figures.items())[:20]:
            print(f"  {rel}: " + "; ".join(lines[:5]))
    if figures:
        raise SystemExit(1)
