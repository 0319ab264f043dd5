"""The notes under the plan table, read in one pass: grouped across series and
ordered by what the user must act on.

A run's notes are its series' ``warnings`` and ``fallbacks`` (report.json). Printed
one per series they repeat: a cluster-wide outage gives the same note for every
pool. :func:`group_notes` folds

* a note whose text is the same for several series into one :class:`Note` that
  names them ("12 pools: regularise: 311 points ... marked missing");
* the same fallback of the rolling backtest and of the plan (``backtest: X`` and
  ``plan: X``) into one ``backtest and plan: X``;

and orders the result by :data:`RANKS`: first what needs action (the warnings:
quota, coverage, a placeholder Prometheus address, ``policy:``/``export:``/``data:``
findings), then which policy the manifests carry (``policy:`` fallbacks; a rival that was
cheaper by less than the days' noise leaves the searched policy in them, so that note is
information), then the informational fallbacks, the most widely shared first. :func:`fold_informational`
keeps the printed list short: when there are more informational notes than the
budget allows, a series' single-series informational notes become one line that
names their stages and points at ``--verbose`` (which prints every note per series,
ungrouped: nothing is lost).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optimizer.rivals.judge import RULE_KEPT, SEARCHED_KEPT

#: rank -> heading; lower ranks print first
RANKS = {0: "Act on", 1: "Which policy the manifests carry", 2: "For information"}
#: warnings with these prefixes print without --verbose (the others are forecast diagnostics)
SHOWN_WARNINGS = ("policy:", "export:", "data:", "risk:")
#: fallbacks of the same step in the rolling backtest and in the plan fold into one note
PAIRED_STAGES = ("backtest: ", "plan: ")
#: the text of a note that stands for several folded ones
MORE = "more notes "


NAMED = 20
"""Series a grouped note names at most; the others are counted (``--verbose`` lists every note per series)."""


@dataclass
class Note:
    """One printed note: ``text`` (without a series prefix), the ``series`` it concerns
    (report order), its ``rank`` (:data:`RANKS`) and whether it is a ``warning``."""

    text: str
    series: list[str] = field(default_factory=list)
    rank: int = 2
    warning: bool = False

    def line(self, kinds: dict[str, str]) -> str:
        """``"12 pools: text"`` (or ``"SERIES: text"`` for one series); ``kinds``: series id
        -> ``training`` | ``inference``, which names the group (pools, services, series)."""
        if not self.series:  # a fleet note that names its series in its text
            return self.text
        if len(self.series) == 1:
            return f"{self.series[0]}: {self.text}"
        ks = {kinds.get(s) for s in self.series}
        noun = "pools" if ks == {"training"} else "services" if ks == {"inference"} else "series"
        shown = ", ".join(self.series[:NAMED]) + (f", and {len(self.series) - NAMED} more"
                                                   if len(self.series) > NAMED else "")
        return f"{len(self.series)} {noun} ({shown}): {self.text}"


def rank(text: str, warning: bool) -> int:
    """The :data:`RANKS` key of a note."""
    if warning:
        return 0
    return 1 if text.startswith("policy:") and not text.endswith((SEARCHED_KEPT, RULE_KEPT)) else 2


def series_notes(report, verbose: bool = False) -> list[tuple[str, str, bool]]:
    """``(series id, text, is_warning)`` for every note of ``report`` (a
    :class:`capplan.report.model.Report`), in report order, warnings first per series; the
    series prefix a source's note may carry is removed. Without ``verbose`` only the
    warnings of :data:`SHOWN_WARNINGS` are kept."""
    rows = []
    for sid, s in report.series.items():
        rows += [(sid, w.removeprefix(sid + ": "), True) for w in s.warnings
                 if verbose or w.startswith(SHOWN_WARNINGS)]
        rows += [(sid, f.removeprefix(sid + ": "), False) for f in s.fallbacks]
    return rows


def group_notes(rows: list[tuple[str, str, bool]]) -> list[Note]:
    """Rows of :func:`series_notes` as grouped, ordered :class:`Note` s (module docstring)."""
    by_text: dict[tuple[str, bool], Note] = {}
    for sid, text, warning in rows:
        n = by_text.setdefault((text, warning), Note(text, [], rank(text, warning), warning))
        if sid not in n.series:
            n.series.append(sid)
    notes = list(by_text.values())
    merged: list[Note] = []
    for n in notes:
        if n.text.startswith(PAIRED_STAGES[1]):
            twin = by_text.get((PAIRED_STAGES[0] + n.text.removeprefix(PAIRED_STAGES[1]), n.warning))
            if twin is not None and twin.series == n.series:
                continue  # folded into its backtest twin below
        if n.text.startswith(PAIRED_STAGES[0]):
            rest = n.text.removeprefix(PAIRED_STAGES[0])
            twin = by_text.get((PAIRED_STAGES[1] + rest, n.warning))
            if twin is not None and twin.series == n.series:
                n = Note("backtest and plan: " + rest, n.series, n.rank, n.warning)
        merged.append(n)
    order = {id(n): i for i, n in enumerate(merged)}
    return sorted(merged, key=lambda n: (n.rank, n.text.startswith("risk:"), -len(n.series) if n.rank == 2 else 0,
                                         order[id(n)]))


def _stage(text: str) -> str:
    return text.split(":", 1)[0] if ":" in text else "note"


def fold_informational(notes: list[Note], budget: int) -> tuple[list[Note], bool]:
    """At most ``budget`` notes when it can be done by folding: every note of rank 0 and 1
    is kept; while over budget, the series with the most single-series informational
    notes has them replaced by one note "N more notes (stages: ...)". Returns the notes
    and whether anything was folded (the caller then points at ``--verbose``)."""
    notes = list(notes)
    folded = False
    while len(notes) > budget:
        singles: dict[str, list[Note]] = {}
        for n in notes:
            if n.rank == 2 and len(n.series) == 1 and not n.text.startswith(MORE):
                singles.setdefault(n.series[0], []).append(n)
        sid, group = max(singles.items(), key=lambda kv: len(kv[1]), default=(None, []))
        if len(group) < 2:
            break
        stages = ", ".join(dict.fromkeys(_stage(n.text) for n in group))
        first = notes.index(group[0])
        notes = [n for n in notes if n not in group]
        notes.insert(first, Note(f"{MORE}({len(group)}) from {stages}", [sid], 2, False))
        folded = True
    rest = [n for n in notes if n.rank == 2 and len(n.series) == 1]
    if len(notes) > budget and len(rest) > 1:  # still over: one line for every single-series note
        count = sum(int(n.text[len(MORE) + 1:].split(")")[0]) if n.text.startswith(MORE) else 1 for n in rest)
        first = notes.index(rest[0])
        notes = [n for n in notes if n not in rest]
        notes.insert(first, Note(f"{MORE}({count}), one series each", [n.series[0] for n in rest], 2, False))
        folded = True
    info = [n for n in notes if n.rank == 2]
    keep = max(0, budget - (len(notes) - len(info)) - 1)
    if len(notes) > budget and len(info) - keep > 1:  # still over: the last shared notes fold into one line
        tail = info[keep:]
        count = sum(_count(n) for n in tail)
        ids = list(dict.fromkeys(sid for n in tail for sid in n.series))
        notes = [n for n in notes if n not in tail] + [Note(f"{MORE}({count}), see --verbose", ids, 2, False)]
        folded = True
    return notes, folded


def _count(n: Note) -> int:
    """How many series notes a printed note stands for: a folded note's count, else one per series."""
    if n.text.startswith(MORE):
        return int(n.text[len(MORE) + 1:].split(")")[0])
    return len(n.series) or 1
