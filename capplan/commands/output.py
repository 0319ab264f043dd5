"""What every command shares for its result: ``--format table|json|yaml|csv``,
``--output FILE`` and ``--series a,b`` (as krr users expect).

* ``json`` — the command's document, strict JSON (:mod:`capplan.jsonout`);
* ``yaml`` — the same document as YAML (``yaml.safe_dump`` of that JSON);
* ``csv`` — one row per series and policy (or per the command's row unit), with
  a header line;
* ``table`` — the rich table, fitted to the terminal (:mod:`capplan.table`).

With ``--output FILE`` the result is written there atomically
(:func:`capplan.atomic.write_text`; a table without colours, 160 columns)
instead of stdout.
"""

from __future__ import annotations

import csv
import io
import json
from enum import Enum
from pathlib import Path
from typing import Callable

import yaml
from rich.console import Console

from capplan import atomic, jsonout

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
    """
    if not values:
        return None
    ids = [s.strip() for v in values for s in str(v).split(",") if s.strip()]
    return list(dict.fromkeys(ids)) or None


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
