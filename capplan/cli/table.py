"""Tables that fit the terminal: numbers stay whole; columns are dropped or wrapped.

:func:`fit_table` measures every cell. Numeric columns never wrap or truncate
(``no_wrap``, ``min_width`` = their widest cell). While the table is wider than
the console, the column with the highest ``drop`` rank goes (0 = never drop),
and text columns may fold onto several lines down to ``min_width``. The caller
prints the names of the dropped columns under the table, so a user knows where
to find them (``--format json|yaml|csv`` has them all).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

BORDER = 3  # rich's default box: one separator and one space of padding each side per column
EDGE = 1


@dataclass
class Column:
    """One column: ``header``; ``numeric`` (right-aligned, never wrapped); ``drop`` rank
    (higher goes first when the table is too wide; 0 = always kept); ``min_width`` for
    text columns that may fold."""

    header: str
    numeric: bool = False
    drop: int = 0
    min_width: int = 8


def _width(cell: str) -> int:
    return max((Text.from_markup(line).cell_len for line in str(cell).splitlines() or [""]), default=0)


def fit_columns(columns: list[Column], rows: list[list[str]], width: int) -> list[int]:
    """Indices of the columns kept so that the table fits ``width`` characters."""
    natural = [max([_width(c.header)] + [_width(r[i]) for r in rows]) for i, c in enumerate(columns)]
    # a header may wrap onto two lines at spaces; numbers may not
    need = [max(n if c.numeric else min(n, c.min_width), max(map(len, c.header.split())) if c.header else 0)
            for c, n in zip(columns, natural)]
    keep = list(range(len(columns)))

    def total(ix):
        return sum(need[i] + BORDER for i in ix) + EDGE

    while total(keep) > width:
        droppable = [i for i in keep if columns[i].drop > 0]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    return keep


def fit_table(title: str, columns: list[Column], rows: list[list[str]], width: int) -> tuple[Table, list[str]]:
    """A rich Table of the columns that fit ``width``, and the headers of those dropped."""
    keep = fit_columns(columns, rows, width)
    natural = [max([_width(columns[i].header)] + [_width(r[i]) for r in rows]) for i in keep]
    t = Table(title=title, title_justify="left", expand=False)
    for i, n in zip(keep, natural):
        c = columns[i]
        if c.numeric:
            t.add_column(c.header, justify="right", no_wrap=True, min_width=n)
        else:
            t.add_column(c.header, justify="left", overflow="fold", min_width=min(n, c.min_width))
    for r in rows:
        t.add_row(*[r[i] for i in keep])
    return t, [columns[i].header for i in range(len(columns)) if i not in keep]
