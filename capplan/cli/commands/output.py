"""What every command shares for its result: ``--format table|json|yaml|csv``,
``--output FILE`` and ``--series a,b`` (as krr users expect).

* ``json`` — the command's document, strict JSON (:mod:`capplan.report.jsonout`);
* ``yaml`` — the same document as YAML (``yaml.safe_dump`` of that JSON);
* ``csv`` — one row per series and policy (or per the command's row unit), with
  a header line;
* ``table`` — the rich table, fitted to the terminal (:mod:`capplan.cli.table`).

With ``--output FILE`` the result is written there atomically
(:func:`capplan.store.atomic.write_text`; a table without colours, 160 columns)
instead of stdout.
"""

from __future__ import annotations

import csv
import io
import json
import os
from enum import Enum
from pathlib import Path
from typing import Callable

import yaml
from rich.console import Console

from capplan.errors import InputError
from capplan.report import jsonout
from capplan.store import atomic
from optimizer.exporters import is_own_file

FILE_WIDTH = 160


class Format(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"
    csv = "csv"


FORMAT_HELP = "table (human), json, yaml (the whole document) or csv (one row per series and policy)."
OUTPUT_HELP = "Write the result to this file instead of stdout."
SERIES_HELP = "Only these series ids: repeat the flag or separate ids with commas (--series a,b)."


def split_ids(values: list[str] | None) -> list[str] | None:
    """``--series`` values, repeated and/or comma-separated, as one list (None when not given).

    ``["a,b", "c"]`` -> ``["a", "b", "c"]``; blanks are dropped, order and first occurrence kept.
    Raises InputError when ``--series`` was given but names no id (``--series ''``): that
    never means "every series".
    """
    if values is None or values == []:
        return None
    ids = [s.strip() for v in values for s in str(v).split(",") if s.strip()]
    if not ids:
        raise InputError("--series: no series id given; name one (--series train/vc6YE) or leave the flag out "
                         "to plan every series")
    return list(dict.fromkeys(ids))


#: what a capplan output folder holds at its top: a folder holding one of these (or an empty
#: one) may be replaced by ``--out``; anything else is refused (check_out_dir)
OUTPUT_MARKERS = ("report.json", "policy.yaml")
PLAN_FILES = ("forecasts.parquet", "trials.parquet", "replay.parquet", "backtest.parquet", "history.parquet",
              "history_native.parquet", "fleet.parquet")  # what `capplan plan` writes beside report.json and the
# exports (fleet.parquet: with a fleet only)


def source_file(source: str | None) -> Path | None:
    """The file of a ``--source csv:F`` / ``parquet:F`` spec; None for any other source."""
    kind, _, arg = (source or "").partition(":")
    return Path(arg) if kind in ("csv", "parquet") and arg else None


def first_few(names: list[str], n: int = 5) -> str:
    """``a, b, c`` for an error message: the first ``n`` names, then ``and K more``."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def check_out_dir(path: Path, option: str = "--out", source: str | None = None) -> None:
    """Refuse an output folder that the run's atomic swap (:func:`capplan.store.atomic.replace_dir`)
    would destroy or cannot create, before any data is read.

    Raises InputError when ``path`` is a symlink or a file, a non-empty folder that is not a previous
    capplan output (none of :data:`OUTPUT_MARKERS` at its top, e.g. a home folder or the
    store), a folder holding the ``--source`` file (``csv:F`` / ``parquet:F``), or when its
    parent cannot be created or written.
    """
    p = Path(path)
    if p.is_symlink():  # the swap would replace the link by a folder (capplan.store.atomic.replace_dir)
        raise InputError(f"{option} {p}: is a symlink; the run replaces the whole folder, which would replace the "
                         "link, not fill the folder it names: name the folder itself")
    src = source_file(source)
    if src is not None and p.is_dir() and p.resolve() in src.resolve().parents:
        raise InputError(f"{option} {p}: holds the --source file {src}, and the run replaces the whole folder; "
                         "name another folder or move the input out of it")
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} {p}: is a file; name a new folder or a previous capplan output folder")
    if p.is_dir() and any(p.iterdir()) and not any((p / m).is_file() for m in OUTPUT_MARKERS):
        raise InputError(f"{option} {p}: the folder holds files that are not a capplan output (no "
                         f"{' or '.join(OUTPUT_MARKERS)}), and the run replaces the whole folder; name a new "
                         "or empty folder")
    foreign = _foreign_files(p)
    if foreign:
        raise InputError(f"{option} {p}: a previous capplan output that also holds {len(foreign)} file(s) capplan "
                         f"did not write ({first_few(foreign)}), and the run replaces the whole folder; move them out "
                         "or name another folder")
    _writable_parent(p, option, create=True)


def check_subset_overwrite(path: Path, ids: list[str] | None, force: bool = False, option: str = "--out") -> None:
    """Refuse to replace a fuller plan with a subset: a run limited to ``ids`` (``--series``) whose output
    folder ``path`` holds a previous plan (its ``report.json``) of series that ``ids`` leaves out would drop
    them from ``path`` silently. Nothing to check for a run of every series (``ids`` None), with ``force``,
    or when ``path`` holds no readable report.

    Raises InputError (exit 2) naming the folder, how many series it holds and which the run leaves out,
    and the two ways on: ``--out OTHER`` (a new folder) or ``--force`` (replace it).
    """
    if ids is None or force:
        return
    try:
        doc = json.loads((Path(path) / "report.json").read_text(encoding="utf-8"))
        held = list((doc.get("series") or {}).keys())
        run_id = (doc.get("run") or {}).get("run_id", "")
    except (OSError, ValueError, AttributeError):
        return
    dropped = [s for s in held if s not in set(ids)]
    if dropped:
        raise InputError(f"{option} {path}: holds a plan of {len(held)} series{f' (run {run_id})' if run_id else ''}, "
                         f"and this run plans {len(ids)} (--series), which would replace it without "
                         f"{first_few(dropped)}; write the subset elsewhere (--out OTHER) or replace the folder "
                         "(--force)")


def _foreign_files(p: Path) -> list[str]:
    """Files under a previous output folder ``p`` (paths relative to it) that capplan did not write:
    those its ``report.json`` does not list in ``run.files``; without a readable list (an export
    folder, another tool's or a broken ``report.json``), every file but capplan's own exports
    (:func:`optimizer.exporters.is_own_file`) and the plan's data files (:data:`PLAN_FILES`)."""
    files = sorted(f.relative_to(p).as_posix() for f in p.rglob("*") if f.is_file())
    try:
        run = json.loads((p / "report.json").read_text(encoding="utf-8"))["run"]
        listed, ours = run.get("files"), bool(run.get("run_id"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        listed, ours = None, False
    if isinstance(listed, list) and listed:
        known = {str(f) for f in listed} | {"report.json"}
        return [f for f in files if f not in known]
    mine = set(PLAN_FILES) | ({"report.json"} if ours else set())  # a capplan report without a file list
    return [f for f in files if f not in mine and not is_own_file(p, f)]


def _writable_parent(p: Path, option: str, create: bool) -> None:
    """Raise InputError unless ``p``'s folder exists (made first with ``create``) and is writable."""
    parent = p.resolve().parent
    if create:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{option} {p}: cannot create {parent} ({exc.strerror or exc})") from None
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {p}: {parent} is not a writable folder")


def check_output_file(path: Path | None, source: str | None = None, config: Path | None = None) -> None:
    """``--output FILE``: refuse a folder, an unwritable place, or an input of the command: the
    ``--source`` file (``csv:F`` / ``parquet:F``) or the ``--config`` file, which writing the
    result would destroy, before any work (InputError)."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"--output {p}: is a folder; name a file")
    inputs = {"--source": source_file(source), "--config": config}
    for option, f in inputs.items():
        if f is not None and p.exists() and Path(f).exists() and p.samefile(f):
            raise InputError(f"--output {p}: is the {option} file; writing the result there would destroy the input: "
                             "name another file")
    _writable_parent(p, "--output", create=False)


def to_csv(rows: list[dict]) -> str:
    """CSV text with a header of every key seen, in first-seen order."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(jsonout.clean(r))
    return buf.getvalue()


def render(fmt: Format, doc, rows: Callable[[], list[dict]], table: Callable[[Console], None],
           console: Console, output: Path | None = None) -> None:
    """Print (or write to ``output``) the result in ``fmt``; ``table(console)`` prints the table view."""
    if fmt is Format.table:
        if output is None:
            table(console)
            return
        c = Console(file=io.StringIO(), width=FILE_WIDTH, color_system=None, force_terminal=False)
        table(c)
        text = c.file.getvalue()
    elif fmt is Format.json:
        text = jsonout.dumps(doc, indent=2) + "\n"
    elif fmt is Format.yaml:
        text = yaml.safe_dump(json.loads(jsonout.dumps(doc)), sort_keys=False, allow_unicode=True)
    else:
        text = to_csv(rows())
    if output is None:
        console.file.write(text)
        console.file.flush()
    else:
        atomic.write_text(output, text)
